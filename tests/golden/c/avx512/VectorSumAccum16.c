/* VectorSumAccum16 on avx512: SumAccum{dim=0}((1×1, f32, L1), (1×1, f32, L1), serial) */
{
    const float *restrict p0 = &src[0];
    float *restrict p1 = &dst[0];
    p1[0] = p1[0] + p0[0];
}
