/* WidenAxpyLoop on avx512: MatmulAccum((1×1×1, f32, L1), (1×1×16, bf16, GL), (1×1×16, f32, L1), serial) */
{
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    const uint16_t *restrict row = &rhs[0];
    const long rs = 0;
    __m256 e0 = _mm256_setzero_ps(), o0 = _mm256_setzero_ps();
    for (long q = 0; q < 1; q++, row += rs) {
        const __m256 x = _mm256_set1_ps(*&lhs[0 + q]);
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(row + 0)); __asm__("" : "+v"(w0));
        e0 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), e0);
        o0 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_and_si256(w0, hi)), o0);
    }
    const __m256 l0 = _mm256_unpacklo_ps(e0, o0), h0 = _mm256_unpackhi_ps(e0, o0);
    _mm256_storeu_ps(&out[0], _mm256_add_ps(_mm256_loadu_ps(&out[0]), _mm256_permute2f128_ps(l0, h0, 0x20)));
    _mm256_storeu_ps(&out[8], _mm256_add_ps(_mm256_loadu_ps(&out[8]), _mm256_permute2f128_ps(l0, h0, 0x31)));
}
