"""Depthwise convs (torch's ``groups = C``): the kind's reference, the lowerings over
planes and taps, the emitted programs, blocks, and what a user gets for bad groups."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import morello
from morello import compose
from morello.constructors import _spec
from morello.errors import SpecError
from morello.kinds import PrimKind, depthwise_numpy
from morello.memory import AVX2, AVX512
from morello.rewrites import DepthwiseLower
from morello.rewrites.depthwise import VARIANTS
from morello.search import Engine


def _naive(x, w, stride, pad):
    """torch's conv2d at groups = C by its definition: each channel's window times its
    one filter."""
    n, c, h, wd = x.shape
    kh, kw = w.shape[2:]
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("bcij,cij->bc", win, w[:, 0])
    return out


@st.composite
def dw_st(draw, max_hw: int = 9, max_c: int = 5):
    stride = draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    pad = draw(st.integers(0, max(0, min(kh, kw) - 1)))
    h = draw(st.integers(max(1, kh - 2 * pad), max_hw))
    w = draw(st.integers(max(1, kw - 2 * pad), max_hw))
    n, c = draw(st.integers(1, 2)), draw(st.integers(2, max_c))
    return n, c, h, w, kh, kw, stride, pad


def _dw(case, **kw):
    n, c, h, w, kh, kw_, stride, pad = case
    return morello.conv2d(n, c, h, w, c, kh, kw_, stride=stride, pad=pad, groups=c, **kw)


@settings(max_examples=40, deadline=None)
@given(dw_st())
def test_the_numpy_reference_is_the_definition(case):
    n, c, h, w, kh, kw, stride, pad = case
    rng = np.random.default_rng(0)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((c, 1, kh, kw))
    np.testing.assert_allclose(depthwise_numpy(x, wt, stride, pad), _naive(x, wt, stride, pad),
                               rtol=1e-10, atol=1e-10)


def test_groups_c_is_a_depthwise_spec_with_torch_s_shapes():
    spec = morello.conv2d(2, 6, 9, 8, 6, 3, 3, stride=2, pad=1, groups=6)
    assert spec.kind is PrimKind.DEPTHWISE
    assert [o.shape for o in spec.operands] == [(2, 6, 9, 8), (6, 1, 3, 3), (2, 6, 5, 4)]
    assert spec.flops() == 2 * 2 * 6 * 5 * 4 * 9
    assert morello.conv2d(2, 1, 9, 8, 1, 3, 3, groups=1).kind is PrimKind.CONV


CASES = [
    (1, 3, 6, 7, 3, 3, 1, 1),    # a padded 3x3
    (2, 4, 9, 8, 3, 3, 2, 1),    # stride 2 with a remainder, a batch
    (1, 8, 7, 7, 1, 1, 1, 0),    # 1x1: a per-channel scale
    (1, 5, 6, 6, 3, 3, 3, 2),    # stride 3, a border of two
    (1, 2, 5, 6, 3, 2, 1, 0),    # a 3x2 kernel, unpadded
    (1, 3, 20, 21, 5, 5, 1, 2),  # rows beyond one vector, 5x5
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("target", [
    pytest.param("avx2", marks=pytest.mark.isa("avx2", "fma")),
    pytest.param("avx512", marks=pytest.mark.isa("avx512"))])
def test_every_emitted_depthwise_conv_matches_numpy(case, target, tmp_path):
    prog = morello.synthesize(_dw(case, target=target), db=tmp_path / "dw.sqlite")
    assert isinstance(prog.impl.action, DepthwiseLower)
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "planes"])
@pytest.mark.isa("avx2", "fma")
def test_every_lowering_of_a_plane_matches_numpy(case, variant):
    """Each plane's lowering forced under ``planes`` (the search may prefer another) is
    right where it applies; ``grid`` and ``rows`` are for stride 1, ``taps`` for any."""
    spec = _dw(case)
    plane = DepthwiseLower(variant)
    one = DepthwiseLower("planes").plan(spec, AVX2).children[-1]
    assert one.shape[:2] == (1, 1)
    if plane.expand(one, AVX2) is None:
        assert variant in ("grid", "rows") and case[6] > 1
        return
    assert plane.expand(spec, AVX2) is None  # a tensor of many planes: one at a time
    prog = morello.schedule(spec, [DepthwiseLower("planes"), plane])
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.isa("avx2", "fma")
def test_the_accumulating_twin_adds_into_its_output():
    spec = _spec(PrimKind.DEPTHWISE_ACCUM, (1, 3, 5, 6, 3, 3), (1, 1, 0, 0), "f32", None,
                 "avx2")
    rng = np.random.default_rng(3)
    x, wt, o = (rng.standard_normal(t.shape).astype(np.float32) for t in spec.operands)
    for variant in ("grid", "rows", "taps"):
        prog = morello.schedule(spec, [DepthwiseLower("planes"), DepthwiseLower(variant)])
        got = o.copy()  # the output is read: given, not allocated by the callable
        prog.compile()(x, wt, out=got)
        np.testing.assert_allclose(got, o + depthwise_numpy(x, wt, 1, 1), rtol=1e-5,
                                   atol=1e-5, err_msg=variant)
        ok, err = prog.verify()  # which starts the output from random values too
        assert ok, (variant, err)


@pytest.mark.isa("avx2", "fma")
def test_the_callable_takes_torch_shaped_arrays(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
    wt = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)  # torch's weight at groups=4
    fn = morello.synthesize(morello.conv2d(2, 4, 9, 9, 4, 3, 3, stride=2, pad=1, groups=4),
                            db=tmp_path / "a.sqlite").compile()
    np.testing.assert_allclose(fn(x, wt), depthwise_numpy(x, wt, 2, 1), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        fn(x, rng.standard_normal((4, 4, 3, 3)).astype(np.float32))  # a groups=1 weight


@settings(max_examples=8, deadline=None)
@given(dw_st(max_hw=5, max_c=3), st.sampled_from([AVX2, AVX512]))
def test_the_dp_equals_the_pure_python_reference_on_small_depthwise_convs(case, target):
    from morello.reference_dp import memoized_optimum

    spec = _dw(case, target=target)
    sol, _ = Engine(target).solve(spec)
    main, peaks, depth, action = memoized_optimum(spec, target)
    assert (sol.cost.main, sol.cost.peaks, sol.action) == (main, peaks, action)


@pytest.mark.parametrize("args, msg", [
    ((1, 6, 5, 5, 6, 3, 3, {"groups": 3}), "groups must be 1 or C = 6"),
    ((1, 6, 5, 5, 4, 3, 3, {"groups": 6}), "has F = C = 6 filters"),
    ((1, 6, 5, 5, 6, 3, 3, {"groups": 6, "layout": "nhwk"}), "layout must be one of"),
    ((1, 6, 5, 5, 6, 3, 3, {"groups": 0}), "groups must be 1 or C"),
    ((1, 6, 5, 5, 6, 3, 3, {"groups": 6.0}), "groups must be an integer"),
    ((1, 6, 5, 5, 6, 7, 7, {"groups": 6}), "larger than"),
], ids=lambda a: str(a)[:40])
def test_bad_groups_are_refused_in_one_line(args, msg):
    *sizes, kw = args
    with pytest.raises(SpecError, match=msg) as e:
        morello.conv2d(*sizes, **kw)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("argv, msg", [
    (["conv", "1", "6", "5", "5", "6", "3", "3", "--groups", "2"], "groups must be 1 or C"),
    (["conv", "1", "6", "5", "5", "4", "3", "3", "--groups", "6"], "F = C = 6"),
    (["matmul", "4", "4", "4", "--groups", "2"], "for conv only"),
    (["chain", "conv 1 6 5 5 6 3 3 --groups 5 | relu"], "groups must be 1 or C"),
])
def test_the_cli_refuses_bad_groups_with_status_2(argv, msg, tmp_path):
    from probes import run_cli

    code, out, err = run_cli(["synth", *argv, "--db", str(tmp_path / "db.sqlite"), "-q"])
    assert code == 2 and msg in err and err.count("\n") == 1, err


@pytest.mark.parametrize("case, steps", [
    ((1, 3, 6, 7, 3, 3, 1, 1), ("bias", "relu")),   # MobileNet's block in miniature
    ((2, 4, 9, 8, 3, 3, 2, 1), ("add", "relu")),
    ((1, 8, 7, 7, 1, 1, 1, 0), ("bias",)),
], ids=lambda c: "x".join(map(str, c)) if isinstance(c[0], int) else "-".join(c))
@pytest.mark.isa("avx2", "fma")
def test_every_depthwise_block_matches_numpy(case, steps, tmp_path):
    n, c, h, w, kh, kw, stride, pad = case
    spec = morello.conv_block(n, c, h, w, c, kh, kw, steps=steps, stride=stride, pad=pad,
                              groups=c)
    prog = morello.synthesize(spec, db=tmp_path / "blocks.sqlite")
    ok, err = prog.verify()
    assert ok, err
    whole = morello.schedule(spec, [DepthwiseLower("planes")])  # lowered with its steps
    assert whole.impl.children[-1].spec.kind == compose.sub_chain(spec.kind, 0, len(steps))[0]
    ok, err = whole.verify()
    assert ok, err


@pytest.mark.isa("avx2", "fma")
def test_threads_run_the_planes_in_parallel(tmp_path):
    spec = morello.conv2d(1, 16, 12, 12, 16, 3, 3, pad=1, groups=16)
    one = morello.synthesize(spec, db=tmp_path / "a.sqlite")
    two = morello.synthesize(spec, threads=2, db=tmp_path / "a.sqlite")
    assert "#pragma omp parallel" not in one.c_source
    assert "#pragma omp parallel" in two.c_source
    assert two.impl.children[0].spec.serial_only  # each plane's program is serial
    ok, err = two.verify()
    assert ok, err


# --- channels-last: one Taps per output row (``nhwc``) --------------------------------

def _channels_last(a: np.ndarray) -> np.ndarray:
    """``a`` (NCHW) with torch's ``memory_format=channels_last``: the same shape, NHWC
    in memory."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


NHWC_CASES = [*CASES,
              (1, 16, 9, 10, 3, 3, 1, 1),   # whole vectors of channels, a 6-pixel tile
              (1, 40, 7, 13, 3, 3, 2, 1),   # 16 + 16 + 8 channels, stride 2
              (2, 24, 6, 6, 5, 5, 1, 2),
              (1, 10, 13, 17, 1, 7, 2, 4)]  # rows whose windows are all border: zeros


@pytest.mark.parametrize("case", NHWC_CASES, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("target", [
    pytest.param("avx2", marks=pytest.mark.isa("avx2", "fma")),
    pytest.param("avx512", marks=pytest.mark.isa("avx512"))])
def test_every_channels_last_depthwise_conv_matches_numpy(case, target, tmp_path):
    spec = _dw(case, target=target, layout="nhwc")
    prog = morello.synthesize(spec, db=tmp_path / "dw.sqlite")
    assert prog.impl.action == DepthwiseLower("nhwc")  # its only lowering
    ok, err = prog.verify()
    assert ok, err


def test_channels_last_takes_only_its_own_lowering():
    nhwc, nchw = _dw(CASES[0], layout="nhwc"), _dw(CASES[0])
    for v in VARIANTS:
        assert (DepthwiseLower(v).expand(nhwc, AVX2) is not None) == (v == "nhwc")
    assert DepthwiseLower("nhwc").expand(nchw, AVX2) is None


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.isa("avx2", "fma")
def test_a_row_of_channel_vectors_is_a_register_tile_over_every_tap(stride, tmp_path):
    """At 32 channels a row's taps run in registers: every tap of a pixel is summed
    there (one kernel call per tile, the taps its inner loops); at stride 1 TapsSlide
    loads each input vector once for the pixels and taps it serves, at stride 2 it does
    not apply."""
    prog = morello.synthesize(_dw((1, 32, 14, 14, 3, 3, stride, 1), layout="nhwc"),
                              db=tmp_path / "a.sqlite")
    names = {str(n.action) for n in prog.impl.walk()}
    assert ("TapsSlide" in names) == (stride == 1) and names & {"TapsLoop", "TapsSlide"}, names
    assert "for (long p = 0; p < 3; p++)" in prog.c_source
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.isa("avx2", "fma")
def test_the_channels_last_twin_adds_into_its_output():
    spec = _spec(PrimKind.DEPTHWISE_ACCUM, (1, 16, 5, 6, 3, 3), (1, 1, 0, 0), "f32", None,
                 "avx2")
    from morello.rewrites.conv import NHWC
    from morello.tensorspec import fresh
    for i in (0, 2):
        t = spec.operands[i]
        spec = spec.with_operand(i, fresh(t.shape, t.dtype, t.level, NHWC))
    prog = morello.schedule(spec.canonical(), [DepthwiseLower("nhwc")])
    rng = np.random.default_rng(3)
    x, wt, o = (rng.standard_normal(t.shape).astype(np.float32) for t in spec.operands)
    x, o = _channels_last(x), _channels_last(o)
    got = o.copy(order="K")  # channels-last, as the output is
    prog.compile()(x, wt, out=got)
    np.testing.assert_allclose(got, o + depthwise_numpy(x, wt, 1, 1), rtol=1e-5, atol=1e-5)
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.isa("avx2", "fma")
def test_the_channels_last_callable_takes_and_returns_channels_last_arrays(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 24, 9, 9)).astype(np.float32)
    wt = rng.standard_normal((24, 1, 3, 3)).astype(np.float32)
    fn = morello.synthesize(morello.conv2d(1, 24, 9, 9, 24, 3, 3, stride=2, pad=1, groups=24,
                                           layout="nhwc"), db=tmp_path / "a.sqlite").compile()
    got = fn(_channels_last(x), wt)
    assert got.transpose(0, 2, 3, 1).flags.c_contiguous
    np.testing.assert_allclose(got, depthwise_numpy(x, wt, 2, 1), rtol=1e-4, atol=1e-4)


@settings(max_examples=8, deadline=None)
@given(dw_st(max_hw=5, max_c=3), st.sampled_from([AVX2, AVX512]))
def test_the_dp_equals_the_pure_python_reference_on_channels_last_depthwise_convs(case, target):
    from morello.reference_dp import memoized_optimum

    spec = _dw(case, target=target, layout="nhwc")
    sol, _ = Engine(target).solve(spec)
    main, peaks, depth, action = memoized_optimum(spec, target)
    assert (sol.cost.main, sol.cost.peaks, sol.action) == (main, peaks, action)


@pytest.mark.isa("avx2", "fma")
def test_threads_run_the_channels_last_rows_in_parallel(tmp_path):
    spec = morello.conv2d(1, 16, 12, 12, 16, 3, 3, pad=1, groups=16, layout="nhwc")
    two = morello.synthesize(spec, threads=2, db=tmp_path / "a.sqlite")
    assert "#pragma omp parallel" in two.c_source
    ok, err = two.verify()
    assert ok, err


@pytest.mark.parametrize("case, steps", [
    ((1, 16, 6, 7, 3, 3, 1, 1), ("bias", "relu")),
    ((2, 12, 9, 8, 3, 3, 2, 1), ("add", "relu")),
], ids=lambda c: "x".join(map(str, c)) if isinstance(c[0], int) else "-".join(c))
@pytest.mark.isa("avx2", "fma")
def test_every_channels_last_depthwise_block_matches_numpy(case, steps, tmp_path):
    n, c, h, w, kh, kw, stride, pad = case
    spec = morello.conv_block(n, c, h, w, c, kh, kw, steps=steps, stride=stride, pad=pad,
                              groups=c, layout="nhwc")
    prog = morello.synthesize(spec, db=tmp_path / "blocks.sqlite")
    ok, err = prog.verify()
    assert ok, err
    whole = morello.schedule(spec, [DepthwiseLower("nhwc")])  # lowered with its steps
    assert whole.impl.children[-1].spec.kind == compose.sub_chain(spec.kind, 0, len(steps))[0]
    ok, err = whole.verify()
    assert ok, err


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_no_loop_tiles_a_depthwise_block_s_pixels_or_channels(layout):
    """A tile of a block's output rows, columns or channels would lower a depthwise conv
    of a tile of the image with its own zero border: wrong at every tile's edge. Only
    the batch may be tiled (it was: the dims of Conv's table named the wrong ones)."""
    from morello.rewrites.tile import TileOut, tile_actions

    spec = morello.conv_block(2, 16, 7, 7, 16, 3, 3, pad=1, groups=16, layout=layout,
                              serial=False)
    tiled = {a.dim for a in tile_actions(spec, AVX2) if isinstance(a, TileOut)}
    assert tiled == {0}, tiled  # the output's dim 0, the batch


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.isa("avx2", "fma")
def test_a_depthwise_block_on_two_threads_matches_numpy(layout, tmp_path):
    spec = morello.conv_block(1, 16, 7, 7, 16, 3, 3, pad=1, groups=16, layout=layout)
    prog = morello.synthesize(spec, threads=2, db=tmp_path / "a.sqlite")
    ok, err = prog.verify()
    assert ok, err
