/* OuterProductLoopWide on avx512: MatmulAccum((1×1×1, f32, L1), (1×1×64, f32, L1), (1×1×64, f32, VRF, 16), serial) */
for (long q = 0; q < 1; q++) {
    const __m512 b0 = _mm512_loadu_ps(&rhs[0]);
    const __m512 b1 = _mm512_loadu_ps(&rhs[16]);
    const __m512 b2 = _mm512_loadu_ps(&rhs[32]);
    const __m512 b3 = _mm512_loadu_ps(&rhs[48]);
    { const __m512 a = _mm512_set1_ps(lhs[0]);
        out_0 = _mm512_fmadd_ps(a, b0, out_0);
        out_1 = _mm512_fmadd_ps(a, b1, out_1);
        out_2 = _mm512_fmadd_ps(a, b2, out_2);
        out_3 = _mm512_fmadd_ps(a, b3, out_3);
    }
}
