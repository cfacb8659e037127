/* WidenAxpyLoop16 on avx512: MatmulAccum((1×1×1, f32, L1), (1×1×32, bf16, GL), (1×1×32, f32, L1), serial) */
{
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    const uint16_t *restrict row = &rhs[0];
    const long rs = 0;
    __m512 e0 = _mm512_setzero_ps(), o0 = _mm512_setzero_ps();
    for (long q = 0; q < 1; q++, row += rs) {
        const __m512 x = _mm512_set1_ps(*&lhs[0 + q]);
        __m512i w0 = _mm512_loadu_si512((const void *)(row + 0)); __asm__("" : "+v"(w0));
        e0 = _mm512_fmadd_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), e0);
        o0 = _mm512_fmadd_ps(x, _mm512_castsi512_ps(_mm512_and_si512(w0, hi)), o0);
    }
    const __m512i lo16 = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
    const __m512i hi16 = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
    const __m512 l0 = _mm512_unpacklo_ps(e0, o0), h0 = _mm512_unpackhi_ps(e0, o0);
    _mm512_storeu_ps(&out[0], _mm512_add_ps(_mm512_loadu_ps(&out[0]), _mm512_permutex2var_ps(l0, lo16, h0)));
    _mm512_storeu_ps(&out[16], _mm512_add_ps(_mm512_loadu_ps(&out[16]), _mm512_permutex2var_ps(l0, hi16, h0)));
}
