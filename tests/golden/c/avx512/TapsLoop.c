/* TapsLoop on avx512: TapsAccum{stride=1}((1×1×1×4, f32, L1), (1×1×4, f32, L1), (1×4, f32, VRF, 4), serial) */
for (long p = 0; p < 1; p++) {
    for (long q = 0; q < 1; q++) {
        const __m128 w0 = _mm_loadu_ps(&w[0]);
        out_0 = _mm_fmadd_ps(_mm_loadu_ps(&x[0]), w0, out_0);
    }
}
