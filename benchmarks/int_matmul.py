"""u8×s8 → s32 matmuls, exact and saturating (vpmaddubsw's pairs), next to morello's own
f32 matmul of the same shape, in one run on one thread, with the AVX2 FMA peak measured in
the same rounds.

    python benchmarks/int_matmul.py [--rounds 5] [--sizes 64 256 512]

All programs are synthesized, verified against numpy first (the integer ones exactly,
the saturating one against its own saturating reference),
and timed inside C in ``--rounds`` interleaved rounds; the table gives medians, GOPS
(two operations per multiply-add) and the median per-round ratio int/f32.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from timers import c_timer

import morello
from morello import calibrate
from morello.memory import AVX2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 512])
    args = ap.parse_args()
    lib = calibrate._lib(AVX2)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "int.sqlite")
        for n in args.sizes:
            timers, searches, costs = {}, {}, {}
            for dts in ("u8,s8,s32", "u8,s8,s32 sat", "f32,f32,f32"):
                t0 = time.perf_counter()
                spec = morello.matmul(n, n, n, dtypes=dts.split()[0], saturate="sat" in dts)
                prog = morello.synthesize(spec, db=db)
                searches[dts] = time.perf_counter() - t0
                costs[dts] = prog.cost
                fn = prog.compile()
                ok, err = prog.verify(fn)
                assert ok, f"{dts} {n}^3 does not match numpy ({err})"
                ins = prog.random_inputs()
                out = np.empty((1, n, n), prog.spec.output.dtype.np)
                timers[dts] = c_timer(fn, ins, out)
            rows.append((n, timers, searches, costs))
        times = [{k: [] for k in r[1]} for r in rows]
        peaks = []
        for _ in range(args.rounds):
            peaks.append(16 / (min(lib.cal_fma(20_000_000) for _ in range(3)) * 1e9))
            for i, r in enumerate(rows):
                for k, timer in r[1].items():
                    times[i][k].append(timer())
    peak = statistics.median(peaks)
    print(f"this run: AVX2 FMA peak {peak:.1f} GFLOP/s, {args.rounds} rounds\n")
    print("| n³ | u8×s8→s32 exact GOPS | saturating GOPS | f32 GFLOP/s (% of peak) | "
          "exact/f32 | saturating/f32 | search s (exact, sat, f32) |")
    print("|---|---|---|---|---|---|---|")
    for i, (n, _, searches, _) in enumerate(rows):
        med = {key: statistics.median(v) for key, v in times[i].items()}
        ratio = {key: statistics.median(f / q for q, f in zip(times[i][key],
                                                              times[i]["f32,f32,f32"]))
                 for key in ("u8,s8,s32", "u8,s8,s32 sat")}
        ops = 2 * n ** 3
        gops = {key: ops / t / 1e9 for key, t in med.items()}
        print(f"| {n}³ | {gops['u8,s8,s32']:.1f} | {gops['u8,s8,s32 sat']:.1f} | "
              f"{gops['f32,f32,f32']:.1f} ({100 * gops['f32,f32,f32'] / peak:.0f} %) | "
              f"{ratio['u8,s8,s32']:.2f} | {ratio['u8,s8,s32 sat']:.2f} | "
              + ", ".join(f"{searches[key]:.1f}" for key in med) + " |")


if __name__ == "__main__":
    main()
