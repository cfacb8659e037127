"""Compose chains (pytest-benchmark): the attention chain, timed inside C next to numpy in
the same run, and its cold search.

Run: ``pytest benchmarks/test_bench_chains.py --benchmark-only``. Each program is
verified against numpy before it is timed. ``benchmarks/chains.py`` prints the full
table: every chain, unfused and hand-fused programs, torch when importable.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import morello
from morello import api

SIZES = [(128, 64), (512, 64)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_attention_search_cold(benchmark, size):
    def run():
        api._SESSIONS.clear()
        return morello.synthesize(morello.attention(*size), db=False)

    prog = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(cost=prog.cost, specs_solved=prog.stats.specs_solved)


def _numpy_attention(v, q, kt):
    s = q @ kt
    s -= s.max(-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(-1, keepdims=True)
    return s @ v


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_attention_microseconds(benchmark, size):
    prog = morello.synthesize(morello.attention(*size), db=False)
    fn = prog.compile()
    ok, err = prog.verify(fn)
    assert ok, err
    ins = prog.random_inputs(seed=1)
    out = np.empty(prog.spec.output.shape, np.float32)
    iters = max(1, int(0.02 / max(fn.time(*ins, iters=1, out=out), 1e-9)))
    benchmark.pedantic(lambda: fn.time(*ins, iters=iters, out=out), rounds=7)
    best = min(benchmark.stats.stats.data) / iters
    np_best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(10):
            _numpy_attention(*ins)
        np_best = min(np_best, (time.perf_counter() - t0) / 10)
    benchmark.extra_info.update(verified=True, microseconds=best * 1e6,
                                numpy_microseconds=np_best * 1e6,
                                speedup_over_numpy=np_best / best, cost=prog.cost)
