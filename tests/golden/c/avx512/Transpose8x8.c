/* Transpose8x8 on avx512: Transpose((1×8×8, f32, L1, c1), (1×8×8, f32, L1, c1), serial) */
{
    const __m256 xr0 = _mm256_loadu_ps(&src[0]);
    const __m256 xr1 = _mm256_loadu_ps(&src[8]);
    const __m256 xr2 = _mm256_loadu_ps(&src[16]);
    const __m256 xr3 = _mm256_loadu_ps(&src[24]);
    const __m256 xr4 = _mm256_loadu_ps(&src[32]);
    const __m256 xr5 = _mm256_loadu_ps(&src[40]);
    const __m256 xr6 = _mm256_loadu_ps(&src[48]);
    const __m256 xr7 = _mm256_loadu_ps(&src[56]);
    const __m256 xt0 = _mm256_unpacklo_ps(xr0, xr1), xt1 = _mm256_unpackhi_ps(xr0, xr1);
    const __m256 xt2 = _mm256_unpacklo_ps(xr2, xr3), xt3 = _mm256_unpackhi_ps(xr2, xr3);
    const __m256 xt4 = _mm256_unpacklo_ps(xr4, xr5), xt5 = _mm256_unpackhi_ps(xr4, xr5);
    const __m256 xt6 = _mm256_unpacklo_ps(xr6, xr7), xt7 = _mm256_unpackhi_ps(xr6, xr7);
    const __m256 xu0 = _mm256_shuffle_ps(xt0, xt2, 0x44), xu1 = _mm256_shuffle_ps(xt0, xt2, 0xEE);
    const __m256 xu2 = _mm256_shuffle_ps(xt1, xt3, 0x44), xu3 = _mm256_shuffle_ps(xt1, xt3, 0xEE);
    const __m256 xu4 = _mm256_shuffle_ps(xt4, xt6, 0x44), xu5 = _mm256_shuffle_ps(xt4, xt6, 0xEE);
    const __m256 xu6 = _mm256_shuffle_ps(xt5, xt7, 0x44), xu7 = _mm256_shuffle_ps(xt5, xt7, 0xEE);
    _mm256_storeu_ps(&dst[0], _mm256_permute2f128_ps(xu0, xu4, 0x20));
    _mm256_storeu_ps(&dst[8], _mm256_permute2f128_ps(xu1, xu5, 0x20));
    _mm256_storeu_ps(&dst[16], _mm256_permute2f128_ps(xu2, xu6, 0x20));
    _mm256_storeu_ps(&dst[24], _mm256_permute2f128_ps(xu3, xu7, 0x20));
    _mm256_storeu_ps(&dst[32], _mm256_permute2f128_ps(xu0, xu4, 0x31));
    _mm256_storeu_ps(&dst[40], _mm256_permute2f128_ps(xu1, xu5, 0x31));
    _mm256_storeu_ps(&dst[48], _mm256_permute2f128_ps(xu2, xu6, 0x31));
    _mm256_storeu_ps(&dst[56], _mm256_permute2f128_ps(xu3, xu7, 0x31));
}
