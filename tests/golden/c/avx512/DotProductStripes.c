/* DotProductStripes on avx512: MatmulAccum((1×1×16, f32, L1), (1×16×16, f32, GL, [2,1]), (1×1×16, f32, L1), serial) */
{
    for (long j = 0; j < 2; j++) {
        const float *restrict c0 = &rhs[16 * j];
        __m256 a0 = _mm256_setzero_ps();
        const float *restrict c1 = &rhs[16 * j + 32];
        __m256 a1 = _mm256_setzero_ps();
        const float *restrict c2 = &rhs[16 * j + 64];
        __m256 a2 = _mm256_setzero_ps();
        const float *restrict c3 = &rhs[16 * j + 96];
        __m256 a3 = _mm256_setzero_ps();
        const float *restrict c4 = &rhs[16 * j + 128];
        __m256 a4 = _mm256_setzero_ps();
        const float *restrict c5 = &rhs[16 * j + 160];
        __m256 a5 = _mm256_setzero_ps();
        const float *restrict c6 = &rhs[16 * j + 192];
        __m256 a6 = _mm256_setzero_ps();
        const float *restrict c7 = &rhs[16 * j + 224];
        __m256 a7 = _mm256_setzero_ps();
        for (long q = 0; q < 16; q += 8) {
            {
                const __m256 x = _mm256_loadu_ps(&lhs[0 + q]);
                a0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(c0 + q), a0);
                a1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(c1 + q), a1);
                a2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(c2 + q), a2);
                a3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(c3 + q), a3);
                a4 = _mm256_fmadd_ps(x, _mm256_loadu_ps(c4 + q), a4);
                a5 = _mm256_fmadd_ps(x, _mm256_loadu_ps(c5 + q), a5);
                a6 = _mm256_fmadd_ps(x, _mm256_loadu_ps(c6 + q), a6);
                a7 = _mm256_fmadd_ps(x, _mm256_loadu_ps(c7 + q), a7);
            }
        }
        const __m256 h0 = _mm256_hadd_ps(a0, a1);
        const __m256 h2 = _mm256_hadd_ps(a2, a3);
        const __m256 h4 = _mm256_hadd_ps(a4, a5);
        const __m256 h6 = _mm256_hadd_ps(a6, a7);
        const __m256 q0 = _mm256_hadd_ps(h0, h2), q4 = _mm256_hadd_ps(h4, h6);
        _Alignas(32) float sums[8];
        _mm256_store_ps(sums, _mm256_add_ps(_mm256_permute2f128_ps(q0, q4, 0x20), _mm256_permute2f128_ps(q0, q4, 0x31)));
        out[j] += sums[0];
        out[j + 2] += sums[1];
        out[j + 4] += sums[2];
        out[j + 6] += sums[3];
        out[j + 8] += sums[4];
        out[j + 10] += sums[5];
        out[j + 12] += sums[6];
        out[j + 14] += sums[7];
    }
}
