/* MaddubsLoop on avx2: MatmulSat16Accum((1×1×64, u8, GL), (1×64×8, s8, GL, [1,2,1p4]), (1×1×8, s32, VRF, 8), serial) */
{
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t *a0 = &lhs[0];
    const int8_t *b = &rhs[0];
    const long bs = &rhs[32] - b;
    __m256i c0_0 = out_0;
    for (long q = 0; q < 64; q += 4, b += bs) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + 0));
        const __m256i x0 = _mm256_set1_epi32(morello_quad_u8(a0 + q));
        c0_0 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(x0, b0), ones), c0_0);
    }
    out_0 = c0_0;
}
