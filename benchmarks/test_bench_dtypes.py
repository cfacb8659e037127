"""Kernel speed of the bf16 matvec (both orientations) and the exact u8×s8 → s32 matmul
(pytest-benchmark). Each program is verified against numpy before it is timed (inside C,
7 rounds); the side-by-side tables with peers and roofs are ``benchmarks/matvec.py`` and
``benchmarks/int_matmul.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

import morello

MATVECS = [(512, 1024, "rm"), (512, 1024, "cm"), (2048, 16384, "rm"), (2048, 16384, "cm")]


def _time(benchmark, prog):
    fn = prog.compile()
    ok, err = prog.verify(fn)
    assert ok, err
    ins = prog.random_inputs()
    out = np.empty(prog.spec.output.shape, prog.spec.output.dtype.np)
    iters = max(1, int(0.02 / max(fn.time(*ins, iters=1, out=out), 1e-9)))
    benchmark.pedantic(lambda: fn.time(*ins, iters=iters, out=out), rounds=7)
    return min(benchmark.stats.stats.data) / iters


@pytest.mark.parametrize("k, n, layout", MATVECS, ids=lambda v: str(v))
def test_bf16_matvec(benchmark, k, n, layout):
    spec = morello.matmul(1, k, n, dtypes=("f32", "bf16", "f32"), rhs_layout=layout)
    prog = morello.synthesize(spec, db=False)
    t = _time(benchmark, prog)
    benchmark.extra_info.update(cost=prog.cost, weights_gb_per_s=2 * k * n / t / 1e9,
                                gflops=2 * k * n / t / 1e9)


@pytest.mark.parametrize("size", [64, 256])
def test_u8s8_matmul(benchmark, size):
    prog = morello.synthesize(morello.matmul(size, size, size, dtypes="u8,s8,s32"), db=False)
    t = _time(benchmark, prog)
    benchmark.extra_info.update(cost=prog.cost, gops=2 * size ** 3 / t / 1e9)
