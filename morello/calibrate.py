"""Measure the cost model's constants on this host (``morello calibrate``).

Each constant of ``morello.costs.CostConstants`` has a C microbenchmark below that times
the operation the way emitted kernels perform it (vector loads of L1 lines, streaming
reads of main memory, the broadcast-FMA register tile, OpenMP fork/join, ...). Times are
the minimum over repeats (the machine is shared; the minimum is the least disturbed run)
and are converted to cost units (a quarter of one vector FMA at peak throughput), then
rounded: the model stays affine with integer coefficients.

Each resource is timed at its throughput (independent operations), and the model adds them
up: where operations overlap on the core (broadcasts under FMAs in a register tile) that
over-counts a little, but it keeps ranking right where one resource is the bottleneck (an
8×8 tile issues one broadcast per FMA). The register-tile steps are measured for the
record (``tile_4x16_step``, ``tile_6x16_step``), not fitted. Some constants are differences
(a run start in main memory is what a line read at a 4 KiB stride costs beyond a streamed
one, over 256 MiB for ``gl_run`` and over 8 MiB, in the last-level cache, for ``llc_run``;
a scalar op is what a scalar multiply-add costs beyond the three L1 lines the model
charges for its operands), clamped at zero or one. One constant is a choice, not a cost:
``gl_prefetch``, the distance at which DotProductStripes' own loop over main memory ran
fastest with software prefetches into L2, or 0 where none beat the hardware alone.
"""
from __future__ import annotations

import ctypes
import platform
from dataclasses import dataclass

from morello.costs import CostConstants
from morello.memory import Target

# The FMA peak's microbenchmark for a vector type ``V`` with intrinsics ``P`` (``__m256``
# and ``_mm256``, or ``__m512`` and ``_mm512``): ``double name(long iters)``, seconds per
# vector FMA over 12 independent chains (throughput-bound). Needs <immintrin.h>, <time.h>
# and the ISA's flags; ``benchmarks/matvec.py`` instantiates it for zmm registers.
FMA_CHAINS = r"""
#define MORELLO_FMA_CHAINS(name, V, P)                                                    \
double name(long iters) {                                                              \
    V a0 = P##_set1_ps(0.f), a1 = P##_set1_ps(1.f), a2 = P##_set1_ps(2.f),               \
      a3 = P##_set1_ps(3.f), a4 = P##_set1_ps(4.f), a5 = P##_set1_ps(5.f),               \
      a6 = P##_set1_ps(6.f), a7 = P##_set1_ps(7.f), a8 = P##_set1_ps(8.f),               \
      a9 = P##_set1_ps(9.f), a10 = P##_set1_ps(10.f), a11 = P##_set1_ps(11.f);           \
    V x = P##_set1_ps(0.999f), y = P##_set1_ps(0.001f);                                  \
    struct timespec t0, t1;                                                              \
    clock_gettime(CLOCK_MONOTONIC, &t0);                                                 \
    for (long i = 0; i < iters; i++) {                                                   \
        a0 = P##_fmadd_ps(a0, x, y); a1 = P##_fmadd_ps(a1, x, y);                        \
        a2 = P##_fmadd_ps(a2, x, y); a3 = P##_fmadd_ps(a3, x, y);                        \
        a4 = P##_fmadd_ps(a4, x, y); a5 = P##_fmadd_ps(a5, x, y);                        \
        a6 = P##_fmadd_ps(a6, x, y); a7 = P##_fmadd_ps(a7, x, y);                        \
        a8 = P##_fmadd_ps(a8, x, y); a9 = P##_fmadd_ps(a9, x, y);                        \
        a10 = P##_fmadd_ps(a10, x, y); a11 = P##_fmadd_ps(a11, x, y);                    \
        __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4),          \
                         "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10),    \
                         "+v"(a11));                                                     \
    }                                                                                    \
    clock_gettime(CLOCK_MONOTONIC, &t1);                                                 \
    V s = P##_add_ps(P##_add_ps(P##_add_ps(a0, a1), P##_add_ps(a2, a3)),                 \
                     P##_add_ps(P##_add_ps(a4, a5), P##_add_ps(a6, a7)));                \
    s = P##_add_ps(s, P##_add_ps(P##_add_ps(a8, a9), P##_add_ps(a10, a11)));             \
    volatile float keep = P##_cvtss_f32(s);                                              \
    (void)keep;                                                                          \
    return ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec))  \
           / ((double)iters * 12.0);                                                     \
}
"""

SOURCE = FMA_CHAINS + r"""
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <omp.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#define KEEP(x) __asm__ volatile("" : "+x"(x))
static volatile float sink;

static float hsum8(__m256 v) {
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 sh = _mm_movehdup_ps(lo);
    __m128 s = _mm_add_ps(lo, sh);
    sh = _mm_movehl_ps(sh, s);
    return _mm_cvtss_f32(_mm_add_ss(s, sh));
}

MORELLO_FMA_CHAINS(cal_fma, __m256, _mm256)

/* Seconds per line read (two vector loads) from a buffer of `bytes`, read `passes` times;
 * `stride` bytes between consecutive lines (64: streaming). Eight accumulators, so the
 * adds' latency does not bound it. */
double cal_read(long bytes, long stride, long passes) {
    float *buf = aligned_alloc(64, bytes);
    memset(buf, 1, bytes);
    long lines = bytes / 64, rows = bytes / stride, per_row = stride / 64, s4 = stride / 4;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4v = s0, s5 = s0, s6 = s0,
           s7 = s0;
    double t0 = now();
    for (long p = 0; p < passes; p++)
        for (long c = 0; c < per_row; c++)
            for (long r = 0; r < rows; r += 4) {
                const float *x = buf + r * s4 + c * 16;
                s0 = _mm256_add_ps(s0, _mm256_load_ps(x));
                s1 = _mm256_add_ps(s1, _mm256_load_ps(x + 8));
                s2 = _mm256_add_ps(s2, _mm256_load_ps(x + s4));
                s3 = _mm256_add_ps(s3, _mm256_load_ps(x + s4 + 8));
                s4v = _mm256_add_ps(s4v, _mm256_load_ps(x + 2 * s4));
                s5 = _mm256_add_ps(s5, _mm256_load_ps(x + 2 * s4 + 8));
                s6 = _mm256_add_ps(s6, _mm256_load_ps(x + 3 * s4));
                s7 = _mm256_add_ps(s7, _mm256_load_ps(x + 3 * s4 + 8));
            }
    double t = now() - t0;
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)),
               _mm256_add_ps(_mm256_add_ps(s4v, s5), _mm256_add_ps(s6, s7)));
    sink = hsum8(s);
    free(buf);
    return t / ((double)passes * (double)lines);
}

/* Seconds per line read from a buffer of `bytes` as groups of `streams` (1 to 16) runs
 * of `run` bytes each (`streams` 1 or even, `run` a multiple of 128), the runs of a group
 * read side by side (one line of each in turn), then the next group: the order in which
 * a matvec kernel reads `streams` weight rows of `run` bytes at once (with run = bytes /
 * streams, `streams` long runs side by side).
 * One stream is a plain sequential read. The buffer is written once, then read `passes`
 * times: the best pass counts (a kernel called in a loop reads its weights the same way,
 * from wherever they stay). */
/* A buffer of `bytes`, written once, allocated as numpy allocates a large array (huge
 * pages asked for, where the kernel has them on request): a kernel's weights are such
 * arrays. With 4 KiB pages the TLB misses slowed the sequential read to the side-by-side
 * one here. NULL if it cannot be allocated. */
static void *huge_buffer(long bytes) {
    long huge = 2L << 20;
    void *buf = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
    if (buf == NULL) return NULL;
    madvise(buf, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);
    memset(buf, 1, bytes);
    return buf;
}

double cal_streams(long bytes, long streams, long run, long passes) {
    float *buf = huge_buffer(bytes);
    if (buf == NULL) return -1.0;
    long lines = run / 64, groups = bytes / (run * streams);
    /* Four independent sums (two per run, runs taken in pairs): the adds never hold
     * back the loads. */
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    double best = 1e30;
    for (long p = 0; p < passes; p++) {
        double t0 = now();
        for (long g = 0; g < groups; g++) {
            const float *base = buf + g * streams * lines * 16;
            if (streams == 1) {
                for (long i = 0; i < lines; i += 2) {
                    a0 = _mm256_add_ps(a0, _mm256_load_ps(base + i * 16));
                    a1 = _mm256_add_ps(a1, _mm256_load_ps(base + i * 16 + 8));
                    b0 = _mm256_add_ps(b0, _mm256_load_ps(base + i * 16 + 16));
                    b1 = _mm256_add_ps(b1, _mm256_load_ps(base + i * 16 + 24));
                }
                continue;
            }
            for (long i = 0; i < lines; i++)
                for (long q = 0; q < streams; q += 2) {
                    const float *x = base + (q * lines + i) * 16, *y = x + lines * 16;
                    a0 = _mm256_add_ps(a0, _mm256_load_ps(x));
                    a1 = _mm256_add_ps(a1, _mm256_load_ps(x + 8));
                    b0 = _mm256_add_ps(b0, _mm256_load_ps(y));
                    b1 = _mm256_add_ps(b1, _mm256_load_ps(y + 8));
                }
        }
        double t = now() - t0;
        if (t < best) best = t;
    }
    sink = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(b0, b1)));
    free(buf);
    return best / ((double)groups * (double)lines * (double)streams);
}

/* `bytes` of bf16 weights near 1 (huge pages), as a model's are: huge_buffer's bytes of 1
 * are bf16 values of 2.4e-38, whose products with x are subnormal (and slow the FMAs). */
static uint16_t *bf16_weights(long bytes) {
    uint16_t *w = huge_buffer(bytes);
    if (w != NULL)
        for (long i = 0; i < bytes / 2; i++) w[i] = (uint16_t)(0x3F80 + (i & 15));
    return w;
}

/* Seconds per line of DotProductStripes' loop over `bytes` of bf16 weights (rows of 2048,
 * 4 KiB; 8 stripes of adjacent rows, a row of each dotted with an f32 x at once), with a
 * prefetch into L2 `ahead` lines further along each stripe per line read, and another
 * at half that, as the kernel does (0: none): what
 * the kernel's software prefetch (``gl_prefetch``) gains where the hardware prefetchers
 * alone let the loads wait. Huge pages, best of `passes`. */
double cal_stripes(long bytes, long ahead, long passes) {
    uint16_t *w = bf16_weights(bytes);
    if (w == NULL) return -1.0;
    enum { K = 2048, S = 8 };
    static float xs[K];
    for (long i = 0; i < K; i++) xs[i] = 1.0f / (float)(i + 1);
    long rows = bytes / (2 * K) / S;
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 t = _mm256_setzero_ps();
    double best = 1e30;
    for (long p = 0; p < passes; p++) {
        double t0 = now();
        for (long j = 0; j < rows; j++) {
            __m256 a[S];
            const uint16_t *c[S];
            for (int s = 0; s < S; s++) {
                a[s] = _mm256_setzero_ps();
                c[s] = w + (j + s * rows) * K;
            }
            for (long q = 0; q < K; q += 32) {
                if (ahead)  /* twice, as the kernel beyond the LLC (kernels/avx2.py) */
                    for (int s = 0; s < S; s++) {
                        _mm_prefetch((const char *)(c[s] + q) + 64 * ahead, _MM_HINT_T1);
                        _mm_prefetch((const char *)(c[s] + q) + 64 * (ahead / 2), _MM_HINT_T1);
                    }
                for (long u = q; u < q + 32; u += 16) {
                    const __m256 xe = _mm256_loadu_ps(xs + u), xo = _mm256_loadu_ps(xs + u + 8);
                    for (int s = 0; s < S; s++) {
                        const __m256i v = _mm256_loadu_si256((const __m256i *)(c[s] + u));
                        const __m256 e = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)),
                                     o = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
                        a[s] = _mm256_fmadd_ps(xo, o, _mm256_fmadd_ps(xe, e, a[s]));
                    }
                }
            }
            for (int s = 0; s < S; s++) t = _mm256_add_ps(t, a[s]);
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    sink = hsum8(t);
    free(w);
    return best / (double)(bytes / 64);
}

/* Seconds per line read from a buffer of `bytes` laid out as rows of `row` bytes, in the
 * order of a matvec x.W: `streams` rows side by side (one line of each in turn), `block`
 * bytes of each, then the next `streams` rows; all rows, then the next column block. With
 * `block` < `row` every row is read as row / block separate runs, each restarted later:
 * against `block` == `row`, what the start of a long run costs (``gl_ramp``). Huge pages,
 * best of `passes`. */
double cal_rows(long bytes, long row, long streams, long block, long passes) {
    char *buf = huge_buffer(bytes);
    if (buf == NULL) return -1.0;
    long rows = bytes / row;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    double best = 1e30;
    for (long p = 0; p < passes; p++) {
        double t0 = now();
        for (long c = 0; c < row; c += block)
            for (long g = 0; g + streams <= rows; g += streams)
                for (long o = 0; o < block; o += 64)
                    for (long r = 0; r < streams; r++) {
                        const float *x = (const float *)(buf + (g + r) * row + c + o);
                        a0 = _mm256_add_ps(a0, _mm256_load_ps(x));
                        a1 = _mm256_add_ps(a1, _mm256_load_ps(x + 8));
                    }
        double t = now() - t0;
        if (t < best) best = t;
    }
    sink = hsum8(_mm256_add_ps(a0, a1));
    free(buf);
    return best / ((double)(rows / streams * streams) * (double)(row / 64));
}

/* Seconds per vector moved (a load and a store count as two) copying within L1. */
double cal_copy(long iters) {
    /* b starts 64 bytes past a 4 KiB multiple from a, so stores do not alias loads. */
    float *buf = aligned_alloc(64, 16384 + 64), *a = buf, *b = buf + 2048 + 16;
    memset(buf, 0, 16384 + 64);
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        for (int j = 0; j < 2048; j += 8)
            _mm256_storeu_ps(b + j, _mm256_loadu_ps(a + j));
        __asm__ volatile("" ::: "memory");
    }
    double t = now() - t0;
    sink = b[5];
    free(buf);
    return t / ((double)iters * 256.0 * 2.0);
}

/* Seconds per k step of an Mx16 broadcast-FMA register tile (2M FMAs, 2 vector loads
 * of rhs, M broadcasts of lhs), operands in L1: what one step of the emitted tile costs. */
#define TILE(NAME, M)                                                                     \
double NAME(long iters) {                                                                 \
    float *a = aligned_alloc(64, M * 256 * 4), *b = aligned_alloc(64, 256 * 16 * 4);       \
    for (int i = 0; i < M * 256; i++) a[i] = 0.001f * i;                                  \
    for (int i = 0; i < 4096; i++) b[i] = 0.002f * i;                                     \
    __m256 c[M][2];                                                                       \
    for (int r = 0; r < M; r++) c[r][0] = c[r][1] = _mm256_setzero_ps();                  \
    double t0 = now();                                                                    \
    for (long i = 0; i < iters; i++) {                                                    \
        for (int k = 0; k < 256; k++) {                                                   \
            __m256 b0 = _mm256_loadu_ps(b + 16 * k), b1 = _mm256_loadu_ps(b + 16 * k + 8);\
            _Pragma("GCC unroll 8")                                                       \
            for (int r = 0; r < M; r++) {                                                 \
                __m256 x = _mm256_set1_ps(a[M * k + r]);                                  \
                c[r][0] = _mm256_fmadd_ps(x, b0, c[r][0]);                                \
                c[r][1] = _mm256_fmadd_ps(x, b1, c[r][1]);                                \
            }                                                                             \
        }                                                                                 \
        __asm__ volatile("" ::: "memory");                                                \
    }                                                                                     \
    double t = now() - t0;                                                                \
    __m256 s = _mm256_setzero_ps();                                                       \
    for (int r = 0; r < M; r++) s = _mm256_add_ps(s, _mm256_add_ps(c[r][0], c[r][1]));    \
    sink = hsum8(s);                                                                      \
    free(a); free(b);                                                                     \
    return t / ((double)iters * 256.0);                                                   \
}
TILE(cal_tile4, 4)
TILE(cal_tile6, 6)

/* Seconds per broadcast of an L1 scalar into a vector, at throughput (8 independent). */
double cal_bcast(long iters) {
    float *a = aligned_alloc(64, 4096);
    for (int i = 0; i < 1024; i++) a[i] = 0.5f * i;
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        const float *p = a + (i & 63) * 16;
        __m256 x0 = _mm256_broadcast_ss(p), x1 = _mm256_broadcast_ss(p + 1),
               x2 = _mm256_broadcast_ss(p + 2), x3 = _mm256_broadcast_ss(p + 3),
               x4 = _mm256_broadcast_ss(p + 4), x5 = _mm256_broadcast_ss(p + 5),
               x6 = _mm256_broadcast_ss(p + 6), x7 = _mm256_broadcast_ss(p + 7);
        KEEP(x0); KEEP(x1); KEEP(x2); KEEP(x3); KEEP(x4); KEEP(x5); KEEP(x6); KEEP(x7);
    }
    double t = now() - t0;
    free(a);
    return t / ((double)iters * 8.0);
}

/* Seconds per scalar multiply-add c[i] += a[i] * b[i] over L1 arrays, not vectorized. */
__attribute__((optimize("no-tree-vectorize")))
double cal_scalar(long iters) {
    float *a = aligned_alloc(64, 4096), *b = aligned_alloc(64, 4096), *c = aligned_alloc(64, 4096);
    for (int i = 0; i < 1024; i++) { a[i] = 1.f; b[i] = 0.5f; c[i] = 0.f; }
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        for (int j = 0; j < 1024; j++) c[j] += a[j] * b[j];
        __asm__ volatile("" ::: "memory");
    }
    double t = now() - t0;
    sink = c[7];
    free(a); free(b); free(c);
    return t / ((double)iters * 1024.0);
}

/* Seconds per horizontal sum of a vector (a dependent chain: its latency). */
double cal_hsum(long iters) {
    __m256 v = _mm256_set1_ps(1.0f);
    float x = 0.f;
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        x = hsum8(_mm256_add_ps(v, _mm256_set1_ps(x * 1e-9f)));
    }
    double t = now() - t0;
    sink = x;
    return t / (double)iters;
}

/* Seconds per parallel loop of `n` trivial iterations on `threads` threads. */
double cal_parallel(long reps, long n, int threads) {
    float *acc = aligned_alloc(64, 64 * 64);
    memset(acc, 0, 64 * 64);
    double t0 = now();
    for (long r = 0; r < reps; r++) {
        #pragma omp parallel for schedule(static) num_threads(threads)
        for (long i = 0; i < n; i++) acc[16 * omp_get_thread_num()] += 1.f;
    }
    double t = now() - t0;
    sink = acc[0];
    free(acc);
    return t / (double)reps;
}
"""


# One vector FMA is this many cost units: a finer unit than the FMA itself, so rounding to
# integers keeps ratios such as an L1 line's 2.5 FMAs.
FMA_UNITS = 4


@dataclass(frozen=True)
class Calibration:
    constants: CostConstants
    measured_ns: dict
    host: str

    def table(self) -> str:
        fma = self.measured_ns["fma"]
        unit = fma / FMA_UNITS
        lines = [f"one vector FMA at peak = {fma:.4f} ns ({16 / fma:.1f} GFLOP/s) "
                 f"= {FMA_UNITS} cost units", "",
                 f"{'measurement':28} {'ns':>12} {'units':>10}"]
        for k, v in self.measured_ns.items():
            lines.append(f"{k:28} {v:12.4f} {v / unit:10.2f}")
        lines += ["", f"{'constant':28} {'value':>12}"]
        for k, v in self.constants.to_json().items():
            lines.append(f"{k:28} {v:12}")
        return "\n".join(lines)


def _lib(target: Target):
    from morello.codegen.build import compile_c

    path = compile_c(SOURCE, target.cflags, openmp=True)
    lib = ctypes.CDLL(str(path))
    for name in ("cal_fma", "cal_bcast", "cal_copy", "cal_tile4", "cal_tile6", "cal_scalar",
                 "cal_hsum"):
        getattr(lib, name).restype = ctypes.c_double
        getattr(lib, name).argtypes = [ctypes.c_long]
    lib.cal_read.restype = ctypes.c_double
    lib.cal_read.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_long]
    lib.cal_streams.restype = ctypes.c_double
    lib.cal_streams.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long]
    lib.cal_stripes.restype = ctypes.c_double
    lib.cal_stripes.argtypes = [ctypes.c_long] * 3
    lib.cal_rows.restype = ctypes.c_double
    lib.cal_rows.argtypes = [ctypes.c_long] * 5
    lib.cal_parallel.restype = ctypes.c_double
    lib.cal_parallel.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_int]
    return lib


# Bytes of a row of ``cal_rows``'s x.W-ordered read (``gl_ramp``): a row of the bf16
# weights of the paper's 1x2048x16384 matvec.
ROW_BYTES = 32 << 10

# Bytes of each run of ``cal_streams``'s side-by-side read (``gl_line_parallel``): a page,
# the length of a weight row of gemma's 2048-wide bf16 matvec, and the most that a
# hardware prefetcher follows without a new start. Side by side, such runs may read
# slower than one sequential stream, on some hosts.
STREAM_RUN = 4096


# Distances (lines) ``cal_stripes`` prefetches ahead, 0 first (none): ``gl_prefetch`` is
# the best of them where it reads at least PREFETCH_GAIN faster than none. From L3 any
# distance lost, so kernels prefetch only in problems whose main-memory operands exceed
# the last-level cache (``codegen.emit.emit_c``).
PREFETCH_LINES = (0, 64, 128, 256, 512)
PREFETCH_GAIN = 1.03
PREFETCH_TIE = 1.02

# Bytes of the buffer whose strided read within the last-level cache gives ``llc_run``
# (at most a quarter of ``Target.llc_bytes``, so that it stays in the cache).
LLC_READ_BYTES = 8 << 20

# Bytes read as ``cal_streams``'s long runs side by side (``gl_line_streams``).
LONG_RUNS_BYTES = 64 << 20


def stream_read_ns(lib, nbytes: int = 128 << 20) -> float:
    """Nanoseconds per line of one sequential read through ``nbytes`` on huge pages
    (``cal_streams`` with one run, the best of 3): main memory as a kernel meets numpy's
    large arrays, the streaming roof the benchmarks report. (``cal_read``'s buffer has
    4 KiB pages, which read slower: docs/model-notes.md.)"""
    return min(lib.cal_streams(nbytes, 1, nbytes, 1) for _ in range(3)) * 1e9


def _best(f, *args, repeats: int = 5) -> float:
    return min(f(*args) for _ in range(repeats)) * 1e9


# The measurements within the core (registers, L1, L2, OpenMP): about a second in all.
CORE = ("fma", "l1_line", "l2_line", "vector_move", "broadcast", "tile_4x16_step",
        "tile_6x16_step", "scalar_madd", "hsum", "parallel_setup", "parallel_iter")


def _core(lib, q: int, say, names) -> dict:
    """The ``CORE`` measurements ``names`` (nanoseconds)."""
    ns = {}
    if "fma" in names:
        say("calibrate: FMA throughput")
        ns["fma"] = _best(lib.cal_fma, 20_000_000 // q)
    if "l1_line" in names:
        say("calibrate: L1 lines")
        ns["l1_line"] = _best(lib.cal_read, 16 << 10, 64, 20_000 // q)
    if "l2_line" in names:
        say("calibrate: L2 lines")
        ns["l2_line"] = _best(lib.cal_read, 256 << 10, 64, 2_000 // q)
    if "vector_move" in names:
        say("calibrate: vector copies, register tiles, scalar ops, horizontal sums")
        ns["vector_move"] = _best(lib.cal_copy, 20_000 // q)
        ns["broadcast"] = _best(lib.cal_bcast, 20_000_000 // q)
        ns["tile_4x16_step"] = _best(lib.cal_tile4, 20_000 // q)
        ns["tile_6x16_step"] = _best(lib.cal_tile6, 20_000 // q)
        ns["scalar_madd"] = _best(lib.cal_scalar, 20_000 // q)
        ns["hsum"] = _best(lib.cal_hsum, 5_000_000 // q)
    if "parallel_setup" in names:
        say("calibrate: OpenMP parallel loops")
        two = _best(lib.cal_parallel, 20_000 // q, 2, 2)
        many = _best(lib.cal_parallel, 2_000 // q, 1 << 16, 2)
        ns["parallel_setup"] = two
        ns["parallel_iter"] = max(0.0, (many - two) / (1 << 16))
    return ns


def measure_first_use(target: Target, progress=None, core_runs: int = 3) -> dict:
    """One run of ``measure``, with the in-core measurements (cheap, and the noisiest
    relative to their grid step) taken as the median of ``core_runs``."""
    import statistics

    ns = measure(target, progress)
    lib = _lib(target)
    runs = [ns] + [_core(lib, 1, lambda m: None, CORE) for _ in range(core_runs - 1)]
    for k in CORE:
        ns[k] = statistics.median(r[k] for r in runs)
    return ns


def measure(target: Target, progress=None, quick: bool = False) -> dict:
    """Nanoseconds per operation for each microbenchmark (minimum over repeats).

    ``quick`` runs each for a twentieth of the time, on a 32 MiB instead of a 256 MiB
    main-memory buffer: for tests, not for constants worth keeping."""
    lib = _lib(target)
    say = progress or (lambda m: None)
    q = 20 if quick else 1
    big = (32 if quick else 256) << 20
    ns = {}
    ns.update(_core(lib, q, say, ("fma", "l1_line", "l2_line")))
    say(f"calibrate: streaming main memory ({big >> 20} MiB)")
    ns["gl_line"] = _best(lib.cal_read, big, 64, 1, repeats=3)
    say(f"calibrate: {target.prefetch_streams} runs of {STREAM_RUN} bytes side by side")
    # As a ratio to one sequential run measured alike (the same huge-page buffer), applied
    # to gl_line: what reading weight rows side by side costs against reading them in turn.
    ns["stream_runs"] = _best(lib.cal_streams, big, target.prefetch_streams, STREAM_RUN, 1,
                              repeats=3)
    ns["stream_one"] = _best(lib.cal_streams, big, 1, STREAM_RUN, 1, repeats=3)
    ns["gl_line_parallel"] = ns["gl_line"] * ns["stream_runs"] / ns["stream_one"]
    say(f"calibrate: {target.prefetch_streams} long runs side by side")
    # Over 64 MiB (the paper's bf16 matvec weights), so each run is a few MiB, as a
    # matvec's stripes are (runs of 32 MiB read no faster than page-long ones on a host).
    long_buf = min(big, LONG_RUNS_BYTES)
    ns["stream_long"] = _best(lib.cal_streams, long_buf, target.prefetch_streams,
                              long_buf // target.prefetch_streams, 3, repeats=3)
    ns["stream_long_one"] = _best(lib.cal_streams, long_buf, 1, long_buf, 3, repeats=3)
    ns["gl_line_streams"] = ns["gl_line"] * ns["stream_long"] / ns["stream_long_one"]
    say("calibrate: stripes of bf16 weights, with and without software prefetch")
    # DotProductStripes' own loop over the same buffer (``gl_prefetch``).
    for lines in PREFETCH_LINES:
        ns[f"stripes_ahead_{lines}"] = _best(lib.cal_stripes, long_buf, lines, 3, repeats=3)
    say("calibrate: strided main memory (4 KiB stride)")
    ns["gl_line_strided"] = _best(lib.cal_read, big, 4096, 1, repeats=3)
    # The same within the last-level cache (``llc_run``): a buffer of a quarter of it,
    # read over as many passes as 64 MiB takes.
    llc = min(LLC_READ_BYTES, target.llc_bytes // 4)
    say(f"calibrate: strided reads in the last-level cache ({llc >> 20} MiB)")
    passes = max(1, (64 << 20) // llc // q)
    ns["llc_line"] = _best(lib.cal_read, llc, 64, passes, repeats=3)
    ns["llc_line_strided"] = _best(lib.cal_read, llc, 4096, passes, repeats=3)
    say(f"calibrate: rows read {target.prefetch_streams} side by side, in blocks")
    # x.W's order over rows of 32 KiB (16384 bf16 weights, a row of the paper's W), 8 KiB
    # of each row at a time against all of it: the extra time per extra run start.
    rows = big // ROW_BYTES
    short = _best(lib.cal_rows, big, ROW_BYTES, target.prefetch_streams, ROW_BYTES // 4, 1,
                  repeats=3)
    whole = _best(lib.cal_rows, big, ROW_BYTES, target.prefetch_streams, ROW_BYTES, 1,
                  repeats=3)
    ns["rows_short"], ns["rows_whole"] = short, whole
    ns["run_restart"] = (short - whole) * (big // 64) / (3 * rows)
    ns.update(_core(lib, q, say, CORE[3:]))
    return ns


def fit(ns: dict) -> CostConstants:
    """Integer constants from measured nanoseconds (see the module docstring)."""
    unit = ns["fma"] / FMA_UNITS

    def u(x: float) -> float:
        return x / unit

    l1 = max(1, round(u(ns["l1_line"])))
    # A vector move is priced at what its copy loop takes for a load and a store
    # together: the model has no store term of its own, and charges moves both ways (a C
    # tile's load and its store, a pack's read and write); priced at one move, the
    # search packed more than paid.
    vm = max(1, round(u(2 * ns["vector_move"])))
    run = max(0, round(u(ns["gl_line_strided"] - ns["gl_line"])))
    ramp = max(0, round(u(ns["run_restart"] - (ns["gl_line_strided"] - ns["gl_line"]))))
    return CostConstants(
        l1_line=l1,
        l2_line=max(l1, round(u(ns["l2_line"]))),
        gl_line=max(l1 + 1, round(u(ns["gl_line"]))),
        # cal_streams' time per line includes the starts of its page-long runs, which the
        # model charges apart (``cost.run_cost``): the line alone is the rest.
        gl_line_parallel=max(l1 + 1, round(u(ns["gl_line_parallel"])
                                           - (run + ramp) * 64 / STREAM_RUN)),
        gl_line_streams=max(l1 + 1, round(u(ns["gl_line_streams"]))),
        gl_run=run,
        gl_ramp=ramp,
        # Not measured (runs before this term): as main memory's, the model before it.
        llc_run=(max(0, round(u(ns["llc_line_strided"] - ns["llc_line"])))
                 if "llc_line_strided" in ns else run),
        strided_factor=max(1, round(ns["gl_line_strided"] / ns["gl_line"])),
        fma=FMA_UNITS,
        broadcast=max(1, round(u(ns["broadcast"]))),
        vector_move=vm,
        scalar_op=max(1, round(u(ns["scalar_madd"]) - 3 * l1)),
        hsum=max(1, round(u(ns["hsum"]))),
        parallel_setup=max(1, round(u(ns["parallel_setup"]))),
        parallel_iter=round(u(ns["parallel_iter"])),
        gl_prefetch=_prefetch_lines(ns),
    )


def _prefetch_lines(ns: dict) -> int:
    """The prefetch distance (lines) at which ``cal_stripes`` read fastest (the shortest of
    those within ``PREFETCH_TIE`` of it), or 0 when no
    distance beat none by ``PREFETCH_GAIN`` (or was not measured: older measurements)."""
    none = ns.get("stripes_ahead_0")
    if not none:
        return 0
    times = {n: ns[f"stripes_ahead_{n}"] for n in PREFETCH_LINES[1:]
             if f"stripes_ahead_{n}" in ns}
    if not times:
        return 0
    # The shortest distance within PREFETCH_TIE of the fastest: distances that read alike
    # would otherwise be picked by noise, and the constants are part of a database context.
    best = min(times.values())
    lines = min(n for n, t in times.items() if t <= best * PREFETCH_TIE)
    return lines if times[lines] * PREFETCH_GAIN <= none else 0


def run(target: Target, progress=None, quick: bool = False, runs: int = 1) -> Calibration:
    """Measure ``runs`` times and fit the median constants (each constant's median over the
    runs: one disturbed run moves none of them). ``measured_ns`` is the median run's."""
    import statistics

    if runs < 1:
        raise ValueError("runs must be >= 1")
    all_ns = []
    for r in range(runs):
        if runs > 1 and progress:
            progress(f"calibrate: run {r + 1} of {runs}")
        all_ns.append(measure(target, progress, quick))
    fits = [fit(ns).to_json() for ns in all_ns]
    constants = CostConstants.from_json(
        {k: int(statistics.median_low([f[k] for f in fits])) for k in fits[0]})
    ns = sorted(all_ns, key=lambda d: d["fma"])[len(all_ns) // 2]
    return Calibration(constants, {k: round(v, 4) for k, v in ns.items()}, _host())


def run_first_use(target: Target, progress=None) -> Calibration:
    """The constants of ``measure_first_use`` (``morello.hostfit``)."""
    ns = measure_first_use(target, progress)
    return Calibration(fit(ns), {k: round(v, 4) for k, v in ns.items()}, _host())


def _host() -> str:
    host = f"{platform.node()} {platform.machine()} {platform.processor() or ''}".strip()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    host = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return host
