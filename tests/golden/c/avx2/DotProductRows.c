/* DotProductRows on avx2: MatmulAccum((1×1×32, f32, L1), (1×32×1, bf16, GL), (1×1×1, f32, L1), serial) */
{
    _Alignas(32) float xs[32];
    for (long q = 0; q < 32; q += 16) {
        const __m256 l = _mm256_loadu_ps(&lhs[0 + q]), h = _mm256_loadu_ps(&lhs[0 + q + 8]);
        _mm256_store_ps(xs + q + 0, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(l, h, 0x88)), 0xD8)));
        _mm256_store_ps(xs + q + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(l, h, 0xDD)), 0xD8)));
    }
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    for (long j = 0; j < 1; j++) {
        const uint16_t *restrict col = &rhs[0];
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (long q = 0; q < 32; q += 32) {
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(col + q + 0)); __asm__("" : "+v"(w0));
            a0 = _mm256_fmadd_ps(_mm256_load_ps(xs + q + 0), _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), a0);
            a1 = _mm256_fmadd_ps(_mm256_load_ps(xs + q + 8), _mm256_castsi256_ps(_mm256_and_si256(w0, hi)), a1);
            __m256i w1 = _mm256_loadu_si256((const __m256i *)(col + q + 16)); __asm__("" : "+v"(w1));
            a2 = _mm256_fmadd_ps(_mm256_load_ps(xs + q + 16), _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16)), a2);
            a3 = _mm256_fmadd_ps(_mm256_load_ps(xs + q + 24), _mm256_castsi256_ps(_mm256_and_si256(w1, hi)), a3);
        }
        out[0] += morello_hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    }
}
