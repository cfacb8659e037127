/* DpbusdLoop on avx512: MatmulAccum((1×1×4, u8, GL), (1×4×8, s8, GL, [2,1]), (1×1×8, s32, VRF, 8), serial) */
{
    const uint8_t *a0 = &lhs[0];
    const int8_t *b = &rhs[0];
    const long bs = 0;
    __m256i c0_0 = out_0;
    for (long q = 0; q < 4; q += 4, b += bs) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + 0));
        const __m256i x0 = _mm256_set1_epi32(morello_quad_u8(a0 + q));
        c0_0 = morello_dpbusd8(c0_0, x0, b0);
    }
    out_0 = c0_0;
}
