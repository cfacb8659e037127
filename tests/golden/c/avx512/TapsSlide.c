/* TapsSlide on avx512: TapsAccum{stride=1}((1×1×1×4, f32, L1), (1×1×4, f32, L1), (1×4, f32, VRF, 4), serial) */
for (long p = 0; p < 1; p++) {
    const __m128 w0_0 = _mm_loadu_ps(&w[0]);
    {
        const __m128 x0 = _mm_loadu_ps(&x[0]);
        out_0 = _mm_fmadd_ps(x0, w0_0, out_0);
    }
}
