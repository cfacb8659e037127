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
    ((1, 6, 5, 5, 6, 3, 3, {"groups": 6, "layout": "nhwc"}), "NCHW tensors only"),
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
