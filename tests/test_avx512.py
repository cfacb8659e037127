"""The AVX-512 target: 16-lane register tiles, verified against numpy where the host has
AVX-512; refused with one line where it does not."""
from __future__ import annotations

import numpy as np
import pytest

import morello
from morello.memory import AVX2, AVX512, Level, host_lacks
from morello.rewrites import Select


def test_a_host_without_avx512_is_told_so():
    flags = ["fpu", "avx", "avx2", "fma"]
    assert host_lacks(AVX2, flags) is None
    reason = host_lacks(AVX512, flags)
    assert reason is not None and "avx512f" in reason and "\n" not in reason
    # Skylake-SP has AVX-512 F, BW and VL but not VNNI (DpbusdLoop's vpdpbusd).
    skx = flags + ["avx512f", "avx512bw", "avx512vl"]
    assert "avx512_vnni" in (host_lacks(AVX512, skx) or "")
    assert host_lacks(AVX512, skx + ["avx512_vnni"]) is None


@pytest.mark.isa("avx512")
@pytest.mark.parametrize("m, k, n", [(64, 64, 64), (13, 20, 40), (6, 8, 24)])
def test_exact_byte_matmul_takes_vpdpbusd(m, k, n):
    """u8 x s8 -> s32 by four-byte dot products (no s16 widening), exact at the
    extremes: each lane's four products 255 * -128 and 255 * 127 (beyond s16, where
    vpmaddubsw saturates) and, with k = 64, sums far beyond it."""
    prog = morello.synthesize(morello.matmul(m, k, n, dtypes="u8,s8,s32", target="avx512"),
                              target="avx512", db=False)
    leaves = {str(x.action) for x in prog.impl.walk() if not x.children}
    assert "DpbusdLoop" in leaves and "PairMaddS16" not in leaves, prog.impl.pformat()
    fn = prog.compile()
    ok, err = prog.verify(fn)
    assert ok and err == 0.0
    a = np.full((m, k), 255, np.uint8)
    for fill in (-128, 127):
        b = np.full((k, n), fill, np.int8)
        b[:, ::3] = -fill - 1
        np.testing.assert_array_equal(fn(a, b), a.astype(np.int32) @ b.astype(np.int32))


@pytest.mark.isa("avx512")
@pytest.mark.parametrize("make", [
    lambda: morello.matmul(64, 64, 64, target="avx512"),
    lambda: morello.matmul(7, 33, 50, batch=2, target="avx512"),
    lambda: morello.softmax(9, 70, target="avx512"),
    lambda: morello.attention(20, 16, target="avx512"),
], ids=["matmul 64^3", "matmul odd batched", "softmax", "attention"])
def test_avx512_programs_match_numpy(make):
    prog = morello.synthesize(make(), target="avx512", db=False)
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.isa("avx512")
def test_register_tiles_take_zmm_vectors():
    prog = morello.synthesize(morello.matmul(32, 32, 64, target="avx512"), target="avx512",
                              db=False)
    vrf = [o for n in prog.impl.walk() for o in n.spec.operands if o.vector_size]
    assert any(o.vector_size == 16 for o in vrf)
    assert "__m512" in prog.c_source and "_mm512_fmadd_ps" in prog.c_source


EXP16_C = r'''
void exp8(const float *x, float *y, long n) {
    for (long i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, morello_exp8_neg(_mm256_loadu_ps(x + i)));
}
void exp16(const float *x, float *y, long n) {
    for (long i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, morello_exp16_neg(_mm512_loadu_ps(x + i)));
}
float hsum16(const float *x) { return morello_hsum16(_mm512_loadu_ps(x)); }
float hmax16(const float *x) { return morello_hmax16(_mm512_loadu_ps(x)); }
'''


@pytest.mark.isa("avx512")
def test_the_16_lane_exp_equals_the_8_lane_one_bit_for_bit():
    """morello_exp16_neg takes morello_exp8_neg's steps (whose error tests/test_softmax.py
    bounds), so their results are the same bits: non-positive inputs, -inf, NaN, the
    subnormal edge; the 16-lane horizontal sum and max see every lane."""
    import ctypes

    import numpy as np

    from morello.codegen import compile_c
    from morello.codegen.emit import partial

    lib = ctypes.CDLL(str(compile_c(partial("prelude.c") + EXP16_C, AVX512.cflags)))
    for f in (lib.exp8, lib.exp16):
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    for f in (lib.hsum16, lib.hmax16):
        f.argtypes, f.restype = [ctypes.c_void_p], ctypes.c_float
    bits = np.arange(0, 2**31, 4093, dtype=np.uint64).astype(np.uint32) | 0x80000000
    x = np.concatenate([bits.view(np.float32), np.array([-np.inf, np.nan, -88.0, -87.68,
                                                         -87.34, 0.0, -0.0], np.float32)])
    x = np.concatenate([x, np.zeros(-len(x) % 16, np.float32)])
    y8, y16 = np.empty_like(x), np.empty_like(x)
    lib.exp8(x.ctypes.data, y8.ctypes.data, x.size)
    lib.exp16(x.ctypes.data, y16.ctypes.data, x.size)
    assert (y8.view(np.uint32) == y16.view(np.uint32)).all()
    v = np.arange(1, 17, dtype=np.float32) * np.float32(0.5)
    for i in range(16):  # each lane holds the maximum once
        w = v.copy()
        w[i] = 100.0
        assert lib.hmax16(w.ctypes.data) == 100.0
    assert lib.hsum16(v.ctypes.data) == float(v.sum())


@pytest.mark.isa("avx512")
@pytest.mark.parametrize("make", [
    lambda: morello.softmax(6, 4096, target="avx512"),
    lambda: morello.add(64, 256, target="avx512"),
    lambda: morello.reduce_sum(8, 1000, dim=1, target="avx512"),
    lambda: morello.reduce_max(8, 1000, dim=1, target="avx512"),
], ids=["softmax", "add", "sum", "max"])
def test_long_rows_take_16_lane_stream_kernels_and_match_numpy(make):
    prog = morello.synthesize(make(), target="avx512", db=False)
    kernels = [n.action.kernel for n in prog.impl.walk() if isinstance(n.action, Select)]
    assert any(k.endswith("16") for k in kernels), prog.impl.pformat()
    assert "__m512" in prog.c_source
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.isa("avx512")
def test_rows_of_8_keep_the_8_lane_kernels():
    """A softmax row of 8 is one AVX2 vector but 8 scalar exps in 16-lane code: the search
    keeps the 8-lane exp kernels there (both widths are in the AVX-512 table)."""
    prog = morello.synthesize(morello.softmax(16, 8, target="avx512"), target="avx512",
                              db=False)
    kernels = [n.action.kernel for n in prog.impl.walk() if isinstance(n.action, Select)]
    exps = [k for k in kernels if "Exp" in k]
    assert exps and not any(k.endswith("16") for k in exps), kernels
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.isa("avx512")
@pytest.mark.parametrize("k, n", [(2048, 4096), (64, 3), (4096, 1)])
def test_bf16_dot_rows_in_turn_take_sixteen_lanes(k, n):
    """gemma's weight rows read one after another, 64 bf16 a step in zmm, scheduled by
    hand; from main memory the search reads them as 8 long stripes side by side instead
    (DotProductStripes, in ymm: the built-in constants price long runs side by side at
    0.86x a line of one run); against numpy f32."""
    from morello import Move, Select, ToAccum, schedule

    spec = morello.matmul(1, k, n, dtypes=("f32", "bf16", "f32"), rhs_layout="cm",
                          target="avx512")
    if k * n >= 1 << 20:
        prog = morello.synthesize(spec, target="avx512", db=False)
        _check_gemma_matvec(prog, "DotProductStripes", k, n, seed=5, rtol=1e-4)
    prog = schedule(spec, [Move(0, Level.L1), Move(2, Level.L1), ToAccum(), None,
                           Select("DotProductRows16")], target="avx512")
    _check_gemma_matvec(prog, "DotProductRows16", k, n, seed=5, rtol=1e-4)


@pytest.mark.isa("avx512")
@pytest.mark.parametrize("k, n", [(128, 64), (64, 12), (96, 40)])
def test_bf16_dot_rows_take_sixteen_lanes(k, n):
    """gemma's W[N×K] rows dotted with x, 32 bf16 a step (8 and 4 rows at once), against
    numpy f32 on the exactly widened weights."""
    prog = morello.synthesize(morello.matmul(1, k, n, dtypes=("f32", "bf16", "f32"),
                                             rhs_layout="cm", target="avx512"),
                              target="avx512", db=False)
    _check_gemma_matvec(prog, "DotProductLoop16", k, n, seed=4, rtol=1e-5)


def _check_gemma_matvec(prog, kernel: str, k: int, n: int, seed: int, rtol: float) -> None:
    """``prog`` (a bf16 matvec in gemma's orientation) uses ``kernel`` and matches numpy
    f32 on the exactly widened weights, called with ``W.T`` of a row-major ``W[n×k]``."""
    import ml_dtypes

    leaves = {str(x.action) for x in prog.impl.walk() if not x.children}
    assert kernel in leaves, prog.impl.pformat()
    fn = prog.compile()
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
    w = np.ascontiguousarray(rng.uniform(-1, 1, (n, k)).astype(ml_dtypes.bfloat16)).T
    np.testing.assert_allclose(fn(x, w), x @ w.astype(np.float32), rtol=rtol, atol=1e-5 * k)


@pytest.mark.isa("avx512")
@pytest.mark.parametrize("k, n", [(8, 64), (1, 32), (5, 64), (16, 32)])
def test_bf16_axpy_in_sixteen_lanes_matches_numpy(k, n):
    """x . W with 32 bf16 a zmm vector (WidenAxpyLoop16): even columns by a shift, odd
    ones by a mask, interleaved back by two-source permutes; over any k."""
    from morello import Move, ToAccum, schedule

    spec = morello.matmul(1, k, n, dtypes=("f32", "bf16", "f32"))
    prog = schedule(spec, [Move(0, Level.L1), Move(2, Level.L1), ToAccum(), None,
                           Select("WidenAxpyLoop16")], target="avx512")
    ok, err = prog.verify(prog.compile())
    assert ok, err


@pytest.mark.isa("avx512")
def test_x_w_in_cache_takes_the_sixteen_lane_sweep():
    """x . W 1x512x1024 within the last-level cache: the 16-lane sweep (WidenAxpySweep16:
    8 rows of W over each 64 columns in turn, out in even/odd order per 32 throughout),
    W's rows read from main memory by the kernel; 1.12x the 16-lane axpy over Split(8)
    that the search took before (21 alternating rounds, Zen 4)."""
    prog = morello.synthesize(morello.matmul(1, 512, 1024, dtypes=("f32", "bf16", "f32")),
                              target="avx512", db=False)
    text = prog.impl.pformat()
    assert "WidenAxpySweep16" in text, text
    ok, err = prog.verify(prog.compile())
    assert ok, err


@pytest.mark.isa("avx512")
@pytest.mark.parametrize("k, n, split", [(48, 192, 16), (8, 128, None)])
def test_bf16_sweep_in_sixteen_lanes_matches_numpy(k, n, split):
    """WidenAxpySweep16 reorders out per 32 columns before its loops and back after:
    under a split of k each call starts from the earlier calls' sums in columns' order."""
    from morello import Move, Split, ToAccum, schedule

    spec = morello.matmul(1, k, n, dtypes=("f32", "bf16", "f32"))
    steps = [Move(0, Level.L1), Move(2, Level.L1), ToAccum(), None]
    steps += [Split(split)] if split else []
    prog = schedule(spec, steps + [Select("WidenAxpySweep16")], target="avx512")
    ok, err = prog.verify(prog.compile())
    assert ok, err
