"""Morello's f32 matmul kernels against numpy and this machine's FMA peak (pytest-benchmark).

    pytest benchmarks/test_bench_roof.py --benchmark-only               # every shape
    pytest benchmarks --benchmark-only -m "not slow"                     # 64³ and 256³ only

Each kernel is verified against numpy before it is timed. Every round of the benchmark is
``fn.time`` over enough calls to take >= 20 ms (timed inside C). extra_info records GFLOP/s
(from the best C-timed round), numpy's GFLOP/s through Python on one thread, and percent
of the one-core AVX2 FMA peak measured by ``benchmarks/roofline.py`` at the start of the
session. ``benchmarks/roof.py`` prints the fuller comparison as a table.
"""
from __future__ import annotations

import importlib.util
import statistics
import time
from pathlib import Path

import numpy as np
import pytest

import morello

_spec = importlib.util.spec_from_file_location(
    "_morello_roof", Path(__file__).resolve().parent / "roof.py")
roof = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(roof)

SLOW = {(1, 512, 512, 512), (1, 1024, 1024, 1024), (8, 128, 128, 128), (1, 1, 2048, 16384)}
SHAPES = [pytest.param(s, marks=pytest.mark.slow) if s in SLOW else s
          for s in roof.FULL_SHAPES]
ROUNDS = 7


@pytest.fixture(scope="module")
def fma_peak() -> float:
    return roof.measure_roofs()["fma_peak_gflops"]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("roof-db") / "bench.db")


def _numpy_seconds(lhs, rhs) -> tuple[float, float]:
    """(median, best) seconds per np.matmul through Python, each timing >= 20 ms."""
    def timing():
        t0 = time.perf_counter()
        for _ in range(iters):
            np.matmul(lhs, rhs)
        return (time.perf_counter() - t0) / iters

    iters = 1
    for _ in range(5):  # calibrate (and warm up)
        secs = timing() * iters
        if secs >= roof.MIN_SECONDS:
            break
        iters = max(iters + 1, int(iters * 1.2 * roof.MIN_SECONDS / max(secs, 1e-9)) + 1)
    runs = [timing() for _ in range(ROUNDS)]
    return statistics.median(runs), min(runs)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_roof_kernel_gflops(benchmark, shape, fma_peak, db):
    from threadpoolctl import threadpool_limits

    b, m, k, n = shape
    prog = morello.synthesize(morello.matmul(m, k, n, batch=b), db=db)
    fn = prog.compile()
    rng = np.random.default_rng(0)
    lhs = rng.uniform(-1, 1, (b, m, k)).astype(np.float32)
    rhs = rng.uniform(-1, 1, (b, k, n)).astype(np.float32)
    with threadpool_limits(1):
        ref = lhs @ rhs
    np.testing.assert_allclose(fn(lhs, rhs), ref, rtol=1e-4, atol=1e-3)

    iters = roof.calibrate(fn, lhs, rhs)
    per_call: list[float] = []
    benchmark.pedantic(lambda: per_call.append(fn.time(lhs, rhs, iters=iters)),
                       rounds=ROUNDS, iterations=1)
    flops = prog.spec.flops()
    gflops = flops / min(per_call) / 1e9

    with threadpool_limits(1):
        a2, b2 = (lhs[0], rhs[0]) if b == 1 else (lhs, rhs)
        np_median, np_best = _numpy_seconds(a2, b2)
    benchmark.extra_info.update(
        verified=True, cost=prog.cost, synthesis_seconds=prog.synthesis_seconds,
        iters_per_round=iters, seconds_per_call_best=min(per_call),
        seconds_per_call_median=statistics.median(per_call),
        gflops=gflops, gflops_median=flops / statistics.median(per_call) / 1e9,
        numpy_gflops=flops / np_best / 1e9, numpy_gflops_median=flops / np_median / 1e9,
        fma_peak_gflops=fma_peak, percent_of_peak=100 * gflops / fma_peak,
        numpy_percent_of_peak=100 * flops / np_best / 1e9 / fma_peak)
    if m == 1:
        bytes_moved = roof.nbytes(shape)
        benchmark.extra_info.update(gbs=bytes_moved / min(per_call) / 1e9,
                                    numpy_gbs=bytes_moved / np_best / 1e9)
