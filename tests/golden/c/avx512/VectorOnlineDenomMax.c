/* VectorOnlineDenomMax on avx512: SoftmaxDenomMaxAccum{dim=0}((1×1, f32, L1), (1×1, f32, L1), (1×1, f32, L1), serial) */
{
    const float *restrict p0 = &src[0];
    const float mo = max[0];
    float t = p0[0];
    for (long q = 0; q < 1; q++) {
        t = p0[q] > t ? p0[q] : t;
    }
    const float m = t > mo ? t : mo;
    float r = 0.0f;
    for (long q = 0; q < 1; q++) {
        r += morello_expf(p0[q] - m);
    }
    denom[0] = denom[0] * morello_expf(mo - m) + r;
    max[0] = m;
}
