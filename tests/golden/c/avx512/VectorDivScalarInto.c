/* VectorDivScalarInto on avx512: DivReducedInto{dim=1}((1×1, f32, L1), (1×1, f32, L1), (1×1, f32, L1), serial) */
{
    const float *restrict p1 = &src[0];
    float *restrict p2 = &dst[0];
    const float inv = 1.0f / denom[0];
    p2[0] = p1[0] * inv;
}
