/* VectorMaxRows on avx512: MaxAccum{dim=0}((2×1, f32, L1, c0), (1×1, f32, L1), serial) */
{
    const float *restrict p0 = &src[0];
    const long rs = &src[1] - p0;
    float *restrict p1 = &dst[0];
    for (long q = 0; q < 1; q++) {
        float s = p0[q];
        s = (p0[1 * rs + q] > s || p0[1 * rs + q] != p0[1 * rs + q] ? p0[1 * rs + q] : s);
        p1[q] = (s > p1[q] || s != s ? s : p1[q]);
    }
}
