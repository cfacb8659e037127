"""Softmax along the last dim: morello, numpy and (when importable) torch, side by side in
one run on one thread, in ns per element, with a hand-written AVX2 loop as the roof; for
the input that does not fit in cache, also
the fraction of this machine's streaming bandwidth, measured in the same run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/softmax.py [--rounds 7] [--targets avx2 avx512]

``--targets``: morello's programs for each (default: avx2, and avx512 where the host runs
it), timed in the same rounds; the ratios are against the last target's program, and
against each target's for the hand loop (``HAND_C``, timed inside C too).
Every morello kernel is verified against numpy first. morello is timed inside C, numpy
(``exp(x - max) / sum``, into preallocated arrays) and torch (``torch.softmax(x, -1,
out=...)``) through Python, each the best of 3 batches of about 20 ms, in ``--rounds``
interleaved rounds; the table gives median times and the median of per-round ratios.
Bandwidth: the bytes a softmax must move (read src, write dst: 8 bytes per element) over
its time, against ``calibrate.stream_read_ns`` (a sequential read on huge pages, as the
input's; the memory roof of ``benchmarks/roofline.py``), measured in every round for the
largest input (the median of the per-round fractions); and, for that input, the speed of
a read-and-write stream (numpy ``x * 0.5`` into another array) timed in the same rounds,
and a copy in C that stores past the caches (``copy_bench``): the least a softmax that
passes over main memory once must move.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from timers import c_timer, optional_torch, py_timer

import morello
from morello import calibrate
from morello.memory import AVX2, AVX512, calibration_source, host_lacks, parse_target

SHAPES = [(1, 16384), (128, 128), (512, 1024), (4096, 4096)]  # the last: 64 MiB

# The roof the search's programs are measured against: three passes per row written by
# hand (max over 4 accumulators; exp(x - max) stored and summed over 2; scaled by
# 1/sum), with the prelude's exp, so that the ratio measures the search's choice and
# its emitted loops, not the exp.
HAND_C = r"""
void hand_softmax(const float *restrict x, float *restrict y, long rows, long cols) {
    for (long i = 0; i < rows; i++, x += cols, y += cols) {
        __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
        long q = 0;
        for (; q + 32 <= cols; q += 32) {
            m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + q));
            m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + q + 8));
            m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + q + 16));
            m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + q + 24));
        }
        float m = morello_hmax8(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
        for (; q < cols; q++) m = x[q] > m ? x[q] : m;
        const __m256 mv = _mm256_set1_ps(m);
        __m256 s0 = _mm256_setzero_ps(), s1 = s0;
        for (q = 0; q + 16 <= cols; q += 16) {
            __m256 e0 = morello_exp8_neg(_mm256_sub_ps(_mm256_loadu_ps(x + q), mv));
            __m256 e1 = morello_exp8_neg(_mm256_sub_ps(_mm256_loadu_ps(x + q + 8), mv));
            _mm256_storeu_ps(y + q, e0);
            _mm256_storeu_ps(y + q + 8, e1);
            s0 = _mm256_add_ps(s0, e0);
            s1 = _mm256_add_ps(s1, e1);
        }
        float s = morello_hsum8(_mm256_add_ps(s0, s1));
        for (; q < cols; q++) s += (y[q] = morello_expf(x[q] - m));
        const __m256 iv = _mm256_set1_ps(1.0f / s);
        for (q = 0; q + 8 <= cols; q += 8)
            _mm256_storeu_ps(y + q, _mm256_mul_ps(_mm256_loadu_ps(y + q), iv));
        for (; q < cols; q++) y[q] *= 1.0f / s;
    }
}
/* The least a one-pass softmax from memory moves: src read, dst stored past the caches
 * (no read of its lines first, as morello's programs beyond the LLC store it). */
double copy_bench(const float *restrict x, float *restrict y, long n, long iters) {
    double t0 = morello_now();
    for (long it = 0; it < iters; it++) {
        long q = 0;
        for (; q < n && ((uintptr_t)(y + q) & 31); q++) y[q] = x[q];
        for (; q + 16 <= n; q += 16) {
            _mm256_stream_ps(y + q, _mm256_loadu_ps(x + q));
            _mm256_stream_ps(y + q + 8, _mm256_loadu_ps(x + q + 8));
        }
        for (; q < n; q++) y[q] = x[q];
        _mm_sfence();
        __asm__ volatile("" ::: "memory");
    }
    return (morello_now() - t0) / (double)iters;
}
/* The passes over memory of morello's programs beyond the LLC with no arithmetic: a
 * row's max; the row copied into a buffer of a row (L1) and summed, the row two on
 * asked into L2 meanwhile (as codegen.prefetch.DRAM_PASSES_AHEAD); the buffer scaled and
 * stored past the caches. What those programs could reach with an exp for free. */
double rows_bench(const float *restrict x, float *restrict y, long rows, long cols,
                  long iters) {
    float *buf = aligned_alloc(64, (size_t)(cols + 16) * 4);
    if (buf == NULL) return -1.0;
    double t0 = morello_now();
    for (long it = 0; it < iters; it++) {
        for (long i = 0; i < rows; i++) {
            const float *r = x + i * cols, *next = r + (i + 2 < rows ? 2 * cols : 0);
            float *d = y + i * cols;
            __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
            long q = 0;
            for (; q + 16 <= cols; q += 16) {
                m0 = _mm256_max_ps(m0, _mm256_loadu_ps(r + q));
                m1 = _mm256_max_ps(m1, _mm256_loadu_ps(r + q + 8));
            }
            float m = morello_hmax8(_mm256_max_ps(m0, m1)), s = 0.0f;
            for (; q < cols; q++) m = r[q] > m ? r[q] : m;
            const __m256 mv = _mm256_set1_ps(m);
            __m256 s0 = _mm256_setzero_ps(), s1 = s0;
            for (q = 0; q + 16 <= cols; q += 16) {
                _mm_prefetch((const char *)(next + q), _MM_HINT_T1);
                const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(r + q), mv),
                             b = _mm256_sub_ps(_mm256_loadu_ps(r + q + 8), mv);
                _mm256_store_ps(buf + q, a);
                _mm256_store_ps(buf + q + 8, b);
                s0 = _mm256_add_ps(s0, a);
                s1 = _mm256_add_ps(s1, b);
            }
            for (; q < cols; q++) s += (buf[q] = r[q] - m);
            const float inv = 1.0f / (morello_hsum8(_mm256_add_ps(s0, s1)) + s);
            const __m256 iv = _mm256_set1_ps(inv);
            q = 0;
            for (; q < cols && ((uintptr_t)(d + q) & 31); q++) d[q] = buf[q] * inv;
            for (; q + 8 <= cols; q += 8)
                _mm256_stream_ps(d + q, _mm256_mul_ps(_mm256_loadu_ps(buf + q), iv));
            for (; q < cols; q++) d[q] = buf[q] * inv;
        }
        _mm_sfence();
        __asm__ volatile("" ::: "memory");
    }
    free(buf);
    return (morello_now() - t0) / (double)iters;
}
double hand_bench(const float *x, float *y, long rows, long cols, long iters) {
    double t0 = morello_now();
    for (long it = 0; it < iters; it++) {
        hand_softmax(x, y, rows, cols);
        __asm__ volatile("" ::: "memory");
    }
    return (morello_now() - t0) / (double)iters;
}
"""


def hand_softmax():
    """The hand loop, compiled for AVX2: ``run(x, y)`` on float32 rows, ``timer(x, y)``,
    a timer of it inside C as ``c_timer`` times morello's, ``copy_timer(x, y)``, of
    the read and non-temporal write of ``x`` into ``y``, and ``rows_timer(x, y)``, of
    ``rows_bench`` (morello's passes over memory without the arithmetic)."""
    import ctypes

    from morello.codegen.build import compile_c
    from morello.codegen.emit import partial

    source = partial("prelude.c") + partial("bench.c") + HAND_C
    lib = ctypes.CDLL(str(compile_c(source, AVX2.cflags)))
    lib.hand_softmax.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long,
                                 ctypes.c_long]
    lib.hand_bench.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long,
                               ctypes.c_long, ctypes.c_long]
    lib.hand_bench.restype = ctypes.c_double
    lib.copy_bench.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
    lib.copy_bench.restype = ctypes.c_double
    lib.rows_bench.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_long] * 3
    lib.rows_bench.restype = ctypes.c_double

    def run(x: np.ndarray, y: np.ndarray) -> None:
        lib.hand_softmax(x.ctypes.data, y.ctypes.data, x.shape[0], x.shape[1])

    def _timer(bench, *args):
        """The best of 3 batches of about 20 ms of ``bench(*args, iters)``, a timer."""
        iters = max(1, int(0.02 / max(bench(*args, 1), 1e-9)))
        return lambda: min(bench(*args, iters) for _ in range(3))

    def timer(x: np.ndarray, y: np.ndarray):
        return _timer(lib.hand_bench, x.ctypes.data, y.ctypes.data, x.shape[0], x.shape[1])

    def copy_timer(x: np.ndarray, y: np.ndarray):
        return _timer(lib.copy_bench, x.ctypes.data, y.ctypes.data, x.size)

    def rows_timer(x: np.ndarray, y: np.ndarray):
        return _timer(lib.rows_bench, x.ctypes.data, y.ctypes.data, x.shape[0], x.shape[1])
    return run, timer, copy_timer, rows_timer




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--targets", nargs="+", default=None, metavar="TARGET",
                    help="morello targets to time (default: avx2, and avx512 if the host "
                         "runs it)")
    args = ap.parse_args()
    targets = args.targets or ["avx2"] + ([] if host_lacks(AVX512) else ["avx512"])
    for t in targets:
        if (why := host_lacks(parse_target(t))) is not None:
            raise SystemExit(f"this host cannot run {t} code: {why}")
    last = targets[-1]
    torch = optional_torch()
    lib = calibrate._lib(AVX2)

    def read_bw() -> float:
        return 64 / calibrate.stream_read_ns(lib)

    read_gbs = read_bw()
    print(f"streaming read bandwidth (one core, this run): {read_gbs:.1f} GB/s; "
          f"{calibration_source('avx2')}\n")
    cols = " | ".join(f"morello {t} ns/elem" for t in targets)
    hands = " | ".join(f"hand/morello {t}" for t in targets)
    print(f"| shape | {cols} | hand AVX2 loop ns/elem | numpy ns/elem | torch ns/elem | "
          f"{hands} | numpy/morello | torch/morello | "
          "morello GB/s (% of read bw, beyond the LLC) | search s |")
    print("|---|" + "---|" * (2 * len(targets) + 7))
    hand_run, hand_timer, copy_timer, rows_timer = hand_softmax()
    trees = []
    stream_line = ""
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "softmax.sqlite")
        for shape in SHAPES:
            fns, search = {}, 0.0
            for t in targets:
                t0 = time.perf_counter()
                prog = morello.synthesize(morello.softmax(*shape), t, db=db)
                search = time.perf_counter() - t0
                fn = prog.compile()
                ok, err = prog.verify(fn)
                assert ok, f"{shape} {t}: does not match numpy ({err})"
                fns[t] = fn
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            out = np.empty_like(x)
            m = np.empty((shape[0], 1), np.float32)
            s = np.empty((shape[0], 1), np.float32)

            def numpy_softmax(x=x, out=out, m=m, s=s):
                np.max(x, axis=-1, keepdims=True, out=m)
                np.subtract(x, m, out=out)
                np.exp(out, out=out)
                np.sum(out, axis=-1, keepdims=True, out=s)
                np.divide(out, s, out=out)

            timers = {t: c_timer(f, [x], out) for t, f in fns.items()}
            hy = np.empty_like(x)
            hand_run(x, hy)
            want = np.exp(x - x.max(-1, keepdims=True))
            np.testing.assert_allclose(hy, want / want.sum(-1, keepdims=True), rtol=1e-5,
                                       atol=1e-9)
            timers["hand"] = hand_timer(x, hy)
            timers["numpy"] = py_timer(numpy_softmax)
            if torch is not None:
                tx, to = torch.from_numpy(x), torch.empty(shape)
                timers["torch"] = py_timer(lambda tx=tx, to=to: torch.softmax(tx, -1, out=to))
            if shape == SHAPES[-1]:  # the read-and-write roof: one pass, src to dst
                sy = np.empty_like(x)
                timers["stream"] = py_timer(
                    lambda x=x, sy=sy: np.multiply(x, np.float32(0.5), out=sy))
                timers["copy"] = copy_timer(x, sy)
                timers["passes"] = rows_timer(x, sy)
            times: dict[str, list[float]] = {k: [] for k in timers}
            bws = []
            for _ in range(args.rounds):  # interleaved: a neighbour's load hits all alike
                for k, timer in timers.items():
                    times[k].append(timer())
                if shape == SHAPES[-1]:
                    bws.append(read_bw())
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio = {k: statistics.median(a / b for a, b in zip(v, times[last]))
                     for k, v in times.items()}
            n = x.size
            gbs = 8 * n / med[last] / 1e9
            # Against main memory's bandwidth only the input that does not fit in cache
            # (in cache it is no roof: 1×16384 moved 135 % of it).
            bw_col = "in cache"
            if bws:
                pct = statistics.median(8 * n / t / 1e9 / b for t, b in zip(times[last], bws))
                bw_col = f"{100 * pct:.0f} % of {statistics.median(bws):.1f}"
            vs_hand = {t: statistics.median(h / q for h, q in zip(times["hand"], times[t]))
                       for t in targets}
            tt = med.get("torch")
            vs_torch = "-" if tt is None else f"{ratio['torch']:.2f}×"
            ns = " | ".join(f"{med[t] / n * 1e9:.3f}" for t in targets)
            print(f"| {shape[0]}×{shape[1]} | {ns} | {med['hand'] / n * 1e9:.3f} | "
                  f"{med['numpy'] / n * 1e9:.3f} | "
                  f"{'-' if tt is None else f'{tt / n * 1e9:.3f}'} | "
                  + " | ".join(f"{vs_hand[t]:.2f}×" for t in targets) + " | "
                  f"{ratio['numpy']:.2f}× | "
                  f"{vs_torch} | "
                  f"{gbs:.1f} ({bw_col}) | {search:.2f} |", flush=True)
            trees.append((shape, prog.impl.pformat()))
            if "stream" in times:
                passes_pct = statistics.median(8 * n / t / 1e9 / b
                                               for t, b in zip(times["passes"], bws))
                stream_line = (
                    f"\nA read-and-write stream over the same {shape[0]}×{shape[1]} input "
                    f"(numpy `x * 0.5` into another array, in the same rounds): "
                    f"{med['stream'] / n * 1e9:.3f} ns/elem, {8 * n / med['stream'] / 1e9:.1f}"
                    f" GB/s moved; morello {last} runs at "
                    f"{100 * ratio['stream']:.0f} % of its speed (median of per-round "
                    "ratios). A copy in C that reads it and stores past the caches (no "
                    "read of the output's lines), the least a one-pass softmax from memory "
                    f"moves: {med['copy'] / n * 1e9:.3f} ns/elem, "
                    f"{8 * n / med['copy'] / 1e9:.1f} GB/s; morello {last} at "
                    f"{100 * ratio['copy']:.0f} % of its speed. The passes over memory of "
                    "morello's programs with no arithmetic (`rows_bench`: a row's max, the "
                    "row copied into an L1 row and summed, the row two on prefetched into L2, "
                    "then scaled and stored past the caches): "
                    f"{med['passes'] / n * 1e9:.3f} ns/elem, "
                    f"{8 * n / med['passes'] / 1e9:.1f} GB/s "
                    f"({100 * passes_pct:.0f} % of the read bandwidth); morello {last} at "
                    f"{100 * ratio['passes']:.0f} % of its speed.")
    if stream_line:
        print(stream_line)
    for shape, tree in trees:
        print(f"\nThe program the search chose for {shape[0]}×{shape[1]} ({last}):\n{tree}")


if __name__ == "__main__":
    main()
