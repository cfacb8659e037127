/* WidenAxpySweep on avx512: MatmulAccum((1×1×8, f32, L1), (1×8×128, bf16, GL, c1), (1×1×128, f32, L1), serial) */
{
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    float *restrict y = &out[0];
    const float *restrict xs = &lhs[0];
    const uint16_t *restrict w0 = &rhs[0];
    const long rs = &rhs[128] - w0;
    for (long g = 0; g < 128; g += 16) {
        const __m256 v0 = _mm256_loadu_ps(y + g), v1 = _mm256_loadu_ps(y + g + 8);
        _mm256_storeu_ps(y + g + 0, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v0, v1, 0x88)), 0xD8)));
        _mm256_storeu_ps(y + g + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v0, v1, 0xDD)), 0xD8)));
    }
    for (long kk = 0; kk < 8; kk += 8) {
        for (long c = 0; c < 128; c += 64) {
            const uint16_t *restrict row = w0 + kk * rs + c;
            __m256 e0 = _mm256_loadu_ps(y + c + 0), o0 = _mm256_loadu_ps(y + c + 8);
            __m256 e1 = _mm256_loadu_ps(y + c + 16), o1 = _mm256_loadu_ps(y + c + 24);
            __m256 e2 = _mm256_loadu_ps(y + c + 32), o2 = _mm256_loadu_ps(y + c + 40);
            __m256 e3 = _mm256_loadu_ps(y + c + 48), o3 = _mm256_loadu_ps(y + c + 56);
            for (long q = 0; q < 8; q++, row += rs) {
                const __m256 x = _mm256_set1_ps(xs[kk + q]);
                __m256i w0 = _mm256_loadu_si256((const __m256i *)(row + 0)); __asm__("" : "+v"(w0));
                e0 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), e0);
                o0 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_and_si256(w0, hi)), o0);
                __m256i w1 = _mm256_loadu_si256((const __m256i *)(row + 16)); __asm__("" : "+v"(w1));
                e1 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16)), e1);
                o1 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_and_si256(w1, hi)), o1);
                __m256i w2 = _mm256_loadu_si256((const __m256i *)(row + 32)); __asm__("" : "+v"(w2));
                e2 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_slli_epi32(w2, 16)), e2);
                o2 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_and_si256(w2, hi)), o2);
                __m256i w3 = _mm256_loadu_si256((const __m256i *)(row + 48)); __asm__("" : "+v"(w3));
                e3 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_slli_epi32(w3, 16)), e3);
                o3 = _mm256_fmadd_ps(x, _mm256_castsi256_ps(_mm256_and_si256(w3, hi)), o3);
            }
            _mm256_storeu_ps(y + c + 0, e0); _mm256_storeu_ps(y + c + 8, o0);
            _mm256_storeu_ps(y + c + 16, e1); _mm256_storeu_ps(y + c + 24, o1);
            _mm256_storeu_ps(y + c + 32, e2); _mm256_storeu_ps(y + c + 40, o2);
            _mm256_storeu_ps(y + c + 48, e3); _mm256_storeu_ps(y + c + 56, o3);
        }
    }
    for (long g = 0; g < 128; g += 16) {
        const __m256 e = _mm256_loadu_ps(y + g), o = _mm256_loadu_ps(y + g + 8);
        const __m256 l = _mm256_unpacklo_ps(e, o), h = _mm256_unpackhi_ps(e, o);
        _mm256_storeu_ps(y + g, _mm256_permute2f128_ps(l, h, 0x20));
        _mm256_storeu_ps(y + g + 8, _mm256_permute2f128_ps(l, h, 0x31));
    }
}
