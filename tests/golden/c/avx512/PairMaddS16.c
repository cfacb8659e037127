/* PairMaddS16 on avx512: MatmulAccum((1×1×2, s16, L1), (1×2×8, s16, L1, [2,1]), (1×1×8, s32, VRF, 8), serial) */
{
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)&rhs[0]);
    const __m256i a0 = _mm256_set1_epi32(morello_pair_s16(&lhs[0]));
    out_0 = morello_madd_add8(out_0, a0, b0);
}
