/* VectorMulStream on avx512: Mul((1×1, f32, L1), (1×1, f32, L1), (1×1, f32, GL), serial) */
{
    const float *restrict s = &lhs[0];
    const float *restrict t = &rhs[0];
    float *restrict d = &out[0];
    long i = 0;
    for (; i < 1 && ((uintptr_t)(d + i) & 31); i++) d[i] = s[i] * t[i];
    if (i + 8 <= 1 && ((uintptr_t)(d + i) & 63)) {
        { const __m256 v = _mm256_loadu_ps(s + i); const __m256 u = _mm256_loadu_ps(t + i); _mm256_storeu_ps(d + i, _mm256_mul_ps(v, u)); }
        i += 8;
    }
    for (; i + 16 <= 1; i += 16) {
        { const __m256 v = _mm256_loadu_ps(s + i); const __m256 u = _mm256_loadu_ps(t + i); _mm256_stream_ps(d + i, _mm256_mul_ps(v, u)); }
        { const __m256 v = _mm256_loadu_ps(s + i + 8); const __m256 u = _mm256_loadu_ps(t + i + 8); _mm256_stream_ps(d + i + 8, _mm256_mul_ps(v, u)); }
    }
    for (; i + 8 <= 1; i += 8) {
        { const __m256 v = _mm256_loadu_ps(s + i); const __m256 u = _mm256_loadu_ps(t + i); _mm256_storeu_ps(d + i, _mm256_mul_ps(v, u)); }
    }
    for (; i < 1; i++) d[i] = s[i] * t[i];
}
