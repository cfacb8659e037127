"""u8×s8 → s32 matmuls, exact and saturating (vpmaddubsw's pairs), next to morello's own
f32 matmul of the same shape and torch's integer paths, in one run on one thread, with
the AVX2 FMA peak measured in the same rounds.

    python benchmarks/int_matmul.py [--rounds 5] [--sizes 64 256 512] [--targets avx2 avx512]

All morello programs are synthesized, verified against numpy first (the integer ones
exactly, the saturating one against its own saturating reference) and timed inside C.
On AVX2 the exact product widens bytes to s16 for vpmaddwd (16 multiply-adds and an add
per 8 outputs); on AVX-512 (with VNNI) it multiplies four bytes at a time into s32
(vpdpbusd, 32 multiply-adds per instruction). torch, when importable, is timed through
Python (under 1 % of a call at 256³): ``torch._int_mm`` (s8×s8 → s32, exact) and fbgemm's
quantized linear (u8×s8 with requantization to u8, so a little more work than ours;
activations kept to 0..127, as torch's reduce_range does for AVX2 without VNNI),
each checked first (``_int_mm`` exactly against numpy). Every timer runs in each of
``--rounds`` interleaved rounds; the table gives medians, GOPS (two operations per
multiply-add) and the median per-round ratios.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from timers import c_timer, optional_torch, py_timer

import morello
from morello import calibrate
from morello.memory import AVX2, TARGETS, host_lacks

KINDS = ("u8,s8,s32", "u8,s8,s32 sat", "f32,f32,f32")


def _torch_timers(torch, n: int) -> dict:
    """torch's integer matmuls of n³ as timers, each checked first."""
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (n, n), dtype=np.int8)
    b = rng.integers(-128, 128, (n, n), dtype=np.int8)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    got = torch._int_mm(ta, tb).numpy()
    assert (got == a.astype(np.int32) @ b.astype(np.int32)).all(), "torch._int_mm is wrong"
    timers = {"torch _int_mm": py_timer(lambda: torch._int_mm(ta, tb))}
    if "fbgemm" in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = "fbgemm"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # quantized tensors are deprecated in torch
            # activations in 0..127 (torch's reduce_range): on AVX2 without VNNI fbgemm
            # multiplies u8×s8 pairs with vpmaddubsw, which saturates s16 beyond that
            x = torch.quantize_per_tensor(torch.rand(n, n) / 2, 1 / 255, 0, torch.quint8)
            w = torch.quantize_per_tensor(torch.rand(n, n) - 0.5, 1 / 254, 0, torch.qint8)
            packed = torch.ops.quantized.linear_prepack(w, None)
            scale = float(n) / 4 / 255
            y = torch.ops.quantized.linear(x, packed, scale, 0)
            want = x.dequantize() @ w.dequantize().T
            err = (y.dequantize() - want.clamp(0, 255 * scale)).abs().max().item()
            assert err <= scale, f"fbgemm's quantized linear is off by {err}"
            timers["torch fbgemm"] = py_timer(
                lambda: torch.ops.quantized.linear(x, packed, scale, 0))
    return timers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 512])
    ap.add_argument("--targets", nargs="+", choices=sorted(TARGETS),
                    help="targets to compare (default: avx2, and avx512 where the host "
                         "runs it)")
    args = ap.parse_args()
    targets = args.targets or [t for t in ("avx2", "avx512")
                               if host_lacks(TARGETS[t]) is None]
    lib = calibrate._lib(AVX2)
    torch = optional_torch()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "int.sqlite")
        for n in args.sizes:
            for tgt in targets:
                timers, searches = {}, {}
                for dts in KINDS:
                    t0 = time.perf_counter()
                    spec = morello.matmul(n, n, n, dtypes=dts.split()[0],
                                          saturate="sat" in dts, target=tgt)
                    prog = morello.synthesize(spec, target=tgt, db=db)
                    searches[dts] = time.perf_counter() - t0
                    fn = prog.compile()
                    ok, err = prog.verify(fn)
                    assert ok, f"{dts} {n}^3 on {tgt} does not match numpy ({err})"
                    ins = prog.random_inputs()
                    out = np.empty((1, n, n), prog.spec.output.dtype.np)
                    timers[dts] = c_timer(fn, ins, out)
                if torch is not None and tgt == targets[0]:
                    timers.update(_torch_timers(torch, n))
                rows.append((n, tgt, timers, searches))
        times = [{k: [] for k in r[2]} for r in rows]
        peaks = []
        for _ in range(args.rounds):
            peaks.append(16 / (min(lib.cal_fma(20_000_000) for _ in range(3)) * 1e9))
            for i, r in enumerate(rows):
                for k, timer in r[2].items():
                    times[i][k].append(timer())
    peak = statistics.median(peaks)
    print(f"this run: AVX2 FMA peak {peak:.1f} GFLOP/s, {args.rounds} rounds"
          + ("" if torch else "; torch not importable") + "\n")
    print("| n³ | target | u8×s8→s32 exact GOPS | saturating GOPS | f32 GFLOP/s (% of AVX2 "
          "peak) | exact/f32 | saturating/f32 | torch _int_mm GOPS | torch fbgemm GOPS | "
          "exact/torch _int_mm | search s (exact, sat, f32) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    torch_cols: dict = {}
    torch_times: dict = {}
    for i, (n, tgt, _, searches) in enumerate(rows):
        med = {key: statistics.median(v) for key, v in times[i].items()}
        ratio = {key: statistics.median(f / q for q, f in zip(times[i][key],
                                                              times[i]["f32,f32,f32"]))
                 for key in KINDS[:2]}
        gops = {key: 2 * n ** 3 / t / 1e9 for key, t in med.items()}
        if "torch _int_mm" in gops:
            torch_cols[n], torch_times[n] = gops, times[i]["torch _int_mm"]
        tc = torch_cols.get(n, {})
        cols = [f"{tc[k]:.1f}" if k in tc else "–" for k in ("torch _int_mm", "torch fbgemm")]
        if n in torch_times:
            pairs = zip(times[i][KINDS[0]], torch_times[n])
            cols.append(f"{statistics.median(t / q for q, t in pairs):.2f}")
        else:
            cols.append("–")
        print(f"| {n}³ | {tgt} | {gops[KINDS[0]]:.1f} | {gops[KINDS[1]]:.1f} | "
              f"{gops[KINDS[2]]:.1f} ({100 * gops[KINDS[2]] / peak:.0f} %) | "
              f"{ratio[KINDS[0]]:.2f} | {ratio[KINDS[1]]:.2f} | {' | '.join(cols)} | "
              + ", ".join(f"{searches[key]:.1f}" for key in KINDS) + " |")


if __name__ == "__main__":
    main()
