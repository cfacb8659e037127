"""Paired timings: morello's kernel and OpenBLAS's sgemm, alternated in one process.

    OPENBLAS_NUM_THREADS=1 python benchmarks/paired.py [--rounds 9] [--target avx512]
        [--threads N] [[Bx]MxKxN ...]

On a shared machine the speed of the core drifts by 20% within a minute, so two columns
measured minutes apart compare the machine's moods as much as the kernels. Here each round
times morello's kernel (inside C) and then numpy's bundled OpenBLAS ``cblas_sgemm`` (also
inside C, through a function pointer, so no Python call overhead), back to back on the same
inputs; the report gives both medians and the median of the per-round ratios. Every
morello kernel is verified against numpy first, and the sgemm result is checked too.
``--threads N`` searches morello's program for N threads (OpenMP) and sets OpenBLAS to N
threads too (``openblas_set_num_threads``). With more than one thread each timing is
preceded by a pause of ``PAUSE`` seconds: the library timed before leaves its worker
threads spinning for a while after its call (OpenBLAS's default timeout is 2^28 cycles,
about 0.1 s), and they took the second core from whichever ran next (morello's 1024^3 on
two threads measured half its speed back to back with OpenBLAS, and 2.0x its one-thread
speed when timed alternately with that alone).
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import morello

PAUSE = 0.3  # seconds before each timing when threads > 1 (see above)

SHIM = r"""
#include <time.h>
typedef long long I;
typedef void (*sgemm_t)(int, int, int, I, I, I, float, const float *, I, const float *, I,
                        float, float *, I);
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* Seconds per call of `batch` row-major sgemms C = A B, over `iters` calls. */
double time_sgemm(void *fn, int batch, I m, I k, I n, const float *a, const float *b,
                  float *c, long iters) {
    sgemm_t f = (sgemm_t)fn;
    double t0 = now();
    for (long it = 0; it < iters; it++)
        for (int p = 0; p < batch; p++)
            f(101, 111, 111, m, n, k, 1.0f, a + p * m * k, k, b + p * k * n, n, 0.0f,
              c + p * m * n, n);
    return (now() - t0) / (double)iters;
}
"""

SHAPES = ["64x64x64", "256x256x256", "512x512x512", "1024x1024x1024", "8x128x128x128",
          "1x2048x16384"]


def _calls_for(time_per_call, seconds: float = 0.02) -> int:
    """Calls that take at least ``seconds`` in all, by ``time_per_call(calls)`` (seconds
    per call over that many calls), grown until one timing is that long."""
    calls = 1
    while calls < 1 << 24:
        total = time_per_call(calls) * calls
        if total >= seconds:
            return calls
        calls = max(2 * calls, int(calls * 1.2 * seconds / max(total, 1e-9)))
    return calls


def _openblas():
    libs = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for so in sorted(libs.glob("libscipy_openblas*.so")):
        syms = subprocess.run(["nm", "-D", str(so)], capture_output=True, text=True).stdout
        for name in ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm"):
            if f" T {name}\n" in syms:
                lib = ctypes.CDLL(str(so))
                return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value, name, lib
    raise SystemExit("numpy's bundled OpenBLAS (ILP64 cblas_sgemm) not found")


def _shim():
    from morello.codegen import compile_c

    lib = ctypes.CDLL(str(compile_c(SHIM, ())))
    lib.time_sgemm.restype = ctypes.c_double
    lib.time_sgemm.argtypes = [ctypes.c_void_p, ctypes.c_int] + [ctypes.c_longlong] * 3 + \
        [ctypes.c_void_p] * 3 + [ctypes.c_long]
    return lib


def _parse(text: str):
    parts = [int(x) for x in text.split("x")]
    return tuple(parts) if len(parts) == 4 else (1, *parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", nargs="*", default=SHAPES)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--target", default="avx2", help="avx2 (default) or avx512")
    ap.add_argument("--threads", type=int, default=1, help="threads for both (default 1)")
    args = ap.parse_args()
    sgemm, name, blaslib = _openblas()
    for setter in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads"):
        if hasattr(blaslib, setter):
            getattr(blaslib, setter).argtypes = [ctypes.c_int]
            getattr(blaslib, setter)(args.threads)
            break
    else:
        raise SystemExit("cannot set OpenBLAS's thread count")
    shim = _shim()
    print(f"OpenBLAS symbol {name}; target {args.target}; {args.threads} thread(s); "
          f"{args.rounds} alternating rounds per shape, each timing >= 20 ms inside C\n")
    print("| shape | morello GFLOP/s (median) | OpenBLAS sgemm GFLOP/s (median) | "
          "median ratio morello/OpenBLAS | rounds morello ahead |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "paired.db")
        for text in args.shapes:
            b, m, k, n = _parse(text)
            prog = morello.synthesize(
                morello.matmul(m, k, n, batch=b, target=args.target,
                               serial=args.threads == 1),
                target=args.target, db=db, threads=args.threads)
            fn = prog.compile()
            rng = np.random.default_rng(0)
            lhs = rng.uniform(-1, 1, (b, m, k)).astype(np.float32)
            rhs = rng.uniform(-1, 1, (b, k, n)).astype(np.float32)
            out = np.zeros((b, m, n), np.float32)
            ref = lhs @ rhs
            np.testing.assert_allclose(fn(lhs, rhs), ref, rtol=1e-4, atol=1e-3)

            def blas(iters: int, b=b, m=m, k=k, n=n, lhs=lhs, rhs=rhs, out=out) -> float:
                return shim.time_sgemm(sgemm, b, m, k, n, lhs.ctypes.data, rhs.ctypes.data,
                                       out.ctypes.data, iters)

            blas(1)
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)
            # Calls per timing: enough that each takes >= 20 ms once warm (a first call,
            # which starts threads, is no measure: timed alone it made 2-thread timings
            # of a few calls each, dominated by waking the sleeping workers).
            iters = max(_calls_for(lambda i, f=fn, x=lhs, y=rhs: f.time(x, y, iters=i)),
                        _calls_for(blas))
            ours, theirs = [], []
            pause = PAUSE if args.threads > 1 else 0.0
            for _ in range(args.rounds):
                time.sleep(pause)
                ours.append(fn.time(lhs, rhs, iters=iters))
                time.sleep(pause)
                theirs.append(blas(iters))
            fl = 2 * b * m * k * n
            ratios = [t / o for o, t in zip(ours, theirs)]
            print(f"| {text} | {fl / statistics.median(ours) / 1e9:.1f} | "
                  f"{fl / statistics.median(theirs) / 1e9:.1f} | "
                  f"{statistics.median(ratios):.2f} | "
                  f"{sum(r > 1 for r in ratios)}/{len(ratios)} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
