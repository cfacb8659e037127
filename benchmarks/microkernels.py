"""Register tiles in L1: what each m x n outer-product tile reaches on this core.

    python benchmarks/microkernels.py [--target avx2|avx512] [--k 256] [--rounds 3]

For each tile of m rows and n/vs vectors (vs = 8 or 16 lanes) a C loop of the shape
``OuterProductLoop`` emits (per step of k: one row of B loaded, m broadcasts of A, m*n/vs
FMAs over independent accumulators), A[m x k] and a packed B panel [k x n] in L1, is timed
against the FMA peak measured in the same run (independent FMA chains, no loads). This is
a measurement behind ``OuterProductLoop``'s cost (the slower of its FMAs and its loads,
``vector_move`` per load, and at least the FMA latency). On the host where it was written
(two runs, the host shared): 8x32 and 12x32 zmm tiles at 72-87 % of the AVX-512 peak,
8x16 at 62-70 %, 16x16 at 45-55 %. Whole programs are another matter (see
``benchmarks/ab_programs.py``).
"""
from __future__ import annotations

import argparse
import ctypes
import statistics

from morello.codegen.build import compile_c

TILES = {"avx2": [(6, 1), (4, 2), (6, 2), (8, 1), (4, 3)],
         "avx512": [(8, 1), (16, 1), (6, 2), (8, 2), (12, 2), (14, 2), (4, 3), (8, 3),
                    (6, 4)]}
VEC = {"avx2": ("__m256", "_mm256", 8, ("-mavx2", "-mfma")),
       "avx512": ("__m512", "_mm512", 16, ("-mavx2", "-mfma", "-mavx512f"))}


def source(target: str, tiles, k: int) -> str:
    ty, p, vs, _ = VEC[target]
    out = ["#include <immintrin.h>", "#include <time.h>",
           "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"
           " return t.tv_sec + 1e-9 * t.tv_nsec; }"]
    for m, nv in tiles:
        out.append(f"static void tile_{m}_{nv}(const float *A, const float *B, float *C) {{")
        out.append(f"  {ty} c[{m}][{nv}];")
        out.append(f"  for (int i = 0; i < {m}; i++) for (int j = 0; j < {nv}; j++) "
                   f"c[i][j] = {p}_loadu_ps(C + i * {nv * vs} + {vs} * j);")
        out.append(f"  for (int q = 0; q < {k}; q++) {{ {ty} b[{nv}];")
        out.append(f"    for (int j = 0; j < {nv}; j++) b[j] = {p}_loadu_ps(B + q * {nv * vs}"
                   f" + {vs} * j);")
        out.append(f"    for (int i = 0; i < {m}; i++) {{ {ty} a = {p}_set1_ps(A[i * {k} + q]);"
                   f" for (int j = 0; j < {nv}; j++) c[i][j] = {p}_fmadd_ps(a, b[j], c[i][j]);"
                   " } }")
        out.append(f"  for (int i = 0; i < {m}; i++) for (int j = 0; j < {nv}; j++) "
                   f"{p}_storeu_ps(C + i * {nv * vs} + {vs} * j, c[i][j]); }}")
        out.append(f"double time_{m}_{nv}(const float *A, const float *B, float *C, long n) "
                   f"{{ double t = now(); for (long i = 0; i < n; i++) tile_{m}_{nv}(A, B, C);"
                   " return now() - t; }")
    out.append(f"double peak(long n) {{ {ty} a[12]; {ty} b = {p}_set1_ps(1.0000001f), "
               f"c = {p}_set1_ps(1e-7f); for (int i = 0; i < 12; i++) a[i] = {p}_set1_ps(i);"
               " double t = now(); for (long it = 0; it < n; it++) "
               f"for (int i = 0; i < 12; i++) a[i] = {p}_fmadd_ps(a[i], b, c);"
               f" t = now() - t; volatile float s = 0; for (int i = 0; i < 12; i++) "
               f"s += ((float *)&a[i])[0]; return t; }}")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=sorted(TILES), default="avx512")
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from morello.memory import TARGETS, host_lacks

    reason = host_lacks(TARGETS[args.target])
    if reason:
        raise SystemExit(reason)
    tiles = TILES[args.target]
    _, _, vs, flags = VEC[args.target]
    lib = ctypes.CDLL(str(compile_c(source(args.target, tiles, args.k), flags)))
    fp = ctypes.POINTER(ctypes.c_float)
    a = (ctypes.c_float * (32 * args.k))(*[1e-3 * (i % 7) for i in range(32 * args.k)])
    b = (ctypes.c_float * (args.k * 64))(*[1e-3 * (i % 5) for i in range(args.k * 64)])
    c = (ctypes.c_float * (32 * 64))()
    lib.peak.restype = ctypes.c_double
    lib.peak.argtypes = [ctypes.c_long]
    n_peak = 20_000_000
    rows = {t: [] for t in tiles}
    peaks = []
    for _ in range(args.rounds):
        peaks.append(2 * 12 * vs * n_peak / lib.peak(n_peak) / 1e9)
        for m, nv in tiles:
            f = getattr(lib, f"time_{m}_{nv}")
            f.restype = ctypes.c_double
            f.argtypes = [fp, fp, fp, ctypes.c_long]
            n = 4_000_000 // (m * nv * vs)
            rows[(m, nv)].append(2 * m * nv * vs * args.k * n
                                 / f(ctypes.cast(a, fp), ctypes.cast(b, fp),
                                     ctypes.cast(c, fp), n) / 1e9)
    peak = statistics.median(peaks)
    print(f"{args.target}: FMA peak {peak:.1f} GFLOP/s (one core, median of {args.rounds}); "
          f"k = {args.k}, A and B in L1\n")
    print("| tile (m x n) | FMAs per step | loads per step | GFLOP/s | % of peak |")
    print("|---|---|---|---|---|")
    for (m, nv), speeds in rows.items():
        g = statistics.median(speeds)
        print(f"| {m} x {nv * vs} | {m * nv} | {m + nv} | {g:.1f} | {100 * g / peak:.0f} % |")


if __name__ == "__main__":
    main()
