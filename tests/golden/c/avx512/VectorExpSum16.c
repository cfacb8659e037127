/* VectorExpSum16 on avx512: SoftmaxDenomAccum{dim=0}((1×1, f32, L1), (1×1, f32, L1), (1×1, f32, L1), serial) */
{
    const float *restrict p0 = &src[0];
    const float m = max[0];
    float r = 0.0f;
    for (long q = 0; q < 1; q++) {
        const float e = morello_expf(p0[q] - m);
        r += e;
    }
    denom[0] += r;
}
