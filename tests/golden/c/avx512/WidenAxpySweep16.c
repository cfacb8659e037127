/* WidenAxpySweep16 on avx512: MatmulAccum((1×1×8, f32, L1), (1×8×128, bf16, GL, c1), (1×1×128, f32, L1), serial) */
{
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    float *restrict y = &out[0];
    const float *restrict xs = &lhs[0];
    const uint16_t *restrict w0 = &rhs[0];
    const long rs = &rhs[128] - w0;
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i lo16 = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi16 = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    for (long g = 0; g < 128; g += 32) {
        const __m512 v0 = _mm512_loadu_ps(y + g), v1 = _mm512_loadu_ps(y + g + 16);
        _mm512_storeu_ps(y + g + 0, _mm512_permutex2var_ps(v0, ev, v1));
        _mm512_storeu_ps(y + g + 16, _mm512_permutex2var_ps(v0, od, v1));
    }
    for (long kk = 0; kk < 8; kk += 8) {
        for (long c = 0; c < 128; c += 64) {
            const uint16_t *restrict row = w0 + kk * rs + c;
            __m512 e0 = _mm512_loadu_ps(y + c + 0), o0 = _mm512_loadu_ps(y + c + 16);
            __m512 e1 = _mm512_loadu_ps(y + c + 32), o1 = _mm512_loadu_ps(y + c + 48);
            for (long q = 0; q < 8; q++, row += rs) {
                const __m512 x = _mm512_set1_ps(xs[kk + q]);
                __m512i w0 = _mm512_loadu_si512((const void *)(row + 0)); __asm__("" : "+v"(w0));
                e0 = _mm512_fmadd_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), e0);
                o0 = _mm512_fmadd_ps(x, _mm512_castsi512_ps(_mm512_and_si512(w0, hi)), o0);
                __m512i w1 = _mm512_loadu_si512((const void *)(row + 32)); __asm__("" : "+v"(w1));
                e1 = _mm512_fmadd_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), e1);
                o1 = _mm512_fmadd_ps(x, _mm512_castsi512_ps(_mm512_and_si512(w1, hi)), o1);
            }
            _mm512_storeu_ps(y + c + 0, e0); _mm512_storeu_ps(y + c + 16, o0);
            _mm512_storeu_ps(y + c + 32, e1); _mm512_storeu_ps(y + c + 48, o1);
        }
    }
    for (long g = 0; g < 128; g += 32) {
        const __m512 e = _mm512_loadu_ps(y + g), o = _mm512_loadu_ps(y + g + 16);
        _mm512_storeu_ps(y + g, _mm512_permutex2var_ps(e, lo16, o));
        _mm512_storeu_ps(y + g + 16, _mm512_permutex2var_ps(e, hi16, o));
    }
}
