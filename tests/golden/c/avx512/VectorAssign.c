/* VectorAssign on avx512: Move((1×1×4, f32, L1), (1×1×4, f32, VRF, 4), serial) */
dst_0 = _mm_loadu_ps(&src[0]);
