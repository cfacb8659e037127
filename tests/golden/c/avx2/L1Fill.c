/* L1Fill on avx2: Fill{value=-inf}((1×1, f32, L1), serial) */
{
    float *restrict p0 = &dst[0];
    const float s = -INFINITY;
    p0[0] = s;
}
