/* WidenPairPack on avx512: Move((1×2×8, s8, L1, c1), (1×2×8, s16, L1, [2,1]), serial) */
{
    const int8_t *r0 = &src[0];
    const int8_t *r1 = &src[8];
    int16_t *d = &dst[0];
    for (long j = 0; j < 8; j += 8) {
        __m128i x = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(r0 + j)), _mm_loadl_epi64((const __m128i *)(r1 + j)));
        _mm256_storeu_si256((__m256i *)(d + 2 * j), _mm256_cvtepi8_epi16(x));
    }
}
