/* QuadPack on avx2: Move((1×4×8, s8, L1), (1×4×8, s8, L1, [2,1]), serial) */
{
    const int8_t *r0 = &src[0];
    const int8_t *r1 = &src[8];
    const int8_t *r2 = &src[16];
    const int8_t *r3 = &src[24];
    int8_t *d = &dst[0];
    for (long j = 0; j < 8; j += 8) {
        const __m128i x0 = _mm_loadl_epi64((const __m128i *)(r0 + j));
        const __m128i x1 = _mm_loadl_epi64((const __m128i *)(r1 + j));
        const __m128i x2 = _mm_loadl_epi64((const __m128i *)(r2 + j));
        const __m128i x3 = _mm_loadl_epi64((const __m128i *)(r3 + j));
        const __m128i p01 = _mm_unpacklo_epi8(x0, x1), p23 = _mm_unpacklo_epi8(x2, x3);
        _mm_storeu_si128((__m128i *)(d + 4 * j), _mm_unpacklo_epi16(p01, p23));
        _mm_storeu_si128((__m128i *)(d + 4 * j + 16), _mm_unpackhi_epi16(p01, p23));
    }
}
