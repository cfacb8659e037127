/* OuterProductLoopWide on avx2: MatmulAccum((1×1×1, f32, L1), (1×1×32, f32, L1), (1×1×32, f32, VRF, 8), serial) */
for (long q = 0; q < 1; q++) {
    const __m256 b0 = _mm256_loadu_ps(&rhs[0]);
    const __m256 b1 = _mm256_loadu_ps(&rhs[8]);
    const __m256 b2 = _mm256_loadu_ps(&rhs[16]);
    const __m256 b3 = _mm256_loadu_ps(&rhs[24]);
    { const __m256 a = _mm256_set1_ps(lhs[0]);
        out_0 = _mm256_fmadd_ps(a, b0, out_0);
        out_1 = _mm256_fmadd_ps(a, b1, out_1);
        out_2 = _mm256_fmadd_ps(a, b2, out_2);
        out_3 = _mm256_fmadd_ps(a, b3, out_3);
    }
}
