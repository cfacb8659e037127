/* VectorDivScalar on avx512: DivReduced{dim=0}((1×1, f32, L1), (1×1, f32, L1), serial) */
{
    float *restrict p1 = &dst[0];
    const float inv = 1.0f / denom[0];
    p1[0] = p1[0] * inv;
}
