/* WidenCopyBf16 on avx2: Move((1×1×1, bf16, L1), (1×1×1, f32, L1), serial) */
{
    const uint16_t *restrict s = &src[0];
    float *restrict d = &dst[0];
    for (long i = 0; i < 1; i++) {
        d[i] = morello_bf16_f32(s[i]);
    }
}
