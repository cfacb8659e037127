"""This machine's roofs: the AVX2 FMA peak of one core and its streaming bandwidth.

    python benchmarks/roofline.py

The FMA kernel runs 12 independent accumulator chains (enough to cover the FMA latency on
two ports) and returns their sum so the compiler cannot delete them; the script checks in
the disassembly that all 12 vfmadd instructions of the loop body survived.
"""
from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
from morello.codegen.build import compile_c

FMA_C = r"""
#include <immintrin.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec + 1e-9 * t.tv_nsec; }
__attribute__((noinline)) float fma_chains(long iters, float x) {
    __m256 a = _mm256_set1_ps(x), b = _mm256_set1_ps(0.999f);
    /* distinct starting values, or the compiler merges identical chains into one */
    __m256 c0 = _mm256_set1_ps(x + 0), c1 = _mm256_set1_ps(x + 1), c2 = _mm256_set1_ps(x + 2),
           c3 = _mm256_set1_ps(x + 3), c4 = _mm256_set1_ps(x + 4), c5 = _mm256_set1_ps(x + 5),
           c6 = _mm256_set1_ps(x + 6), c7 = _mm256_set1_ps(x + 7), c8 = _mm256_set1_ps(x + 8),
           c9 = _mm256_set1_ps(x + 9), c10 = _mm256_set1_ps(x + 10),
           c11 = _mm256_set1_ps(x + 11);
    for (long i = 0; i < iters; i++) {
        c0 = _mm256_fmadd_ps(c0, b, a); c1 = _mm256_fmadd_ps(c1, b, a);
        c2 = _mm256_fmadd_ps(c2, b, a); c3 = _mm256_fmadd_ps(c3, b, a);
        c4 = _mm256_fmadd_ps(c4, b, a); c5 = _mm256_fmadd_ps(c5, b, a);
        c6 = _mm256_fmadd_ps(c6, b, a); c7 = _mm256_fmadd_ps(c7, b, a);
        c8 = _mm256_fmadd_ps(c8, b, a); c9 = _mm256_fmadd_ps(c9, b, a);
        c10 = _mm256_fmadd_ps(c10, b, a); c11 = _mm256_fmadd_ps(c11, b, a);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
               _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float out[8]; _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}
double fma_seconds(long iters) { double t = now(); volatile float r = fma_chains(iters, 1.0f);
                                 (void)r; return now() - t; }
double stream_seconds(const float *restrict src, long n, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = now();
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        for (long i = 0; i < n; i += 16) {
            acc0 = _mm256_add_ps(acc0, _mm256_loadu_ps(src + i));
            acc1 = _mm256_add_ps(acc1, _mm256_loadu_ps(src + i + 8));
        }
        volatile float sink = _mm256_cvtss_f32(_mm256_add_ps(acc0, acc1)); (void)sink;
        t = now() - t;
        if (t < best) best = t;
    }
    return best;
}
"""


def fma_count_in_loop(so_path: str) -> int:
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so_path],
                         capture_output=True, text=True).stdout
    body = asm.split("<fma_chains>:")[1].split("\n\n")[0]
    return len(re.findall(r"vfmadd\w+ps\s+%ymm", body))


def main() -> None:
    so = compile_c(FMA_C, ("-mavx2", "-mfma"))
    lib = ctypes.CDLL(str(so))
    lib.fma_seconds.restype = ctypes.c_double
    lib.fma_seconds.argtypes = [ctypes.c_long]
    lib.stream_seconds.restype = ctypes.c_double
    lib.stream_seconds.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
    kept = fma_count_in_loop(str(so))
    iters = 50_000_000
    best = min(lib.fma_seconds(iters) for _ in range(7))
    peak = 12 * 8 * 2 * iters / best / 1e9
    n = 32 * 1024 * 1024  # 128 MiB of f32, far beyond the caches
    buf = np.ones(n, np.float32)
    secs = lib.stream_seconds(buf.ctypes.data, n, 5)
    print(f"FMA chains kept in the loop: {kept} of 12")
    print(f"AVX2 FMA peak, one core: {peak:.1f} GFLOP/s")
    print(f"streaming read bandwidth, one core: {n * 4 / secs / 1e9:.1f} GB/s")


if __name__ == "__main__":
    main()
