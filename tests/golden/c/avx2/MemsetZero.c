/* MemsetZero on avx2: Fill{value=0}((1×1, f32, GL), serial) */
memset(&dst[0], 0, 4);
