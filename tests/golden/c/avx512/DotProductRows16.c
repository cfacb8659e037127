/* DotProductRows16 on avx512: MatmulAccum((1×1×64, f32, L1), (1×64×1, bf16, GL), (1×1×1, f32, L1), serial) */
{
    _Alignas(64) float xs[64];
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    for (long q = 0; q < 64; q += 32) {
        const __m512 l = _mm512_loadu_ps(&lhs[0 + q]), h = _mm512_loadu_ps(&lhs[0 + q + 16]);
        _mm512_store_ps(xs + q, _mm512_permutex2var_ps(l, ev, h));
        _mm512_store_ps(xs + q + 16, _mm512_permutex2var_ps(l, od, h));
    }
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    for (long j = 0; j < 1; j++) {
        const uint16_t *restrict col = &rhs[0];
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (long q = 0; q < 64; q += 64) {
            __m512i w0 = _mm512_loadu_si512((const void *)(col + q + 0)); __asm__("" : "+v"(w0));
            a0 = _mm512_fmadd_ps(_mm512_load_ps(xs + q + 0), _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), a0);
            a1 = _mm512_fmadd_ps(_mm512_load_ps(xs + q + 16), _mm512_castsi512_ps(_mm512_and_si512(w0, hi)), a1);
            __m512i w1 = _mm512_loadu_si512((const void *)(col + q + 32)); __asm__("" : "+v"(w1));
            a2 = _mm512_fmadd_ps(_mm512_load_ps(xs + q + 32), _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), a2);
            a3 = _mm512_fmadd_ps(_mm512_load_ps(xs + q + 48), _mm512_castsi512_ps(_mm512_and_si512(w1, hi)), a3);
        }
        const __m512 z = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
        out[0] += morello_hsum16(z);
    }
}
