"""Convolution: the kinds' reference, the lowering onto matmuls, the emitted programs, and
what a user gets for a bad conv."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import morello
from morello.errors import SpecError
from morello.kinds import conv2d_numpy
from morello.memory import AVX2, AVX512
from morello.rewrites.conv import VARIANTS, ConvLower
from morello.search import Engine


def _naive_conv(x, w, stride, pad):
    """torch's conv2d by its definition: four loops over the output and the window."""
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, f, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("bcij,fcij->bf", win, w)
    return out


@st.composite
def conv_st(draw, max_hw: int = 9, max_c: int = 5):
    stride = draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    pad = draw(st.integers(0, max(0, min(kh, kw) - 1)))
    h = draw(st.integers(max(1, kh - 2 * pad), max_hw))
    w = draw(st.integers(max(1, kw - 2 * pad), max_hw))
    n, c, f = draw(st.integers(1, 2)), draw(st.integers(1, max_c)), draw(st.integers(1, 6))
    return n, c, h, w, f, kh, kw, stride, pad


@settings(max_examples=40, deadline=None)
@given(conv_st())
def test_the_numpy_reference_is_the_definition(case):
    n, c, h, w, f, kh, kw, stride, pad = case
    rng = np.random.default_rng(0)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((f, c, kh, kw))
    np.testing.assert_allclose(conv2d_numpy(x, wt, stride, pad), _naive_conv(x, wt, stride, pad),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", [
    (1, 3, 6, 7, 4, 3, 3, 1, 1),    # a padded 3x3
    (2, 3, 9, 8, 5, 3, 3, 2, 1),    # stride 2 with a remainder, a batch
    (1, 4, 7, 7, 6, 1, 1, 1, 0),    # 1x1: one matmul per image
    (1, 3, 11, 10, 4, 7, 7, 2, 3),  # ResNet's stem in miniature
    (3, 1, 4, 4, 1, 2, 2, 2, 0),    # one channel, one filter
    (1, 5, 6, 6, 7, 3, 3, 3, 2),    # stride 3: windows leave rows unread
    (1, 2, 5, 6, 3, 3, 2, 1, 0),    # a 3x2 kernel
    (1, 8, 6, 6, 17, 3, 3, 1, 1),   # filters beyond one vector
], ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.isa("avx2", "fma")
def test_every_emitted_conv_matches_numpy(case, layout, tmp_path):
    n, c, h, w, f, kh, kw, stride, pad = case
    spec = morello.conv2d(n, c, h, w, f, kh, kw, stride=stride, pad=pad, layout=layout)
    prog = morello.synthesize(spec, db=tmp_path / "conv.sqlite")
    assert isinstance(prog.impl.action, ConvLower)
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.parametrize("case", [
    (1, 3, 6, 7, 4, 3, 3, 1, 1),    # a padded 3x3
    (2, 3, 5, 6, 3, 3, 2, 1, 0),    # unpadded, a 3x2 kernel, a batch
    (1, 4, 7, 7, 6, 1, 1, 1, 0),    # 1x1: W @ X in place (nchw)
    (1, 8, 6, 5, 17, 2, 3, 1, 1),   # filters beyond one vector, an even kernel
    (1, 5, 9, 8, 16, 5, 5, 1, 2),   # 5x5 pad 2: a border wider than one
], ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("variant", ["rows", "wide", "nchw", "im2col", "im2col_nchw"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.isa("avx2", "fma")
def test_every_lowering_matches_numpy(case, variant, layout):
    """Each lowering forced at the root (the search may prefer another) is still right."""
    n, c, h, w, f, kh, kw, stride, pad = case
    spec = morello.conv2d(n, c, h, w, f, kh, kw, stride=stride, pad=pad, layout=layout)
    lower = ConvLower(variant)
    if lower.expand(spec, AVX2) is None:
        flat = kh == kw == 1 and not pad  # ``merged``'s case
        assert (variant in ("nchw", "im2col_nchw") and layout == "nhwc") \
            or (variant in ("wide", "im2col", "im2col_nchw") and flat)
        return
    prog = morello.schedule(spec, [lower])
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.isa("avx2", "fma")
def test_the_callable_takes_torch_shaped_arrays_and_channels_last_ones(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    wt = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    want = conv2d_numpy(x, wt, 1, 1)
    fn = morello.synthesize(morello.conv2d(2, 3, 8, 8, 4, 3, 3, pad=1),
                            db=tmp_path / "a.sqlite").compile()
    np.testing.assert_allclose(fn(x, wt), want, rtol=1e-4, atol=1e-4)
    fl = morello.synthesize(morello.conv2d(2, 3, 8, 8, 4, 3, 3, pad=1, layout="nhwc"),
                            db=tmp_path / "a.sqlite").compile()
    # Channels-last arrays (torch's memory_format=channels_last) go in and come out as such.
    x_cl = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    w_hwio = np.ascontiguousarray(wt.transpose(2, 3, 1, 0)).transpose(3, 2, 0, 1)
    got = fl(x_cl, w_hwio)
    assert got.shape == want.shape and got.transpose(0, 2, 3, 1).flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    out = np.empty((2, 8, 8, 4), np.float32).transpose(0, 3, 1, 2)
    assert fl(x_cl, w_hwio, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="order"):
        fl(x, wt, out=np.empty(want.shape, np.float32))


@settings(max_examples=8, deadline=None)
@given(conv_st(max_hw=5, max_c=3), st.sampled_from([AVX2, AVX512]))
def test_the_dp_equals_the_pure_python_reference_on_small_convs(case, target):
    from morello.reference_dp import memoized_optimum

    n, c, h, w, f, kh, kw, stride, pad = case
    spec = morello.conv2d(n, c, h, w, f, kh, kw, stride=stride, pad=pad, target=target)
    sol, _ = Engine(target).solve(spec)
    main, peaks, depth, action = memoized_optimum(spec, target)
    assert (sol.cost.main, sol.cost.peaks, sol.action) == (main, peaks, action)


def test_the_lowering_s_cost_is_its_children_s():
    """The rows lowering pays every matmul row once per (image, output row, filter row),
    and each NCHW <-> NHWC transpose once per (image, row of pixels)."""
    spec = morello.conv2d(2, 3, 6, 6, 4, 3, 3, pad=1)
    exp = ConvLower().expand(spec, AVX2)
    assert exp is not None
    kinds = [c.kind.info.title for c in exp.children]
    assert kinds == ["Fill", "Transpose", "Move", "Fill", "MatmulAccum", "Transpose"]
    image_in, out = exp.children[1], exp.children[-1]
    assert image_in.shape == (1, 3, 6) and exp.coefs[1] == 2 * 6  # [c, w] -> [w, c]
    assert out.shape == (1, 6, 4) and exp.coefs[-1] == 2 * 6      # [w, f] -> [f, w]
    mm = exp.children[kinds.index("MatmulAccum")]
    assert mm.shape == (1, 6, 9, 4) and exp.coefs[kinds.index("MatmulAccum")] == 2 * 6 * 3
    assert ConvLower("merged").expand(spec, AVX2) is None  # only 1x1, stride 1, no pad
    flat = morello.conv2d(1, 8, 5, 5, 4, 1, 1, layout="nhwc")
    exp = ConvLower("merged").expand(flat, AVX2)
    assert [c.kind.info.title for c in exp.children] == ["Fill", "MatmulAccum"]
    assert exp.children[1].shape == (1, 25, 8, 4)  # in place: no copies


@pytest.mark.parametrize("args, msg", [
    ((1, 3, 5, 5, 2, 7, 7), "larger than the 5x5 padded input"),
    ((1, 0, 5, 5, 2, 3, 3), "c must be >= 1"),
    ((1, 3, 5, 5, 2, 3, 3, {"stride": 0}), "stride must be >= 1"),
    ((1, 3, 5, 5, 2, 3, 3, {"pad": -1}), "pad must be >= 0"),
    ((1, 3, 5, 5, 2, 3, 3, {"pad": 3}), "below the kernel size"),
    ((1, 3, 5, 5, 2, 3, 3, {"layout": "nwhc"}), "layout must be one of"),
    ((1, 3, 5, 5, 2, 3, 3.0), "kw must be an integer"),
], ids=lambda a: str(a)[:40])
def test_bad_convs_are_refused_in_one_line(args, msg):
    kw = args[-1] if isinstance(args[-1], dict) else {}
    sizes = args[:-1] if kw else args
    with pytest.raises(SpecError, match=msg) as e:
        morello.conv2d(*sizes, **kw)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("argv, msg", [
    (["conv", "1", "3", "5", "5", "2", "7", "7"], "larger than"),
    (["conv", "1", "3", "5", "5", "2", "3"], "seven sizes"),
    (["conv", "1", "3", "5", "5", "2", "3", "3", "--stride", "0"], "stride must be"),
    (["matmul", "4", "4", "4", "--pad", "1"], "for conv only"),
    (["conv", "1", "3", "5", "5", "2", "3", "3", "--batch", "2"], "the batch is N"),
])
def test_the_cli_refuses_bad_convs_with_status_2(argv, msg, tmp_path):
    # From another directory: a clone's root first on sys.path would be the source tree.
    r = subprocess.run([sys.executable, "-m", "morello", "synth", *argv, "-q"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# --- CNN blocks: a conv and the steps after it as one chain -------------------------------

def _block_want(steps, x, wt, other, stride, pad):
    y = conv2d_numpy(x, wt, stride, pad)
    for s in steps:
        y = np.maximum(y, 0) if s == "relu" else y + other
    return y


@pytest.mark.parametrize("case, steps", [
    ((1, 3, 6, 7, 4, 3, 3, 1, 1), ("bias", "relu")),   # a padded 3x3 block
    ((2, 3, 9, 8, 5, 3, 3, 2, 1), ("add", "relu")),    # a residual, stride 2, a batch
    ((1, 4, 7, 7, 6, 1, 1, 1, 0), ("bias",)),          # 1x1 and its bias
    ((1, 1, 5, 5, 1, 2, 2, 1, 0), ("relu",)),          # one channel, one filter
    ((1, 8, 6, 6, 17, 3, 3, 1, 1), ("bias", "relu")),  # filters beyond one vector
    ((2, 2, 5, 6, 3, 3, 2, 1, 0), ("add",)),
], ids=lambda c: "x".join(map(str, c)) if isinstance(c[0], int) else "-".join(c))
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.isa("avx2", "fma")
def test_every_emitted_conv_block_matches_numpy(case, steps, layout, tmp_path):
    n, c, h, w, f, kh, kw, stride, pad = case
    spec = morello.conv_block(n, c, h, w, f, kh, kw, steps=steps, stride=stride, pad=pad,
                              layout=layout)
    prog = morello.synthesize(spec, db=tmp_path / "blocks.sqlite")
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.isa("avx2", "fma")
def test_a_block_s_callable_takes_torch_shaped_arrays(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    wt = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal((1, 5, 1, 1)).astype(np.float32)
    fn = morello.synthesize(morello.conv_block(1, 3, 8, 8, 5, 3, 3, pad=1),
                            db=tmp_path / "a.sqlite").compile()
    np.testing.assert_allclose(fn(bias, x, wt), _block_want(("bias", "relu"), x, wt, bias, 1, 1),
                               rtol=1e-4, atol=1e-4)
    res = rng.standard_normal((1, 5, 8, 8)).astype(np.float32)
    fl = morello.synthesize(morello.conv_block(1, 3, 8, 8, 5, 3, 3, pad=1, steps=("add", "relu"),
                                               layout="nhwc"), db=tmp_path / "a.sqlite").compile()
    cl = [np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2) for a in (res, x)]
    w_hwio = np.ascontiguousarray(wt.transpose(2, 3, 1, 0)).transpose(3, 2, 0, 1)
    got = fl(*cl, w_hwio)
    assert got.transpose(0, 2, 3, 1).flags.c_contiguous
    np.testing.assert_allclose(got, _block_want(("add", "relu"), x, wt, res, 1, 1),
                               rtol=1e-4, atol=1e-4)


def test_a_channels_last_block_writes_the_conv_in_place():
    """The conv's output is held in the chain output's layout (NHWC), where its lowering
    writes without a copy; a row-major (NCHW) one would be copied out of NHWC."""
    from morello.rewrites.bufferize import Bufferize

    spec = morello.conv_block(1, 8, 10, 10, 16, 3, 3, pad=1, layout="nhwc")
    sol, _ = Engine(AVX2).solve(spec)
    same = [b for b in (Bufferize(1, lvl, True) for lvl in (morello.memory.Level.GL,))
            if b.expand(spec, AVX2) is not None]
    assert same and same[0].buffer(spec).layout == spec.operands[-1].layout
    assert Bufferize(1, morello.memory.Level.GL, True).expand(
        morello.conv_block(1, 8, 10, 10, 16, 3, 3, pad=1), AVX2) is None  # NCHW: row-major


@settings(max_examples=4, deadline=None)
@given(conv_st(max_hw=4, max_c=2), st.sampled_from([("bias", "relu"), ("add",)]))
def test_the_dp_equals_the_pure_python_reference_on_small_blocks(case, steps):
    from morello.reference_dp import memoized_optimum

    n, c, h, w, f, kh, kw, stride, pad = case
    spec = morello.conv_block(n, c, h, w, f, kh, kw, steps=steps, stride=stride, pad=pad)
    sol, _ = Engine(AVX2).solve(spec)
    main, peaks, depth, action = memoized_optimum(spec, AVX2)
    assert (sol.cost.main, sol.cost.peaks, sol.action) == (main, peaks, action)


@pytest.mark.parametrize("argv, msg", [
    (["chain", "conv 1 2 6 6 3 3 3 --stride 0 | bias"], "stride must be >= 1"),
    (["chain", "conv 1 2 6 6 3 3 | relu"], "seven sizes"),
    (["chain", "relu 1 2 6 6 | conv 1 2 6 6 3 3 3"], "cannot be a later chain step"),
    (["chain", "conv 1 2 6 6 3 9 9 | relu"], "larger than"),
])
def test_the_cli_refuses_bad_blocks_in_one_line(argv, msg, tmp_path):
    from probes import run_cli

    code, out, err = run_cli(["synth", *argv, "--db", str(tmp_path / "db.sqlite"), "-q"])
    assert code == 2 and msg in err and err.count("\n") == 1, err


@pytest.mark.parametrize("case, steps", [
    ((1, 3, 6, 7, 4, 3, 3, 1, 1), ("bias", "relu")),
    ((2, 4, 7, 7, 6, 1, 1, 1, 0), ("add", "relu")),
    ((1, 5, 9, 8, 16, 3, 3, 2, 1), ("bias",)),
], ids=lambda c: "x".join(map(str, c)) if isinstance(c[0], int) else "-".join(c))
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.isa("avx2", "fma")
def test_every_lowering_of_a_block_matches_numpy(case, steps, variant, layout):
    """A block lowered whole (the steps read the conv's buffer where the conv alone
    copies it out), each lowering forced at the root, is right where it applies, and
    applies where the conv's own lowering does."""
    n, c, h, w, f, kh, kw, stride, pad = case
    spec = morello.conv_block(n, c, h, w, f, kh, kw, steps=steps, stride=stride, pad=pad,
                              layout=layout)
    conv = morello.conv2d(n, c, h, w, f, kh, kw, stride=stride, pad=pad, layout=layout)
    lower = ConvLower(variant)
    assert (lower.expand(spec, AVX2) is None) == (lower.expand(conv, AVX2) is None)
    if lower.expand(spec, AVX2) is None:
        return
    prog = morello.schedule(spec, [lower])
    from morello import compose

    ch = spec.kind
    assert prog.impl.children[-1].spec.kind == compose.sub_chain(ch, 0, len(steps))[0]
    ok, err = prog.verify()
    assert ok, err


def test_a_channels_last_block_is_lowered_whole():
    """The search prefers the lowering of the whole block (no copy of the conv's output
    before its bias and relu) for a channels-last 3x3 block."""
    from morello.rewrites import actions

    spec = morello.conv_block(1, 16, 20, 20, 32, 3, 3, pad=1, layout="nhwc")
    sol, _ = Engine(AVX2).solve(spec)
    assert isinstance(actions(spec, AVX2)[sol.action], ConvLower)
