/* OuterProductLoop on avx512: MatmulAccum((1×1×1, f32, L1), (1×1×4, f32, L1), (1×1×4, f32, VRF, 4), serial) */
for (long q = 0; q < 1; q++) {
    const __m128 b0 = _mm_loadu_ps(&rhs[0]);
    { const __m128 a = _mm_set1_ps(lhs[0]);
        out_0 = _mm_fmadd_ps(a, b0, out_0);
    }
}
