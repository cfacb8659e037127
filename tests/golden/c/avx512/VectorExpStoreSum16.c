/* VectorExpStoreSum16 on avx512: SoftmaxUnscaled{dim=2}((1×1×16, f32, L1), (1×1×1, f32, L1), (1×1×16, f32, L1), (1×1×1, f32, L1), serial) */
{
    float *restrict p2 = &dst[0];
    const float *restrict p0 = &src[0];
    const float m = max[0];
    float r = 0.0f;
    const __m512 mv = _mm512_set1_ps(m);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    { __m512 e = morello_exp16_neg(_mm512_sub_ps(_mm512_loadu_ps(p0), mv)); _mm512_storeu_ps(p2, e); acc0 = _mm512_add_ps(acc0, e); }
    r = morello_hsum16(_mm512_add_ps(acc0, acc1));
    denom[0] = r;
}
