"""Convolutions (pytest-benchmark): the search's cost and the kernels' fraction of the FMA
peak, with issue 43's targets.

Run: ``pytest benchmarks/test_bench_conv.py --benchmark-only``. Each program is verified
against numpy before it is timed (inside C, best of rounds); the peak is measured in the
same test, in the target's own vectors (``timers.fma_peak``). The peer comparisons (torch,
im2col) are ``benchmarks/conv.py``'s.
"""
from __future__ import annotations

import resource
import time

import numpy as np
import pytest
from timers import fma_peak

import morello
from morello import api
from morello.kinds import conv2d_numpy
from morello.memory import TARGETS, host_lacks

# name -> (n, c, h, w, f, kh, kw, stride, pad): ResNet-50's 3x3 and 1x1 layers.
LAYERS = {"3x3": (1, 64, 56, 56, 64, 3, 3, 1, 1), "1x1": (1, 256, 56, 56, 64, 1, 1, 1, 0)}
PEAK_TARGET = 0.85  # the issue's: of the FMA peak, for these layers on both targets


def _targets():
    return [t for t in sorted(TARGETS) if host_lacks(TARGETS[t]) is None]


def test_a_cold_3x3_search_fits_a_minute_and_a_gigabyte(benchmark, tmp_path):
    n, c, h, w, f, kh, kw, s, p = LAYERS["3x3"]
    spec = morello.conv2d(n, c, h, w, f, kh, kw, stride=s, pad=p)

    def cold():
        api.close_sessions()
        return morello.synthesize(spec, db=False)

    prog = benchmark.pedantic(cold, rounds=1, iterations=1)
    seconds = benchmark.stats.stats.max
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    benchmark.extra_info.update(specs_solved=prog.stats.specs_solved, peak_rss_mib=rss_mib)
    assert seconds <= 60 and rss_mib <= 1024
    t0 = time.perf_counter()
    morello.synthesize(spec, db=False)  # warm: the session's memo answers
    assert time.perf_counter() - t0 <= 0.1


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_kernel_fraction_of_peak(benchmark, layer, target, layout, tmp_path):
    n, c, h, w, f, kh, kw, s, p = LAYERS[layer]
    spec = morello.conv2d(n, c, h, w, f, kh, kw, stride=s, pad=p, layout=layout,
                          target=target)
    prog = morello.synthesize(spec, target=target, db=str(tmp_path / "conv.sqlite"))
    fn = prog.compile()
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
    wt = rng.uniform(-1, 1, (f, c, kh, kw)).astype(np.float32)
    ins = [x, wt]
    if layout == "nhwc":  # the callable takes channels-last arrays in their torch shape
        ins = [np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2),
               np.ascontiguousarray(wt.transpose(2, 3, 1, 0)).transpose(3, 2, 0, 1)]
    out = fn(*ins)
    np.testing.assert_allclose(out, conv2d_numpy(x, wt, s, p), rtol=1e-3, atol=1e-3)
    iters = max(1, int(0.02 / max(fn.time(*ins, iters=1, out=out), 1e-9)))
    benchmark.pedantic(lambda: fn.time(*ins, iters=iters, out=out), rounds=7)
    best = min(benchmark.stats.stats.data)
    flops = 2 * n * f * c * kh * kw * out.shape[2] * out.shape[3]
    gflops = flops / best / 1e9
    peak = fma_peak(TARGETS[target])()
    benchmark.extra_info.update(verified=True, gflops=gflops, peak_gflops=peak,
                                fraction_of_peak=gflops / peak)
    if gflops / peak < PEAK_TARGET:
        pytest.xfail(f"{gflops / peak:.0%} of the {target} FMA peak, below the issue's "
                     f"{PEAK_TARGET:.0%} (benchmarks/results/2026-12-07-conv.md)")


# MobileNet-v1's depthwise 3x3s: (c, h, stride).
DEPTHWISE = {"dw": (128, 56, 1), "dws2": (128, 56, 2), "dw112": (32, 112, 1)}


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("layer", sorted(DEPTHWISE))
def test_channels_last_depthwise_against_torch(benchmark, layer, target, tmp_path):
    """The issue's "ahead of torch at every layer" for the channels-last depthwise convs:
    morello's program and torch's ``conv2d(..., groups=C)`` on the same channels-last
    image, timed in alternating rounds (torch on its native ISA: on an AVX2 target the
    ratio is against torch's best, not its AVX2 code; ``benchmarks/conv.py`` holds it)."""
    from timers import channels_last, optional_torch

    from morello.kinds import depthwise_numpy

    torch = optional_torch()
    if torch is None:
        pytest.skip("torch is not importable (an optional comparison)")
    c, h, s = DEPTHWISE[layer]
    spec = morello.conv2d(1, c, h, h, c, 3, 3, stride=s, pad=1, groups=c, layout="nhwc",
                          target=target)
    prog = morello.synthesize(spec, target=target, db=str(tmp_path / "dw.sqlite"))
    fn = prog.compile()
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, c, h, h)).astype(np.float32)
    wt = rng.uniform(-1, 1, (c, 1, 3, 3)).astype(np.float32)
    xl = channels_last(x)
    out = fn(xl, wt)
    want = depthwise_numpy(x, wt, s, 1)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
    tx, tw = torch.from_numpy(xl), torch.from_numpy(wt)
    np.testing.assert_allclose(torch.nn.functional.conv2d(tx, tw, stride=s, padding=1,
                                                          groups=c).numpy(), want,
                               rtol=1e-3, atol=1e-3)
    iters = max(1, int(0.02 / max(fn.time(xl, wt, iters=1, out=out), 1e-9)))
    torch_s: list[float] = []

    def torch_round():  # pytest-benchmark's untimed setup: torch's turn of the round
        t0 = time.perf_counter()
        for _ in range(iters):
            torch.nn.functional.conv2d(tx, tw, stride=s, padding=1, groups=c)
        torch_s.append((time.perf_counter() - t0) / iters)
    morello_s: list[float] = []
    benchmark.pedantic(lambda: morello_s.append(fn.time(xl, wt, iters=iters, out=out)),
                       setup=torch_round, rounds=7)
    ratio = float(np.median([t / m for t, m in zip(torch_s, morello_s)]))
    benchmark.extra_info.update(verified=True, vs_torch_channels_last=ratio)
    if ratio < 1.0:
        pytest.xfail(f"{ratio:.2f}x torch channels_last, below the issue's 1.0x "
                     "(benchmarks/results/2026-12-08-depthwise-nhwc-intel.md)")
