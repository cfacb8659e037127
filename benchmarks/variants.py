"""The model's price and the measured speed of schedules next to the one it chose.

    OPENBLAS_NUM_THREADS=1 python benchmarks/variants.py [N]      (default N = 1024)

For an N³ f32 matmul: the searched optimum, and variants that fix the outer blocking by
hand (``morello.schedule``: the chosen first move if any, then a column block of B and a k-chunk;
everything below is searched), plus, for the matvec 1×2048×16384, the search's schedule
against streaming B eight rows at a time. Each program is verified against numpy, then all
are timed inside C in alternating rounds (the machine is shared: compare within a round).
Under the model no variant can be cheaper than the optimum; where one is measured faster,
the model's ranking is what limits the search.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

import morello
from morello import Split, TileOut, ToAccum, schedule


def _compare(spec, programs: dict, flops: int, rounds: int = 5) -> None:
    b, m, k, n = spec.shape
    rng = np.random.default_rng(0)
    lhs = rng.uniform(-1, 1, (b, m, k)).astype(np.float32)
    rhs = rng.uniform(-1, 1, (b, k, n)).astype(np.float32)
    fns = {}
    for name, p in programs.items():
        f = p.compile()
        np.testing.assert_allclose(f(lhs, rhs), lhs @ rhs, rtol=1e-3, atol=1e-2)
        fns[name] = f
    iters = max(1, int(0.05 / max(fns[next(iter(fns))].time(lhs, rhs, iters=1), 1e-9)))
    speed = {name: [] for name in fns}
    for _ in range(rounds):
        for name, f in fns.items():
            speed[name].append(flops / f.time(lhs, rhs, iters=iters) / 1e9)
    print(f"\n{spec}\n| schedule | model cost | GFLOP/s median | best |\n|---|---|---|---|")
    for name, p in programs.items():
        print(f"| {name} | {p.cost:,} | {statistics.median(speed[name]):.1f} | "
              f"{max(speed[name]):.1f} |", flush=True)


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "variants.db")
        spec = morello.matmul(size, size, size).canonical()
        best = morello.synthesize(spec, db=db)
        first = best.impl.action
        # The blocking below the zero fill: after the searched first move, or at once.
        head = [ToAccum(), None] if isinstance(first, ToAccum) else [first, None, ToAccum(), None]
        programs = {"searched": best}
        for nb, kc in ((64, 256), (32, 256), (16, 256), (64, 128)):
            steps = [*head, TileOut(2, nb), Split(kc)]
            try:
                programs[f"{first}; B columns {nb}, k-chunk {kc}"] = schedule(spec, steps, db=db)
            except morello.RewriteError as e:  # the chosen program starts differently
                print(f"variant {nb}/{kc} skipped: {e}")
        _compare(spec, programs, 2 * size ** 3)

        vec = morello.matmul(1, 2048, 16384).canonical()
        programs = {"searched": morello.synthesize(vec, db=db),
                    "stream 8 rows of B (by hand)":
                        schedule(vec, [ToAccum(), None, Split(8), TileOut(2, 32)], db=db)}
        _compare(vec, programs, 2 * 2048 * 16384)


if __name__ == "__main__":
    main()
