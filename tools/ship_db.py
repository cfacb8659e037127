"""Regenerate the database shipped with morello (``morello/data/results.sqlite``).

    python tools/ship_db.py                 # every entry of CORPUS, on a Dask LocalCluster
    python tools/ship_db.py --serial        # in this process
    python tools/ship_db.py --only matmul   # the entries of one family (resumes the rest)

The file is filled by ``morello precompute`` for each entry of ``CORPUS`` on each target
with the built-in constants, one thread. A run is resumable: it works in
``results.sqlite.partial`` beside the output, whose finished stages a second run skips,
and renames it into place (compacted, no write-ahead log) only when every entry is done.
Its contexts name the model's version (``morello.identity``): after a bump of
``MODEL_VERSION`` the shipped file answers nothing, and ``tests/test_shipped.py`` fails
until it is regenerated.
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

from morello import precompute as pc
from morello import targets
from morello.identity import MODEL_VERSION
from morello.store import exchange

OUT = Path(__file__).resolve().parent.parent / "morello" / "data" / "results.sqlite"
LLM = [2048, 3072, 4096, 8192, 14336, 16384, 24576]

# (family, arguments of precompute.plan); each runs on every target.
CORPUS: list[tuple[str, dict]] = [
    ("softmax", {"bounds": [4096, 4096], "grid": "pow2"}),
    ("attention", {"values": [[64, 128, 256, 512], [64, 128]]}),
    ("matmul", {"values": [[1], LLM, LLM], "dtypes": "f32,bf16,f32", "rhs_layout": "cm"}),
    ("matmul", {"values": [[1], LLM, LLM], "dtypes": "f32,bf16,f32"}),
    ("matmul", {"bounds": [1024, 1024, 1024], "grid": "pow2"}),
    ("matmul", {"bounds": [128, 128, 128], "grid": "pow2x3"}),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--serial", action="store_true", help="no Dask")
    ap.add_argument("--workers", type=int, default=None, help="LocalCluster workers")
    ap.add_argument("--only", default=None, help="run the entries of this family only")
    ap.add_argument("--targets", nargs="+", default=sorted(targets.all()))
    args = ap.parse_args()
    partial = args.out.with_name(args.out.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    entries = [(f, kw) for f, kw in CORPUS if args.only in (None, f)]
    client = cluster = None
    if not args.serial:
        import os

        import distributed

        n = args.workers or os.cpu_count() or 1
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1,
                                           processes=True, dashboard_address=None)
        client = distributed.Client(cluster)
    t0 = time.perf_counter()
    log = []
    try:
        for target in args.targets:
            for family, kw in entries:
                kw = dict(kw)
                bounds = kw.pop("bounds", None)
                p = pc.plan(family, bounds, target=target, calibration="builtin",
                            tasks_per_stage=2 * (args.workers or 2), **kw)
                print(f"ship: {target} {family} {kw or bounds}: {p.goals} Specs, "
                      f"{len(p.stages)} stages", file=sys.stderr)
                prog = pc.Progress(p)
                try:
                    fig = pc.run(p, partial, client=client, progress=prog)
                finally:
                    prog.close()
                log.append({"target": target, "family": family, "plan": p.key,
                            "specs": p.goals, "seconds": round(fig["seconds"], 1)})
    finally:
        if client is not None:
            client.close()
            cluster.close()
    if args.only is None:
        exchange.absorb(partial, [], {"shipped": json.dumps(
            {"model": MODEL_VERSION, "corpus": [[f, kw] for f, kw in CORPUS],
             "targets": args.targets})})
        with sqlite3.connect(partial) as c:
            c.execute("PRAGMA journal_mode=DELETE")
        c = sqlite3.connect(partial, isolation_level=None)
        c.execute("VACUUM")
        c.close()
        partial.replace(args.out)
        print(f"ship: wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB) in "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for row in log:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
