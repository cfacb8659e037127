"""x·W bf16 from main memory: weight rows per sweep, 4 against 8, on both targets at once.

    python benchmarks/xw_sweeps.py [--rounds 41] [KxN ...]      (default 2048x16384 ...)

For each shape, four programs of ``x[1×K] · W[K×N]`` (bf16 W, f32 x and out), the same
schedule but for the rows of W each sweep over the columns reads side by side
(``Split(4)`` or ``Split(8)`` above ``TileOut(2, 64)``; everything below is searched), for
the AVX2 and the AVX-512 target (where the host runs it). Each is verified against numpy,
then all are timed inside C in alternating rounds, and the report gives the median of the
per-round ratios: the host's memory speed drifts from minute to minute, so only ratios
within a round compare. This is the measurement behind ``cost.sweep_saving`` and
``Target.sweep_dtypes``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from timers import c_timer  # noqa: E402

import morello  # noqa: E402
from morello import Move, Split, TileOut, ToAccum, schedule  # noqa: E402
from morello.memory import AVX2, AVX512, Level, host_lacks  # noqa: E402

ROWS = (4, 8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("shapes", nargs="*", default=["2048x16384", "2048x12288", "2048x7168",
                                                  "4096x8192"])
    args = ap.parse_args()
    targets = [t for t in (AVX2, AVX512) if host_lacks(t) is None]
    rng = np.random.default_rng(0)
    print(f"| K×N | {' | '.join(f'{t.name} {r} rows ms' for t in targets for r in ROWS)} | "
          + " | ".join(f"{t.name}: 4 rows' speed / 8 rows'" for t in targets) + " |")
    print("|---|" + "---|" * (len(targets) * (len(ROWS) + 1)))
    with tempfile.TemporaryDirectory() as d:
        for text in args.shapes:
            k, n = map(int, text.split("x"))
            x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
            w = rng.uniform(-1, 1, (k, n)).astype(ml_dtypes.bfloat16)
            out = np.empty((1, n), np.float32)
            timers = {}
            for t in targets:
                spec = morello.matmul(1, k, n, dtypes=("f32", "bf16", "f32"), target=t.name)
                for rows in ROWS:
                    prog = schedule(spec, [Move(2, Level.L2), ToAccum(), None, Split(16),
                                           Move(0, Level.L1), Split(rows), TileOut(2, 64)],
                                    target=t.name, db=str(Path(d) / f"{t.name}.sqlite"))
                    fn = prog.compile()
                    ok, err = prog.verify(fn)
                    assert ok, f"{t.name} {rows} rows 1x{k}x{n}: max error {err}"
                    timers[t.name, rows] = c_timer(fn, [x, w], out)
            times: dict = {key: [] for key in timers}
            for _ in range(args.rounds):
                for key, timer in timers.items():
                    times[key].append(timer())
            cells = [f"{statistics.median(times[t.name, r]) * 1e3:.3f}"
                     for t in targets for r in ROWS]
            gains = [statistics.median(b / a for a, b in zip(times[t.name, 4],
                                                             times[t.name, 8]))
                     for t in targets]
            print(f"| {text} | {' | '.join(cells)} | {' | '.join(f'{g:.3f}' for g in gains)} |",
                  flush=True)


if __name__ == "__main__":
    main()
