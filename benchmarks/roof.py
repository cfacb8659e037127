"""Morello's f32 matmul kernels next to numpy/OpenBLAS and this machine's roofs, from ONE run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/roof.py [--quick] [--shapes 64x64x64 8x128x128x128]
                                                     [--threads 1 2] [--json out.json]

Shapes are ``MxKxN`` or ``BxMxKxN``. What is measured, in this order:

1. the roofs (AVX2 FMA peak of one core, streaming read bandwidth of one core), through
   ``benchmarks/roofline.py``;
2. morello: each Spec synthesized (one database file in a temp dir for the whole run),
   compiled, verified against numpy, then timed inside C: >= 7 timings, each over enough
   calls to take >= 20 ms; median and best. ``threads=2`` uses a non-serial Spec (OpenMP
   parallel loops) and, by default, only the large shapes (1024³ and batched);
3. numpy/OpenBLAS, one subprocess per (OPENBLAS_CORETYPE, thread count) because OpenBLAS
   reads both when it loads: ``np.matmul`` timed through Python, plus the library's cblas
   sgemm timed from C by a small harness that dlopens numpy's bundled OpenBLAS (verified
   against numpy once per shape and configuration); threadpoolctl's report of the kernel;
4. the roofs again (the machine is shared and noisy: both are printed, percentages use the
   higher of the two).

Percent of peak for t threads is against t × the one-core FMA peak. Memory-bound shapes
(m == 1) also get GB/s, with bytes = 4·(m·k + k·n + m·n), against the one-core bandwidth.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

FULL_SHAPES = [(1, 64, 64, 64), (1, 256, 256, 256), (1, 512, 512, 512),
               (1, 1024, 1024, 1024), (8, 128, 128, 128), (1, 1, 2048, 16384)]
QUICK_SHAPES = FULL_SHAPES[:2]
# Shapes on which morello is also run with threads > 1 (unless --parallel-all).
PARALLEL_SHAPES = {(1, 1024, 1024, 1024), (8, 128, 128, 128)}
CORETYPES = [None, "Haswell"]  # None: OpenBLAS picks by CPUID

REPEATS = 7
MIN_SECONDS = 0.02  # each timing covers at least this long


def shape_name(s) -> str:
    b, m, k, n = s
    return (f"{b}×" if b != 1 else "") + f"{m}×{k}×{n}"


def parse_shape(text: str):
    parts = [int(x) for x in re.split(r"[x×,]", text)]
    if len(parts) == 3:
        return (1, *parts)
    if len(parts) == 4:
        return tuple(parts)
    raise argparse.ArgumentTypeError(f"shape {text!r}: want MxKxN or BxMxKxN")


def flops(s) -> int:
    b, m, k, n = s
    return 2 * b * m * k * n


def nbytes(s) -> int:
    b, m, k, n = s
    return 4 * b * (m * k + k * n + m * n)


def summarize(per_call: list[float]) -> dict:
    return {"median_s": statistics.median(per_call), "best_s": min(per_call),
            "timings_s": per_call}


# ---------------------------------------------------------------------------------------
# 1. Roofs, through benchmarks/roofline.py (its main() prints; we parse what it prints).

def measure_roofs() -> dict:
    spec = importlib.util.spec_from_file_location("_morello_roofline", HERE / "roofline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        mod.main()
    text = buf.getvalue()
    kept = re.search(r"kept in the loop: (\d+) of (\d+)", text)
    peak = re.search(r"peak, one core: ([\d.]+) GFLOP/s", text)
    bw = re.search(r"bandwidth, one core: ([\d.]+) GB/s", text)
    if not (kept and peak and bw):
        raise SystemExit(f"could not parse roofline.py output:\n{text}")
    if kept.group(1) != kept.group(2):
        print(f"WARNING: only {kept.group(1)} of {kept.group(2)} FMA chains survived "
              "compilation: the peak is underestimated", file=sys.stderr)
    return {"fma_peak_gflops": float(peak.group(1)), "stream_gbs": float(bw.group(1)),
            "fma_chains_kept": int(kept.group(1)), "at": time.strftime("%H:%M:%S"),
            "loadavg_1min": os.getloadavg()[0]}


# ---------------------------------------------------------------------------------------
# 2. Morello.

def calibrate(fn, lhs, rhs) -> int:
    """Calls per timing so that one timing takes >= MIN_SECONDS (after a warm-up)."""
    iters = 1
    for _ in range(5):
        secs = fn.time(lhs, rhs, iters=iters) * iters
        if secs >= MIN_SECONDS:
            break
        iters = max(iters + 1, int(np.ceil(iters * 1.2 * MIN_SECONDS / max(secs, 1e-9))))
    return iters


def time_morello(fn, lhs, rhs, repeats: int) -> dict:
    iters = calibrate(fn, lhs, rhs)
    out = summarize([fn.time(lhs, rhs, iters=iters) for _ in range(repeats)])
    out["iters"] = iters
    return out


def run_morello(shape, threads: int, db: str, repeats: int) -> dict:
    import morello

    b, m, k, n = shape
    spec = morello.matmul(m, k, n, batch=b, serial=threads == 1)
    t0 = time.perf_counter()
    prog = morello.synthesize(spec, db=db, threads=threads)
    res = {"synthesis_seconds": prog.synthesis_seconds,
           "synthesis_wall_seconds": time.perf_counter() - t0,
           "specs_solved": prog.stats.specs_solved, "cost": prog.cost,
           "flops": prog.spec.flops()}
    fn = prog.compile()
    lhs, rhs = prog.random_inputs()
    try:
        np.testing.assert_allclose(fn(lhs, rhs), lhs @ rhs, rtol=1e-4, atol=1e-3)
    except AssertionError as e:
        print(f"VERIFY FAILED: morello {shape_name(shape)} threads={threads}: {e}",
              file=sys.stderr, flush=True)
        res["verified"] = False
        return res
    res["verified"] = True
    res.update(time_morello(fn, lhs, rhs, repeats))
    return res


# ---------------------------------------------------------------------------------------
# 3. numpy/OpenBLAS, each configuration in its own processes.

NUMPY_CHILD = r"""
import json, statistics, sys, time
import numpy as np
from threadpoolctl import threadpool_info
shapes, repeats, min_seconds = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
out = {"threadpool_info": [i for i in threadpool_info() if i.get("user_api") == "blas"],
       "shapes": {}}
rng = np.random.default_rng(0)
for b, m, k, n in shapes:
    lhs = rng.uniform(-1, 1, (b, m, k)).astype(np.float32)
    rhs = rng.uniform(-1, 1, (b, k, n)).astype(np.float32)
    if b == 1:  # a plain 2-D matmul: numpy's fastest path
        lhs, rhs = lhs[0], rhs[0]
    def timing():
        t0 = time.perf_counter()
        for _ in range(iters):
            np.matmul(lhs, rhs)
        return (time.perf_counter() - t0) / iters
    iters = 1
    for _ in range(5):  # calibrate (and warm up): one timing must take >= min_seconds
        secs = timing() * iters
        if secs >= min_seconds:
            break
        iters = max(iters + 1, int(iters * 1.2 * min_seconds / max(secs, 1e-9)) + 1)
    per_call = [timing() for _ in range(repeats)]
    out["shapes"]["x".join(map(str, (b, m, k, n)))] = {
        "median_s": statistics.median(per_call), "best_s": min(per_call),
        "timings_s": per_call, "iters": iters}
print(json.dumps(out))
"""

CBLAS_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BLASINT
#define BLASINT long long   /* ILP64 interface: 64-bit integer arguments */
#endif
enum { RowMajor = 101, NoTrans = 111 };
typedef void (*sgemm_t)(int order, int transa, int transb, BLASINT m, BLASINT n, BLASINT k,
                        float alpha, const float *a, BLASINT lda, const float *b, BLASINT ldb,
                        float beta, float *c, BLASINT ldc);
typedef char *(*corename_t)(void);

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec + 1e-9 * t.tv_nsec; }

/* Inputs are exact small multiples of 1/64, so numpy rebuilds them bit for bit. */
static void fill(float *x, long n, long mul, long add, long mod) {
    for (long i = 0; i < n; i++) x[i] = (float)((i * mul + add) % mod - mod / 2) / 64.0f;
}

static sgemm_t sgemm;
static long B, M, K, N;
static float *A, *Bm, *C;

static void call(void) {
    for (long i = 0; i < B; i++)
        sgemm(RowMajor, NoTrans, NoTrans, M, N, K, 1.0f, A + i * M * K, K, Bm + i * K * N, N,
              0.0f, C + i * M * N, N);
}

static double timing(long iters) {
    double t = now();
    for (long i = 0; i < iters; i++) call();
    return (now() - t) / iters;
}

/* usage: harness LIB SGEMM_SYMBOL CORENAME_SYMBOL|- B M K N REPEATS MIN_SECONDS OUT_C */
int main(int argc, char **argv) {
    if (argc != 11) { fprintf(stderr, "bad arguments\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    sgemm = (sgemm_t)dlsym(lib, argv[2]);
    if (!sgemm) { fprintf(stderr, "dlsym %s: %s\n", argv[2], dlerror()); return 1; }
    const char *core = "?";
    if (strcmp(argv[3], "-")) {
        corename_t f = (corename_t)dlsym(lib, argv[3]);
        if (f) core = f();
    }
    B = atol(argv[4]); M = atol(argv[5]); K = atol(argv[6]); N = atol(argv[7]);
    int repeats = atoi(argv[8]);
    double min_seconds = atof(argv[9]);
    A = aligned_alloc(64, ((B * M * K * 4 + 63) / 64) * 64);
    Bm = aligned_alloc(64, ((B * K * N * 4 + 63) / 64) * 64);
    C = aligned_alloc(64, ((B * M * N * 4 + 63) / 64) * 64);
    if (!A || !Bm || !C) { fprintf(stderr, "out of memory\n"); return 1; }
    fill(A, B * M * K, 37, 11, 101);
    fill(Bm, B * K * N, 53, 7, 97);
    memset(C, 0xff, B * M * N * 4);  /* NaNs: beta = 0 must overwrite them */
    call();
    FILE *f = fopen(argv[10], "wb");
    if (!f || fwrite(C, 4, B * M * N, f) != (size_t)(B * M * N)) { perror("write"); return 1; }
    fclose(f);
    long iters = 1;
    for (int c = 0; c < 5; c++) {  /* calibrate (and warm up): a timing takes >= min_seconds */
        double secs = timing(iters) * iters;
        if (secs >= min_seconds) break;
        long more = (long)(iters * 1.2 * min_seconds / (secs > 1e-9 ? secs : 1e-9)) + 1;
        iters = more > iters + 1 ? more : iters + 1;
    }
    printf("{\"corename\": \"%s\", \"iters\": %ld, \"timings_s\": [", core, iters);
    for (int r = 0; r < repeats; r++) printf("%s%.9g", r ? ", " : "", timing(iters));
    printf("]}\n");
    return 0;
}
"""


def harness_inputs(shape):
    """The inputs the C harness fills in, rebuilt in numpy (bit-identical)."""
    b, m, k, n = shape

    def fill(count, mul, add, mod):
        i = np.arange(count, dtype=np.int64)
        return ((i * mul + add) % mod - mod // 2).astype(np.float32) / np.float32(64)

    return (fill(b * m * k, 37, 11, 101).reshape(b, m, k),
            fill(b * k * n, 53, 7, 97).reshape(b, k, n))


def openblas_library() -> dict:
    from threadpoolctl import threadpool_info

    libs = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
    if not libs:
        raise SystemExit("numpy is not linked against OpenBLAS (threadpoolctl found none)")
    path = libs[0]["filepath"]
    syms = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True,
                          text=True, check=True).stdout.split()
    sgemm = [s for s in syms if re.fullmatch(r"(\w+_)?cblas_sgemm(64_|_64)?", s)]
    corename = [s for s in syms if re.fullmatch(r"(\w+_)?openblas_get_corename(64_|_64)?", s)]
    if not sgemm:
        raise SystemExit(f"no cblas sgemm symbol exported by {path}")
    sym = min(sgemm, key=len)
    return {"path": path, "sgemm_symbol": sym, "ilp64": "64" in sym,
            "corename_symbol": corename[0] if corename else "-"}


def build_harness(tmp: str, ilp64: bool) -> str:
    src = Path(tmp) / "cblas_harness.c"
    exe = Path(tmp) / "cblas_harness"
    src.write_text(CBLAS_C)
    cmd = ["cc", "-O2", "-std=c11", str(src), "-o", str(exe), "-ldl"]
    if not ilp64:
        cmd.insert(2, "-DBLASINT=int")
    subprocess.run(cmd, check=True)
    return str(exe)


def blas_env(coretype, threads: int) -> dict:
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def run_numpy_config(shapes, coretype, threads, lib, exe, tmp, repeats) -> dict:
    env = blas_env(coretype, threads)
    p = subprocess.run([sys.executable, "-c", NUMPY_CHILD,
                        json.dumps([list(s) for s in shapes]), str(repeats), str(MIN_SECONDS)],
                       capture_output=True, text=True, env=env, cwd=tmp, check=False)
    if p.returncode:
        raise SystemExit(f"numpy child failed (coretype={coretype}, threads={threads}):\n"
                         f"{p.stderr}")
    res = json.loads(p.stdout)
    res["cblas"] = {}
    for s in shapes:
        key = "x".join(map(str, s))
        out_c = Path(tmp) / "cblas_out.bin"
        q = subprocess.run([exe, lib["path"], lib["sgemm_symbol"], lib["corename_symbol"],
                            *map(str, s), str(repeats), str(MIN_SECONDS), str(out_c)],
                           capture_output=True, text=True, env=env, check=False)
        if q.returncode:
            print(f"cblas harness failed on {shape_name(s)}: {q.stderr}", file=sys.stderr)
            res["cblas"][key] = {"verified": False}
            continue
        r = json.loads(q.stdout)
        b, m, _, n = s
        got = np.fromfile(out_c, np.float32).reshape(b, m, n)
        out_c.unlink()
        a_, b_ = harness_inputs(s)
        ref = a_ @ b_
        r["verified"] = bool(np.allclose(got, ref, rtol=1e-4, atol=1e-3))
        if not r["verified"]:
            print(f"VERIFY FAILED: cblas {shape_name(s)} (coretype={coretype}): max abs err "
                  f"{np.max(np.abs(got - ref)):.3g}", file=sys.stderr, flush=True)
        else:
            r.update(summarize(r["timings_s"]))
        res["cblas"][key] = r
    return res


# ---------------------------------------------------------------------------------------
# 4. The table.

def gf(shape, secs) -> float:
    return flops(shape) / secs / 1e9


def fmt_pair(shape, d) -> str:
    if not d or "best_s" not in d:
        return "—" if not d else "VERIFY FAILED"
    return f"{gf(shape, d['median_s']):.1f} / {gf(shape, d['best_s']):.1f}"


def render(report: dict) -> str:
    peak1 = max(r["fma_peak_gflops"] for r in report["roofs"])
    bw1 = max(r["stream_gbs"] for r in report["roofs"])
    lines = []
    start, end = report["roofs"]
    lines.append(f"Roofs (one core), start {start['at']} → end {end['at']}: AVX2 FMA peak "
                 f"{start['fma_peak_gflops']:.1f} → {end['fma_peak_gflops']:.1f} GFLOP/s, "
                 f"streaming read {start['stream_gbs']:.1f} → {end['stream_gbs']:.1f} GB/s "
                 f"(percentages use the higher: {peak1:.1f} GFLOP/s × threads, "
                 f"{bw1:.1f} GB/s). 1-min load average {start['loadavg_1min']:.2f} → "
                 f"{end['loadavg_1min']:.2f} on {os.cpu_count()} CPUs.")
    lib = report["openblas"]
    lines.append(f"OpenBLAS: `{lib['path']}`, cblas symbol `{lib['sgemm_symbol']}` "
                 f"({'ILP64, int64' if lib['ilp64'] else 'LP64, int32'} arguments).")
    lines.append("")
    lines.append("| OPENBLAS_CORETYPE | OPENBLAS_NUM_THREADS | threadpoolctl architecture | "
                 "internal_api | version | num_threads | corename (C) |")
    lines.append("|---|---|---|---|---|---|---|")
    for cfg in report["numpy"]:
        info = (cfg["threadpool_info"] or [{}])[0]
        cores = {c.get("corename") for c in cfg["cblas"].values() if c.get("corename")}
        lines.append(f"| {cfg['coretype'] or '(default)'} | {cfg['threads']} | "
                     f"{info.get('architecture')} | {info.get('internal_api')} | "
                     f"{info.get('version')} | {info.get('num_threads')} | "
                     f"{', '.join(sorted(cores)) or '?'} |")
    lines.append("")
    lines.append("GFLOP/s are median / best of the timings. numpy py: `np.matmul` timed "
                 "through Python; cblas C: the library's sgemm timed from C. "
                 "% peak uses the best timing.")
    lines.append("")
    lines.append("| shape | threads | morello GFLOP/s | synth s | model cost | "
                 "numpy py (default) | numpy py (Haswell) | cblas C (default) | "
                 "cblas C (Haswell) | % peak morello | % peak numpy py / cblas C (default) | "
                 "GB/s morello / numpy py / cblas C | % BW morello / numpy py / cblas C |")
    lines.append("|" + "---|" * 13)
    np_by = {(c["coretype"], c["threads"]): c for c in report["numpy"]}
    for row in report["rows"]:
        s, t = tuple(row["shape"]), row["threads"]
        key = "x".join(map(str, s))
        mo = row.get("morello")
        d_np = np_by.get((None, t))
        h_np = np_by.get(("Haswell", t))
        dp = d_np["shapes"].get(key) if d_np else None
        hp = h_np["shapes"].get(key) if h_np else None
        dc = d_np["cblas"].get(key) if d_np else None
        hc = h_np["cblas"].get(key) if h_np else None
        peak = peak1 * t

        def pct(d, s=s, peak=peak):
            return f"{100 * gf(s, d['best_s']) / peak:.0f}%" if d and "best_s" in d else "—"

        def gbs(d, s=s):
            return nbytes(s) / d["best_s"] / 1e9 if d and "best_s" in d else None

        if mo is None:
            m_cells = ["— (not run)", "—", "—"]
        elif "error" in mo:
            m_cells = ["ERROR (see stderr)", "—", "—"]
        elif not mo.get("verified"):
            m_cells = ["VERIFY FAILED", f"{mo['synthesis_seconds']:.1f}", f"{mo['cost']:,}"]
        else:
            m_cells = [fmt_pair(s, mo), f"{mo['synthesis_seconds']:.1f}", f"{mo['cost']:,}"]
        cells = [shape_name(s), str(t), *m_cells, fmt_pair(s, dp), fmt_pair(s, hp),
                 fmt_pair(s, dc), fmt_pair(s, hc), pct(mo), f"{pct(dp)} / {pct(dc)}"]
        if s[1] == 1:  # matrix-vector: memory bound
            bws = [gbs(mo), gbs(dp), gbs(dc)]
            cells.append(" / ".join("—" if x is None else f"{x:.1f}" for x in bws))
            cells.append(" / ".join("—" if x is None else f"{100 * x / bw1:.0f}%"
                                    for x in bws))
        else:
            cells += ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only 64³ and 256³")
    ap.add_argument("--shapes", nargs="+", type=parse_shape, metavar="[Bx]MxKxN")
    ap.add_argument("--threads", nargs="+", type=int, default=[1])
    ap.add_argument("--parallel-all", action="store_true",
                    help="run morello with threads > 1 on every shape, not just the large ones")
    ap.add_argument("--repeats", type=int, default=REPEATS, help="timings per measurement (>= 7)")
    ap.add_argument("--json", metavar="PATH", help="also write every measurement here")
    args = ap.parse_args(argv)
    if args.repeats < 7:
        ap.error("--repeats must be at least 7")
    shapes = args.shapes or (QUICK_SHAPES if args.quick else FULL_SHAPES)
    threads = sorted(set(args.threads))
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("note: run with OPENBLAS_NUM_THREADS=1 so the numpy used for verification in "
              "this process does not compete with the kernels", file=sys.stderr)

    report = {"shapes": [list(s) for s in shapes], "threads": threads, "roofs": [],
              "rows": [], "numpy": [], "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    log("roofs (start) ...")
    report["roofs"].append(measure_roofs())
    with tempfile.TemporaryDirectory(prefix="morello-roof-") as tmp:
        for s in shapes:
            for t in threads:
                row = {"shape": list(s), "threads": t}
                if t == 1 or args.parallel_all or s in PARALLEL_SHAPES:
                    log(f"morello {shape_name(s)} threads={t} ...")
                    # A database holds one target, and threads=t is target avx2-<t>t.
                    db = os.path.join(tmp, f"roof-{t}t.db")
                    try:
                        row["morello"] = run_morello(s, t, db, args.repeats)
                    except Exception as e:  # noqa: BLE001 (keep going: report the rest)
                        log(f"morello {shape_name(s)} threads={t} FAILED: {e!r}")
                        row["morello"] = {"error": repr(e)}
                report["rows"].append(row)
        lib = openblas_library()
        report["openblas"] = lib
        exe = build_harness(tmp, lib["ilp64"])
        for t in threads:
            for ct in CORETYPES:
                log(f"numpy/OpenBLAS coretype={ct or 'default'} threads={t} ...")
                cfg = run_numpy_config(shapes, ct, t, lib, exe, tmp, args.repeats)
                cfg.update(coretype=ct, threads=t)
                report["numpy"].append(cfg)
    log("roofs (end) ...")
    report["roofs"].append(measure_roofs())
    print(render(report), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
