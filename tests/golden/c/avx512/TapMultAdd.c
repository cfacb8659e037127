/* TapMultAdd on avx512: TapsAccum{stride=1}((1×1×1×1, f32, L1), (1×1×1, f32, L1), (1×1, f32, L1), serial) */
out[0] += x[0] * w[0];
