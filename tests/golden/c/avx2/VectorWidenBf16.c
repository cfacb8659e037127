/* VectorWidenBf16 on avx2: Move((1×1×4, bf16, L1), (1×1×4, f32, VRF, 4), serial) */
dst_0 = morello_bf16x4(&src[0]);
