"""Which cost constants a new user's programs get, and what they cost in speed: the built-in
constants, the new default (a first use on a fresh config dir: ``morello.hostfit``), the
same first use without a shipped set for this CPU model (what a host of an unknown model
gets: the measurement snapped to the grid), and a full ``morello calibrate`` (3 runs),
side by side in one run on one thread.

    python benchmarks/host_fit.py [--rounds 7] [--target avx2] [--only NAME ...]

Each set's program is synthesized (no database), compiled, verified against numpy, then
all are timed inside C in alternating rounds; the table gives each program's median
time and the median of its per-round ratio to the full calibration's (above 1: faster
than it). Programs the same as the full calibration's (the same decisions) are marked "=".
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import morello  # noqa: E402
from morello import calibrate, costs, hostfit  # noqa: E402
from morello.memory import host_lacks, target_named  # noqa: E402

CASES = {
    "bf16 matvec W[NxK] 1x2048x16384": lambda t: morello.matmul(
        1, 2048, 16384, dtypes=("f32", "bf16", "f32"), rhs_layout="cm", target=t),
    "bf16 x.W 1x2048x16384": lambda t: morello.matmul(
        1, 2048, 16384, dtypes=("f32", "bf16", "f32"), target=t),
    "bf16 x.W 1x512x1024 (in cache)": lambda t: morello.matmul(
        1, 512, 1024, dtypes=("f32", "bf16", "f32"), target=t),
    "f32 matmul 256^3": lambda t: morello.matmul(256, 256, 256, target=t),
    "f32 matmul 1024^3": lambda t: morello.matmul(1024, 1024, 1024, target=t),
    "softmax 4096x4096": lambda t: morello.softmax(4096, 4096, target=t),
    "attention 128x64": lambda t: morello.attention(128, 64, target=t),
}


def constant_sets(target: str, work: Path) -> dict[str, tuple[str, float]]:
    """``name -> (calibration argument, seconds it took to make)``."""
    base = target_named(target)
    sets: dict[str, tuple[str, float]] = {"built-in": ("builtin", 0.0)}
    os.environ["XDG_CONFIG_HOME"] = str(work / "fresh-config")
    t0 = time.perf_counter()
    path = hostfit.ensure(base, lambda m: print(m, file=sys.stderr))
    if path is None:
        raise SystemExit(f"this host cannot calibrate {target}")
    sets["default (first use)"] = (str(path), time.perf_counter() - t0)
    t0 = time.perf_counter()
    r = calibrate.run_first_use(base)
    grid = work / "grid.json"
    costs.save(grid, target, hostfit.snap(r.constants, base.costs), r.measured_ns, r.host)
    sets["first use, no shipped set"] = (str(grid), time.perf_counter() - t0)
    t0 = time.perf_counter()
    r = calibrate.run(base, runs=3)
    full = work / "full.json"
    costs.save(full, target, r.constants, r.measured_ns, r.host)
    sets["full calibrate"] = (str(full), time.perf_counter() - t0)
    return sets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--target", default="avx2")
    ap.add_argument("--only", nargs="*", default=None, help="case names (substrings)")
    args = ap.parse_args()
    if (why := host_lacks(target_named(args.target))) is not None:
        raise SystemExit(why)
    work = Path(tempfile.mkdtemp(prefix="morello-hostfit-"))
    sets = constant_sets(args.target, work)
    names = list(sets)
    ref = "full calibrate"
    print(f"target {args.target}, one thread, {args.rounds} rounds; host "
          f"{hostfit.host_key()}; seconds to make each set: "
          + ", ".join(f"{n} {s:.1f}" for n, (_, s) in sets.items()))
    print("| program | " + " | ".join(f"{n} ms" for n in names)
          + " | " + " | ".join(f"{n} / full" for n in names if n != ref) + " |")
    print("|---" * (2 * len(names)) + "|")
    for case, make in CASES.items():
        if args.only and not any(o in case for o in args.only):
            continue
        progs, fns = {}, {}
        for n, (cal, _) in sets.items():
            prog = morello.synthesize(make(args.target), args.target, db=False,
                                      calibration=cal)
            fn = prog.compile()
            ok, err = prog.verify(fn)
            if not ok:
                raise SystemExit(f"{case} under {n}: does not match numpy ({err:.3g})")
            progs[n], fns[n] = prog, fn
        ins = progs[ref].random_inputs()
        outs = {n: fns[n](*ins) for n in names}
        iters = {n: max(1, int(0.05 / fns[n].time(*ins, iters=1, out=outs[n])))
                 for n in names}
        times: dict[str, list[float]] = {n: [] for n in names}
        for _ in range(args.rounds):
            for n in names:
                times[n].append(min(fns[n].time(*ins, iters=iters[n], out=outs[n])
                                    for _ in range(3)))
        same = {n: progs[n].impl.trace() == progs[ref].impl.trace() for n in names}
        ratio = {n: statistics.median(f / s for s, f in zip(times[n], times[ref]))
                 for n in names}
        print(f"| {case} | "
              + " | ".join(f"{statistics.median(times[n]) * 1e3:.3f}" for n in names)
              + " | " + " | ".join(f"{'=' if same[n] else f'{ratio[n]:.2f}'}"
                                   for n in names if n != ref) + " |", flush=True)


if __name__ == "__main__":
    main()
