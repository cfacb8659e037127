/* ValueFill on avx2: Fill{value=-inf}((1×1, f32, L1), serial) */
dst[0] = -INFINITY;
