/* DotProductLoop16 on avx512: MatmulAccum((1×1×32, f32, L1), (1×32×4, bf16, GL, [2,1], c1), (1×1×4, f32, L1), serial) */
{
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    const uint16_t *restrict col0 = &rhs[0];
    __m512 z0 = _mm512_setzero_ps();
    const uint16_t *restrict col1 = &rhs[32];
    __m512 z1 = _mm512_setzero_ps();
    const uint16_t *restrict col2 = &rhs[64];
    __m512 z2 = _mm512_setzero_ps();
    const uint16_t *restrict col3 = &rhs[96];
    __m512 z3 = _mm512_setzero_ps();
    for (long q = 0; q < 32; q += 32) {
        const __m512 l = _mm512_loadu_ps(&lhs[0 + q]), h = _mm512_loadu_ps(&lhs[0 + q + 16]);
        const __m512 xe = _mm512_permutex2var_ps(l, ev, h), xo = _mm512_permutex2var_ps(l, od, h);
        __m512i w0 = _mm512_loadu_si512((const void *)(col0 + q)); __asm__("" : "+v"(w0));
        z0 = _mm512_fmadd_ps(xe, _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), z0);
        z0 = _mm512_fmadd_ps(xo, _mm512_castsi512_ps(_mm512_and_si512(w0, hi)), z0);
        __m512i w1 = _mm512_loadu_si512((const void *)(col1 + q)); __asm__("" : "+v"(w1));
        z1 = _mm512_fmadd_ps(xe, _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), z1);
        z1 = _mm512_fmadd_ps(xo, _mm512_castsi512_ps(_mm512_and_si512(w1, hi)), z1);
        __m512i w2 = _mm512_loadu_si512((const void *)(col2 + q)); __asm__("" : "+v"(w2));
        z2 = _mm512_fmadd_ps(xe, _mm512_castsi512_ps(_mm512_slli_epi32(w2, 16)), z2);
        z2 = _mm512_fmadd_ps(xo, _mm512_castsi512_ps(_mm512_and_si512(w2, hi)), z2);
        __m512i w3 = _mm512_loadu_si512((const void *)(col3 + q)); __asm__("" : "+v"(w3));
        z3 = _mm512_fmadd_ps(xe, _mm512_castsi512_ps(_mm512_slli_epi32(w3, 16)), z3);
        z3 = _mm512_fmadd_ps(xo, _mm512_castsi512_ps(_mm512_and_si512(w3, hi)), z3);
    }
    __m256 acc0_0 = _mm256_add_ps(_mm512_castps512_ps256(z0), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z0), 1)));
    __m256 acc1_0 = _mm256_add_ps(_mm512_castps512_ps256(z1), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z1), 1)));
    __m256 acc2_0 = _mm256_add_ps(_mm512_castps512_ps256(z2), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z2), 1)));
    __m256 acc3_0 = _mm256_add_ps(_mm512_castps512_ps256(z3), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z3), 1)));
    const __m256 h0 = _mm256_hadd_ps(acc0_0, acc1_0);
    const __m256 h2 = _mm256_hadd_ps(acc2_0, acc3_0);
    const __m256 q0 = _mm256_hadd_ps(h0, h2);
    const __m128 sums = _mm_add_ps(_mm256_castps256_ps128(q0), _mm256_extractf128_ps(q0, 1));
    _mm_storeu_ps(&out[0], _mm_add_ps(_mm_loadu_ps(&out[0]), sums));
}
