"""Timers shared by the benchmark scripts (interleaved rounds call them in turn)."""
from __future__ import annotations

import time


def py_timer(f):
    """A timer of ``f`` called through Python: calibrates a batch of about 20 ms, then
    each call of the timer returns the best of 3 batches, in seconds per call."""
    f()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        if time.perf_counter() - t0 > 0.02:
            break
        n *= 2

    def timer() -> float:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            best = min(best, (time.perf_counter() - t0) / n)
        return best
    return timer


def c_timer(fn, ins, out):
    """The same for a compiled morello program, timed inside C."""
    iters = max(1, int(0.02 / max(fn.time(*ins, iters=1, out=out), 1e-9)))
    return lambda: min(fn.time(*ins, iters=iters, out=out) for _ in range(3))


def hold_torch_to_avx2() -> None:
    """Keep torch's oneDNN and MKL to AVX2 (read when torch first dispatches, so call it
    before importing torch): both sides then use the same vector width."""
    import os

    os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    os.environ["MKL_ENABLE_INSTRUCTIONS"] = "AVX2"


def interleaved_rounds(timers: list[dict], peaks: dict, rounds: int):
    """Call every timer of ``timers`` (a dict of timers per row) and every peak measure
    once per round, ``rounds`` times: (per row, per timer, its times), (per peak, its
    median)."""
    import statistics

    times = [{k: [] for k in row} for row in timers]
    seen: dict = {t: [] for t in peaks}
    for _ in range(rounds):
        for t, measure in peaks.items():
            seen[t].append(measure())
        for i, row in enumerate(timers):
            for k, timer in row.items():
                times[i][k].append(timer())
    return times, {t: statistics.median(v) for t, v in seen.items()}


def channels_last(a):
    """An N×C×H×W array stored channels-last (torch's ``channels_last``), seen as N×C×H×W,
    starting on a cache line as torch's allocations do (a program reading vectors of
    channels from numpy's 16-byte-aligned copy ran up to 1.5x slower)."""
    from morello.codegen.build import empty_aligned

    n, c, h, w = a.shape
    out = empty_aligned((n, h, w, c), a.dtype)
    out[...] = a.transpose(0, 2, 3, 1)
    return out.transpose(0, 3, 1, 2)


def weights_hwio(w):
    """F×C×KH×KW weights stored KH×KW×C×F (HWIO), seen as F×C×KH×KW."""
    import numpy as np

    return np.ascontiguousarray(w.transpose(2, 3, 1, 0)).transpose(3, 2, 0, 1)


def optional_torch():
    """torch on one thread, or None when it is not importable (an optional comparison)."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


def fma_peak(target):
    """A function measuring one core's FMA peak (GFLOP/s) in ``target``'s widest vectors:
    ``morello.calibrate``'s 12 independent FMA chains, built for ``target``."""
    import ctypes

    from morello import calibrate
    from morello.codegen.build import compile_c

    lanes = max(target.vector_bytes) // 4
    v, p = ("__m512", "_mm512") if lanes == 16 else ("__m256", "_mm256")
    src = ("#include <immintrin.h>\n#include <time.h>\n" + calibrate.FMA_CHAINS
           + f"MORELLO_FMA_CHAINS(fma_peak, {v}, {p})\n")
    fn = ctypes.CDLL(str(compile_c(src, target.cflags))).fma_peak
    fn.restype = ctypes.c_double
    fn.argtypes = [ctypes.c_long]
    return lambda: 2 * lanes / (min(fn(20_000_000) for _ in range(3)) * 1e9)
