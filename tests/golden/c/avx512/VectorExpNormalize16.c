/* VectorExpNormalize16 on avx512: SoftmaxComplete{dim=0}((1×1, f32, L1), (1×1, f32, L1), (1×1, f32, L1), (1×1, f32, L1), serial) */
{
    const float *restrict p0 = &src[0];
    float *restrict p3 = &dst[0];
    const float m = max[0], inv = 1.0f / denom[0];
    p3[0] = morello_expf(p0[0] - m) * inv;
}
