/* MemsetZero on avx512: Fill{value=0}((1×1, f32, GL), serial) */
memset(&dst[0], 0, 4);
