"""Timing a compiled program and numpy doing the same, for benchmarks and the CLI."""
from __future__ import annotations

import time

import numpy as np


def seconds(fn, ins, repeats: int = 7) -> float:
    """Seconds per call of a compiled program, timed inside C (best of ``repeats`` runs of
    about 50 ms, after a warm-up), into one output array written before, as numpy's is
    (a fresh one per run put its page faults into the time: docs/model-notes.md)."""
    out = fn(*ins)
    once = fn.time(*ins, iters=1, out=out)
    iters = max(1, min(1_000_000, int(0.05 / max(once, 1e-9))))
    fn.time(*ins, iters=iters, out=out)  # warm-up
    return min(fn.time(*ins, iters=iters, out=out) for _ in range(max(1, repeats)))


def numpy_blas(threads: int | None = None):
    """A context in which numpy's BLAS uses ``threads`` threads (unchanged if None), and
    what it then is: ``{"library", "version", "kernel", "threads"}`` (the kernel family
    it picked for this CPU, e.g. OpenBLAS's ``Haswell`` or ``SkylakeX``), as far as
    threadpoolctl reports it; without threadpoolctl, the BLAS keeps its own thread count
    and the values are None."""
    import contextlib

    try:
        from threadpoolctl import threadpool_info, threadpool_limits  # type: ignore[import-untyped]
    except ImportError:
        unknown = {"library": None, "version": None, "kernel": None, "threads": None}
        return contextlib.nullcontext(unknown)

    @contextlib.contextmanager
    def limited():
        with threadpool_limits(limits=threads, user_api="blas"):
            info = [i for i in threadpool_info() if i.get("user_api") == "blas"]
            first = info[0] if info else {}
            yield {"library": first.get("internal_api"), "version": first.get("version"),
                   "kernel": first.get("architecture"), "threads": first.get("num_threads")}
    return limited()


def numpy_seconds(spec, ins, repeats: int = 7) -> float:
    """Seconds per call of the kind's numpy reference into a preallocated output (best of
    ``repeats``). Batch-1 matmuls run as 2-D matmuls, numpy's fastest path for them."""

    ref = spec.kind.info.reference
    out = np.zeros(spec.output.shape, spec.output.dtype.np)
    if spec.kind.name == "MATMUL" and spec.shape[0] == 1:
        ins, out = [a[0] for a in ins], out[0]
    once = time.perf_counter()
    ref(spec.params, ins, out)
    once = time.perf_counter() - once
    iters = max(1, min(100_000, int(0.05 / max(once, 1e-7))))
    best = float("inf")
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        for _ in range(iters):
            ref(spec.params, ins, out)
        best = min(best, (time.perf_counter() - t0) / iters)
    return best
