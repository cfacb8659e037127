/* BroadcastVecMultAdd on avx512: MatmulAccum((1×1×1, f32, L1), (1×1×4, f32, VRF, 4), (1×1×4, f32, VRF, 4), serial) */
{
    const __m128 a = _mm_set1_ps(lhs[0]);
    out_0 = _mm_fmadd_ps(a, rhs_0, out_0);
}
