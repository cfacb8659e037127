/* VectorReluStream on avx2: Relu((1×1, f32, L1), (1×1, f32, GL), serial) */
{
    const float *restrict s = &src[0];
    float *restrict d = &dst[0];
    long i = 0;
    for (; i < 1 && ((uintptr_t)(d + i) & 31); i++) d[i] = s[i] < 0.0f ? 0.0f : s[i];
    if (i + 8 <= 1 && ((uintptr_t)(d + i) & 63)) {
        { const __m256 v = _mm256_loadu_ps(s + i); _mm256_storeu_ps(d + i, _mm256_max_ps(_mm256_setzero_ps(), v)); }
        i += 8;
    }
    for (; i + 16 <= 1; i += 16) {
        { const __m256 v = _mm256_loadu_ps(s + i); _mm256_stream_ps(d + i, _mm256_max_ps(_mm256_setzero_ps(), v)); }
        { const __m256 v = _mm256_loadu_ps(s + i + 8); _mm256_stream_ps(d + i + 8, _mm256_max_ps(_mm256_setzero_ps(), v)); }
    }
    for (; i + 8 <= 1; i += 8) {
        { const __m256 v = _mm256_loadu_ps(s + i); _mm256_storeu_ps(d + i, _mm256_max_ps(_mm256_setzero_ps(), v)); }
    }
    for (; i < 1; i++) d[i] = s[i] < 0.0f ? 0.0f : s[i];
}
