/* VectorAddChannel on avx512: AddChannel{dim=1}((1×1×1×1, f32, L1), (1×1×1×1, f32, L1), (1×1×1×1, f32, L1), serial) */
{
    const float *restrict p0 = &lhs[0];
    const float *restrict p1 = &rhs[0];
    float *restrict p2 = &out[0];
    p2[0] = p0[0] + p1[0];
}
