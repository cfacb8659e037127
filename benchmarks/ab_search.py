"""Before/after of the search itself: two morellos' cold searches of the same matmul, and
the database write after each, alternated in fresh processes.

    python benchmarks/ab_search.py --baseline DIR [--target avx512] [--rounds 3]
        [--write] [MxKxN ...]

``DIR`` holds another morello (``pip install --target DIR .`` of an older commit, or a
source tree of it with its extensions built in place: ``python setup.py build_ext
--inplace``). Each round runs both, one after the other, each in a fresh process with an
empty cache directory and the builtin cost constants, and checks that both find the same
cost. Without ``--write`` the search is in memory (``db=False``); with it, into an empty
database, timed in two parts: the search, then ``Store.save`` (the write). The report
gives the times and the median of the per-round ratios (before/after: above 1 is faster);
on a shared machine only that ratio means much.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import morello
from morello import api
from pathlib import Path
shape, target, db = json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
spec = morello.matmul(*shape)
if db == "-":
    t0 = time.perf_counter()
    prog = morello.synthesize(spec, target, db=False, calibration="builtin")
    print(json.dumps({"search": time.perf_counter() - t0, "cost": prog.cost}))
else:
    sess = api._session(morello.memory.parse_target(target, 1, "builtin"), Path(db))
    eng = sess.engine(None)
    t0 = time.perf_counter()
    sol, _ = eng.solve(spec.canonical())
    t1 = time.perf_counter()
    sess.store.save(eng.pages, eng.table_keys, {}, None, eng.store_ids, eng.persist)
    t2 = time.perf_counter()
    print(json.dumps({"search": t1 - t0, "write": t2 - t1, "cost": sol.cost.main}))
"""


def run(tree: str, shape, target: str, write: bool) -> dict:
    work = tempfile.mkdtemp(prefix="morello-ab-search-")
    try:
        env = dict(os.environ, XDG_CACHE_HOME=work, MORELLO_CALIBRATION="builtin")
        db = os.path.join(work, "r.sqlite") if write else "-"
        p = subprocess.run([sys.executable, "-c", _CHILD, tree, json.dumps(shape), target, db],
                           capture_output=True, text=True, env=env, cwd=work)
        if p.returncode != 0:
            tail = p.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise SystemExit(f"{tree}: {shape} failed: {tail[0]}")
        return json.loads(p.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shapes", nargs="*", default=["64x64x64"], metavar="MxKxN")
    ap.add_argument("--baseline", required=True, metavar="DIR",
                    help="the other morello (see above)")
    ap.add_argument("--target", default="avx2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true",
                    help="search into an empty database and time the write after it")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.baseline, "morello")):
        raise SystemExit(f"{args.baseline} holds no morello/ package")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = ["search", "write"] if args.write else ["search"]
    heads = " | ".join(f"{p} before s | {p} after s | {p} before/after" for p in parts)
    print(f"| shape | {heads} |")
    print("|---|" + "---|" * (3 * len(parts)))
    for text in args.shapes:
        try:
            shape = [int(x) for x in text.split("x")]
        except ValueError:
            raise SystemExit(f"shapes are MxKxN, e.g. 64x64x64, not {text!r}") from None
        if len(shape) != 3 or min(shape) < 1:
            raise SystemExit(f"shapes are MxKxN, e.g. 64x64x64, not {text!r}")
        before, after = [], []
        for _ in range(args.rounds):
            before.append(run(args.baseline, shape, args.target, args.write))
            after.append(run(here, shape, args.target, args.write))
        costs = {r["cost"] for r in before + after}
        if len(costs) != 1:
            raise SystemExit(f"{text}: the two morellos find different costs {sorted(costs)}")
        cells = []
        for p in parts:
            b, a = [r[p] for r in before], [r[p] for r in after]
            ratio = statistics.median(x / y for x, y in zip(b, a))
            cells.append(f"{min(b):.2f}-{max(b):.2f} | {min(a):.2f}-{max(a):.2f} | {ratio:.2f}x")
        print(f"| {text} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
