"""The bf16→f32 matvec of LLM decoding (the Morello paper's headline), side by side in
one run on one thread: morello's synthesized kernel, numpy f32 on f32 weights of the same
shape, and torch's bf16 path when torch is importable; with the streaming read bandwidth
and the FMA peak measured in the same rounds.

    OPENBLAS_NUM_THREADS=1 python benchmarks/matvec.py [--rounds 5] [--k 2048 --n 16384]
        [--target avx512]

Shapes: ``x[1×K] · W[K×N]`` (W row-major, ``rm``) and gemma's ``W[N×K]`` rows dotted with
x (``cm``: rhs column-major, the callable takes ``W.T``), bf16 weights, f32 x and
output; and the same in cache (1×512×1024). Every morello kernel is verified against numpy
first. morello is timed inside C, the others through Python (best of 3 batches of about
20 ms each), in ``--rounds`` interleaved rounds; the table gives medians. Bandwidth: the
best of ``calibrate``'s ``cal_streams`` over 1 to 16 long runs read side by side (its
buffer in huge pages where the kernel grants them, as numpy's arrays), over a buffer
of the weights' size read 5 times (the best pass), in every round: the kernel is timed
over calls that read the same weights again, and a 64 MiB buffer fits some hosts' L3, so
the two are measured alike. The in-cache rows are measured against the same read
over their weights' buffer (1 MiB) read 20 times, the best pass: a 1 MiB matvec reads
its weights once per call, so it cannot run faster than the caches deliver them (on a
Zen 4 host with 1 MiB of L2 they come partly from L3; a 1 byte-per-flop loop needs 32
bytes per cycle for the AVX2 FMA peak, beyond what L2 delivers). Peak: ``cal_fma``
(12 chains); with ``--target avx512`` (morello's programs for AVX-512) the better of that
and the same 12 chains in zmm registers (on Zen 4 the two are alike: it runs a zmm FMA
as two halves).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

# One thread for numpy's OpenBLAS too, whatever the caller's environment (before numpy
# loads it): run without it, numpy's sgemv took both cores and looked twice as fast.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from timers import c_timer, fma_peak, optional_torch, py_timer  # noqa: E402

import morello  # noqa: E402
from morello import calibrate
from morello.memory import AVX2, calibration_source, host_lacks, parse_target


def _peers(x, w, out, lay, torch) -> dict:
    """Timers of numpy f32 (on f32 weights) and torch bf16 for one case."""
    timers = {}
    if lay == "rm":
        timers["numpy f32"] = py_timer(lambda: np.matmul(x, w, out=out))
    else:
        o1 = np.empty(w.shape[0], np.float32)
        timers["numpy f32"] = py_timer(lambda: np.matmul(w, x[0], out=o1))
    if torch is not None:
        xt = torch.from_numpy(x).to(torch.bfloat16)
        wt = torch.from_numpy(w).to(torch.bfloat16)
        if lay == "rm":
            timers["torch bf16"] = py_timer(lambda: torch.matmul(xt, wt))
        else:
            timers["torch bf16"] = py_timer(lambda: torch.nn.functional.linear(xt, wt))
    return timers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--target", default="avx2", help="avx2 (default) or avx512")
    args = ap.parse_args()
    target = parse_target(args.target)
    if (why := host_lacks(target)) is not None:
        raise SystemExit(f"this host cannot run {args.target} code: {why}")
    torch = optional_torch()
    lib = calibrate._lib(AVX2)
    fma512 = fma_peak(target) if target.isa == "avx512" else None
    rng = np.random.default_rng(0)
    cases = [(args.k, args.n, "rm"), (args.k, args.n, "cm"), (512, 1024, "rm"),
             (512, 1024, "cm")]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "matvec.sqlite")
        for k, n, lay in cases:
            spec = morello.matmul(1, k, n, dtypes=("f32", "bf16", "f32"), rhs_layout=lay,
                                  target=args.target)
            t0 = time.perf_counter()
            prog = morello.synthesize(spec, target=args.target, db=db)
            search = time.perf_counter() - t0
            fn = prog.compile()
            ok, err = prog.verify(fn)
            assert ok, f"{spec.logical_str()}: does not match numpy (max error {err})"
            x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
            w = rng.uniform(-1, 1, (k, n) if lay == "rm" else (n, k)).astype(np.float32)
            wb = w.astype(ml_dtypes.bfloat16)
            out = np.empty((1, n), np.float32)
            ins = [x, wb if lay == "rm" else wb.T]
            timers = {"morello": c_timer(fn, ins, out)}
            timers.update(_peers(x, w, out, lay, torch))
            rows.append(((k, n, lay), prog, search, timers, wb.nbytes))

        times = {i: {name: [] for name in r[3]} for i, r in enumerate(rows)}
        bws, peaks = [], []
        small = rows[-1][4]
        cache_bws: list[float] = []
        for _ in range(args.rounds):
            big = rows[0][4]
            bws.append(max(64 / (lib.cal_streams(big, s, big // s, 5) * 1e9)
                           for s in (1, 2, 4, 8, 16)))
            # The in-cache rows' roof: the same read over a buffer of their weights' size,
            # again and again (the best of 20 passes: the first comes from memory).
            cache_bws.append(max(64 / (lib.cal_streams(small, s, small // s, 20) * 1e9)
                                 for s in (1, 2, 4)))
            peak = 16 / (min(lib.cal_fma(20_000_000) for _ in range(3)) * 1e9)
            if fma512 is not None:
                peak = max(peak, fma512())
            peaks.append(peak)
            for i, r in enumerate(rows):
                for name, timer in r[3].items():
                    times[i][name].append(timer())
    bw, peak = statistics.median(bws), statistics.median(peaks)
    cache_bw = statistics.median(cache_bws)
    isa = "AVX-512 (or AVX2)" if fma512 is not None else "AVX2"
    print(f"this run: morello's target {args.target}, streaming read bandwidth {bw:.1f} GB/s "
          f"(best of 1..16 side-by-side runs), read bandwidth of the in-cache weights' "
          f"{small >> 10} KiB read again and again {cache_bw:.1f} GB/s, {isa} FMA peak "
          f"{peak:.1f} GFLOP/s, {args.rounds} rounds; {calibration_source(args.target)}\n")
    names = list(rows[0][3])
    print("| K×N | W | " + " | ".join(f"{nm} ms" for nm in names)
          + " | morello GB/s (% of read bw) | morello GFLOP/s (% of peak) | "
          + " | ".join(f"{nm}/morello" for nm in names[1:]) + " | search s |")
    print("|" + "---|" * (5 + 2 * len(names) - 1))
    for i, ((k, n, lay), _, search, _, nbytes) in enumerate(rows):
        med = {nm: statistics.median(times[i][nm]) for nm in names}
        ratio = {nm: statistics.median(a / b for a, b in zip(times[i][nm], times[i]["morello"]))
                 for nm in names[1:]}
        t = med["morello"]
        gbs, gfl = nbytes / t / 1e9, 2 * k * n / t / 1e9
        roof = bw if i < 2 else cache_bw  # the first two cases stream from main memory
        print(f"| {k}×{n} | {'W[K×N]' if lay == 'rm' else 'W[N×K] (gemma)'} | "
              + " | ".join(f"{med[nm] * 1e3:.3f}" for nm in names)
              + f" | {gbs:.1f} ({100 * gbs / roof:.0f} %) | {gfl:.1f} ({100 * gfl / peak:.0f} %) | "
              + " | ".join(f"{ratio[nm]:.2f}" for nm in names[1:]) + f" | {search:.2f} |")
    print("\nThe chosen programs (model cost, Impl tree):")
    for (k, n, lay), prog, *_ in rows:
        print(f"\n1×{k}×{n} {lay}: cost {prog.cost}")
        print(prog.impl.pformat())


if __name__ == "__main__":
    main()
