/* WidenCopyInt on avx512: Move((1×1×1, s8, L1), (1×1×1, s16, L1), serial) */
{
    const int8_t *restrict s = &src[0];
    int16_t *restrict d = &dst[0];
    for (long i = 0; i < 1; i++) {
        d[i] = (int16_t)s[i];
    }
}
