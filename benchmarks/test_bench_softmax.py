"""Softmax kernels and their search (pytest-benchmark): ns per element inside C, next to
numpy's in the same run, and the cold search.

Run: ``pytest benchmarks/test_bench_softmax.py --benchmark-only``. Each kernel is verified
against numpy before it is timed. ``benchmarks/softmax.py`` prints the same figures as a
table, with torch when it is importable and the fraction of memory bandwidth.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import morello
from morello import api
from morello.memory import AVX512, host_lacks

SHAPES = [(1, 16384), (128, 128), (512, 1024)]
# avx512 (16-lane stream kernels) where the host runs it.
TARGETS = ["avx2"] + ([] if host_lacks(AVX512) else ["avx512"])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_softmax_search_cold(benchmark, shape):
    def run():
        api._SESSIONS.clear()
        return morello.synthesize(morello.softmax(*shape), db=False)

    prog = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(cost=prog.cost, specs_solved=prog.stats.specs_solved)


def _numpy_softmax(x, out, m, s):
    np.max(x, axis=-1, keepdims=True, out=m)
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    np.sum(out, axis=-1, keepdims=True, out=s)
    np.divide(out, s, out=out)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_softmax_kernel_ns_per_element(benchmark, shape, target):
    prog = morello.synthesize(morello.softmax(*shape), target, db=False)
    fn = prog.compile()
    ok, err = prog.verify(fn)
    assert ok, err
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = np.empty_like(x)
    iters = max(1, int(0.02 / max(fn.time(x, iters=1, out=out), 1e-9)))
    benchmark.pedantic(lambda: fn.time(x, iters=iters, out=out), rounds=7)
    best = min(benchmark.stats.stats.data) / iters
    m, s = np.empty((shape[0], 1), np.float32), np.empty((shape[0], 1), np.float32)
    np_best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(20):
            _numpy_softmax(x, out, m, s)
        np_best = min(np_best, (time.perf_counter() - t0) / 20)
    benchmark.extra_info.update(verified=True, ns_per_element=best / x.size * 1e9,
                                numpy_ns_per_element=np_best / x.size * 1e9,
                                speedup_over_numpy=np_best / best, cost=prog.cost)
