/* VectorCopy on avx2: Move((1×1×8, f32, L1), (1×1×8, f32, L1), serial) */
_mm256_storeu_ps(&dst[0], _mm256_loadu_ps(&src[0]));
