/* Assign on avx2: Move((1×1, f32, L1), (1×1, f32, L1), serial) */
dst[0] = src[0];
