/* MultAdd on avx2: MatmulAccum((1×1×1, f32, L1), (1×1×1, bf16, L1), (1×1×1, f32, L1), serial) */
out[0] += lhs[0] * morello_bf16_f32(rhs[0]);
