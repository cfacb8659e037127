"""Synthesis time and kernel speed of f32 matmuls (pytest-benchmark).

Run: ``pytest benchmarks --benchmark-only``. Each kernel is verified against numpy before
it is timed; GFLOP/s are timed inside C (best of repeats), numpy's in the same run through
Python with one thread.
"""
from __future__ import annotations

import resource

import numpy as np
import pytest

import morello
from morello import api

SHAPES = [(1, 8, 8, 8), (1, 16, 16, 16), (1, 32, 32, 32), (1, 7, 13, 97), (4, 8, 8, 8)]


def _fresh():
    api._SESSIONS.clear()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_synthesis_cold(benchmark, shape):
    b, m, k, n = shape
    spec = morello.matmul(m, k, n, batch=b)

    def run():
        _fresh()
        return morello.synthesize(spec, db=False)

    prog = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(
        cost=prog.cost,
        specs_solved=prog.stats.specs_solved,
        logical_specs=prog.stats.logical_specs,
        specs_per_second=prog.stats.specs_solved / max(prog.synthesis_seconds, 1e-9),
        peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_synthesis_warm(benchmark, shape):
    b, m, k, n = shape
    spec = morello.matmul(m, k, n, batch=b)
    morello.synthesize(spec, db=False)
    benchmark(lambda: morello.synthesize(spec, db=False))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_kernel_gflops(benchmark, shape):
    from threadpoolctl import threadpool_limits

    b, m, k, n = shape
    prog = morello.synthesize(morello.matmul(m, k, n, batch=b), db=False)
    fn = prog.compile()
    rng = np.random.default_rng(0)
    lhs = rng.uniform(-1, 1, (b, m, k)).astype(np.float32)
    rhs = rng.uniform(-1, 1, (b, k, n)).astype(np.float32)
    np.testing.assert_allclose(fn(lhs, rhs), lhs @ rhs, rtol=1e-4, atol=1e-4)
    once = fn.time(lhs, rhs, iters=1)
    iters = max(1, int(0.02 / max(once, 1e-9)))
    per_call = benchmark.pedantic(lambda: fn.time(lhs, rhs, iters=iters), rounds=7)
    best = min(benchmark.stats.stats.data)
    flops = 2 * b * m * k * n
    with threadpool_limits(1):
        a2, b2 = (lhs[0], rhs[0]) if b == 1 else (lhs, rhs)
        np_best = min(_time_numpy(a2, b2) for _ in range(7))
    benchmark.extra_info.update(
        verified=True, gflops=flops / (best / iters) / 1e9,
        numpy_gflops=flops / np_best / 1e9, cost=prog.cost, seconds_per_call=per_call)


def _time_numpy(a, b) -> float:
    import time

    iters = 200
    t0 = time.perf_counter()
    for _ in range(iters):
        np.matmul(a, b)
    return (time.perf_counter() - t0) / iters
