/* DotProductLoop on avx2: MatmulAccum((1×1×8, f32, L1), (1×8×1, bf16, GL), (1×1×1, f32, L1), serial) */
{
    const uint16_t *restrict col0 = &rhs[0];
    __m256 acc0_0 = _mm256_setzero_ps();
    for (long q = 0; q < 8; q += 8) {
        acc0_0 = _mm256_fmadd_ps(_mm256_loadu_ps(&lhs[0 + q + 0]), morello_bf16x8(col0 + q + 0), acc0_0);
    }
    out[0] += morello_hsum8(acc0_0);
}
