/* TapsLoopWide on avx2: TapsAccum{stride=1}((1×1×1×32, f32, L1), (1×1×32, f32, L1), (1×32, f32, VRF, 8), serial) */
for (long p = 0; p < 1; p++) {
    for (long q = 0; q < 1; q++) {
        const __m256 w0 = _mm256_loadu_ps(&w[0]);
        const __m256 w1 = _mm256_loadu_ps(&w[8]);
        const __m256 w2 = _mm256_loadu_ps(&w[16]);
        const __m256 w3 = _mm256_loadu_ps(&w[24]);
        out_0 = _mm256_fmadd_ps(_mm256_loadu_ps(&x[0]), w0, out_0);
        out_1 = _mm256_fmadd_ps(_mm256_loadu_ps(&x[8]), w1, out_1);
        out_2 = _mm256_fmadd_ps(_mm256_loadu_ps(&x[16]), w2, out_2);
        out_3 = _mm256_fmadd_ps(_mm256_loadu_ps(&x[24]), w3, out_3);
    }
}
