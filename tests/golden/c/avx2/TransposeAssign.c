/* TransposeAssign on avx2: Transpose((1×1×1, f32, L1), (1×1×1, f32, L1), serial) */
dst[0] = src[0];
