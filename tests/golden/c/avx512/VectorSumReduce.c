/* VectorSumReduce on avx512: SumAccum{dim=0}((1×1, f32, L1), (1×1, f32, L1), serial) */
{
    const float *restrict p0 = &src[0];
    float r = p0[0];
    dst[0] = dst[0] + r;
}
