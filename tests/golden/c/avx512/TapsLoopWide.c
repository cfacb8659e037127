/* TapsLoopWide on avx512: TapsAccum{stride=1}((1×1×1×64, f32, L1), (1×1×64, f32, L1), (1×64, f32, VRF, 16), serial) */
for (long p = 0; p < 1; p++) {
    for (long q = 0; q < 1; q++) {
        const __m512 w0 = _mm512_loadu_ps(&w[0]);
        const __m512 w1 = _mm512_loadu_ps(&w[16]);
        const __m512 w2 = _mm512_loadu_ps(&w[32]);
        const __m512 w3 = _mm512_loadu_ps(&w[48]);
        out_0 = _mm512_fmadd_ps(_mm512_loadu_ps(&x[0]), w0, out_0);
        out_1 = _mm512_fmadd_ps(_mm512_loadu_ps(&x[16]), w1, out_1);
        out_2 = _mm512_fmadd_ps(_mm512_loadu_ps(&x[32]), w2, out_2);
        out_3 = _mm512_fmadd_ps(_mm512_loadu_ps(&x[48]), w3, out_3);
    }
}
