/* VectorFill on avx2: Fill{value=0}((1×1×4, f32, VRF, 4), serial) */
dst_0 = _mm_setzero_ps();
