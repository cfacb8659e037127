"""The random-Spec sweep as a script: N random Specs of every kind synthesized into one
database, built, run and compared with numpy; a table per kind (Specs, wrong, seconds).

    python benchmarks/sweep.py --specs 500 [--seed 0] [--db PATH]

Exit status 1 if any Spec's output did not match numpy. The same draw as
``tests/test_sweep.py`` (``probes.random_user_spec``)."""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from probes import random_user_spec, sweep_one  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--db", default=None, help="database (default: a fresh temporary one)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows: dict[str, list] = collections.defaultdict(lambda: [0, 0, 0.0])
    wrong = []
    with tempfile.TemporaryDirectory() as d:
        db = args.db or str(Path(d) / "sweep.sqlite")
        t00 = time.perf_counter()
        for i in range(args.specs):
            spec, threads = random_user_spec(rng)
            t0 = time.perf_counter()
            ok, err = sweep_one(spec, threads, db, seed=i)
            row = rows[spec.kind.title + (" (2 threads)" if threads > 1 else "")]
            row[0] += 1
            row[1] += not ok
            row[2] += time.perf_counter() - t0
            if not ok:
                wrong.append(f"{spec.logical_str()} threads={threads}: max abs error {err:.3g}")
                print("WRONG", wrong[-1], file=sys.stderr)
            if (i + 1) % 50 == 0:
                print(f"{i + 1}/{args.specs} Specs, {time.perf_counter() - t00:.0f} s",
                      file=sys.stderr)
    print("| kind | Specs | wrong | seconds |\n|---|---|---|---|")
    for name, (n, bad, secs) in sorted(rows.items()):
        print(f"| {name} | {n} | {bad} | {secs:.1f} |")
    total = sum(r[0] for r in rows.values())
    print(f"| all | {total} | {len(wrong)} | {sum(r[2] for r in rows.values()):.1f} |")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
