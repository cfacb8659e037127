/* VectorExpStoreSum on avx512: SoftmaxUnscaled{dim=2}((1×1×16, f32, L1), (1×1×1, f32, L1), (1×1×16, f32, L1), (1×1×1, f32, L1), serial) */
{
    float *restrict p2 = &dst[0];
    const float *restrict p0 = &src[0];
    const float m = max[0];
    float r = 0.0f;
    const __m256 mv = _mm256_set1_ps(m);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    { __m256 e = morello_exp8_neg(_mm256_sub_ps(_mm256_loadu_ps(p0), mv)); _mm256_storeu_ps(p2, e); acc0 = _mm256_add_ps(acc0, e); }
    { __m256 e = morello_exp8_neg(_mm256_sub_ps(_mm256_loadu_ps(p0 + 8), mv)); _mm256_storeu_ps(p2 + 8, e); acc1 = _mm256_add_ps(acc1, e); }
    r = morello_hsum8(_mm256_add_ps(acc0, acc1));
    denom[0] = r;
}
