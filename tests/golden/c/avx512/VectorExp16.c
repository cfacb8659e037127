/* VectorExp16 on avx512: SoftmaxExp{dim=0}((1×1, f32, L1), (1×1, f32, L1), (1×1, f32, L1), serial) */
{
    const float *restrict p0 = &src[0];
    float *restrict p2 = &dst[0];
    const float m = max[0];
    p2[0] = morello_expf(p0[0] - m);
}
