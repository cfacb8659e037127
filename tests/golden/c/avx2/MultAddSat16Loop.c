/* MultAddSat16Loop on avx2: MatmulSat16Accum((1×1×64, u8, GL), (1×64×1, s8, GL), (1×1×1, s32, L1), serial) */
{
    const uint8_t *a = &lhs[0];
    const int8_t *b = &rhs[0];
    const long as = &lhs[1] - a;
    const long bs = &rhs[1] - b;
    int32_t acc = 0;
    for (long q = 0; q + 1 < 64; q += 2) {
        acc += morello_sat16((int32_t)a[q * as] * b[q * bs] + (int32_t)a[(q + 1) * as] * b[(q + 1) * bs]);
    }
    out[0] += acc;
}
