/* BroadcastScalar on avx512: Broadcast{dim=0}((1×1, f32, L1), (1×1, f32, L1), serial) */
{
    float *restrict p1 = &dst[0];
    const float s = src[0];
    p1[0] = s;
}
