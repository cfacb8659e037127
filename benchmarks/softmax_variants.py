"""The softmax decompositions side by side: the search's program and each hand-chosen
decomposition of one Spec, with their model costs and times, in interleaved rounds.

    python benchmarks/softmax_variants.py [ROWS COLS] [--rounds 9]

Shows whether the model ranks the decompositions the way this machine does (the
question that moved 1×16384 from the online variant to the L2-resident one). Every
program is verified against numpy first and timed inside C; the table gives median
ns per element over rounds.
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np

import morello
from morello import Level, schedule
from morello.rewrites import Decompose

# name -> steps: the first Decompose implements Softmax, the second SoftmaxGivenMax (or
# SoftmaxOnline), as the hole after the max (``None``: searched).
VARIANTS = {
    "two exps (denom, complete)": [Decompose(Level.RF, 0), None, Decompose(Level.RF, 0)],
    "exps, sum, divide": [Decompose(Level.RF, 0), None, Decompose(Level.RF, 1)],
    "exps stored and summed, divide": [Decompose(Level.RF, 0), None, Decompose(Level.RF, 2)],
    "the same over row tiles": [Decompose(Level.RF, 0), None, Decompose(Level.RF, 3)],
    "online (max and denom in one pass)": [Decompose(Level.RF, 1), Decompose(Level.RF, 0)],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", nargs="*", type=int, default=[1, 16384])
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    spec = morello.softmax(*args.shape)
    progs = {"search": morello.synthesize(spec, db=False)}
    for name, steps in VARIANTS.items():
        try:
            # Single rows need no row loop; otherwise tile to one row first.
            pre = [] if spec.shape[0] == 1 else [morello.TileOut(0, 1)]
            progs[name] = schedule(spec, pre + steps)
        except morello.MorelloError as e:
            print(f"{name}: not applicable ({str(e)[:80]})")
    x = np.random.default_rng(0).standard_normal(spec.shape).astype(np.float32)
    out = np.empty_like(x)
    fns = {}
    for name, prog in progs.items():
        fn = prog.compile()
        ok, err = prog.verify(fn)
        assert ok, f"{name}: does not match numpy ({err})"
        iters = max(1, int(0.02 / max(fn.time(x, iters=1, out=out), 1e-9)))
        fns[name] = (fn, iters)
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(args.rounds):
        for k, (fn, iters) in fns.items():
            times[k].append(min(fn.time(x, iters=iters, out=out) for _ in range(3)))
    print(f"softmax {'×'.join(map(str, spec.shape))}, {args.rounds} interleaved rounds\n")
    print("| program | model cost | ns/elem (median) |")
    print("|---|---|---|")
    for k in fns:
        print(f"| {k} | {progs[k].cost:,} | {statistics.median(times[k]) / x.size * 1e9:.3f} |")


if __name__ == "__main__":
    main()
