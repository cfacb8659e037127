"""Regenerate the database shipped with morello (``morello/data/results.sqlite``).

    python tools/ship_db.py                 # every entry of CORPUS, on a Dask LocalCluster
    python tools/ship_db.py --serial        # in this process
    python tools/ship_db.py --only matmul   # the entries of one family (resumes the rest)

The file is filled by ``morello precompute`` for each entry of ``CORPUS`` on each target,
one thread, under the built-in constants and under each set of ``morello/host_constants.json``
(the constants a first use on such a CPU model fits to: ``morello.hostfit``), so that a
newcomer's default search on such a host is answered too. A run is resumable: it works in
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

from morello import costs, hostfit, targets
from morello import precompute as pc
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


def constant_sets(partial: Path, names: list[str]) -> list[tuple[str, str, str]]:
    """``(target, label, calibration)`` to precompute under: the built-in constants, then
    each shipped host set, written as a calibration file beside ``partial`` (a stable path:
    it is part of a plan's key, so a second run resumes)."""
    out = [(t, "builtin", "builtin") for t in names]
    doc = json.loads(hostfit.SETS.read_text())
    for row in doc["sets"]:
        if row["target"] not in names:
            continue
        path = partial.with_name(f"{partial.name}.{row['cpu']}-{row['target']}.json")
        consts = costs.CostConstants.from_json(dict(row["constants"]))
        if not path.exists() or costs.load(path, row["target"]) != consts:
            costs.save(path, row["target"], consts, {}, row["cpu"], source="host set")
        out.append((row["target"], row["cpu"], str(path)))
    return out


def _compact(path: Path) -> int:
    c = sqlite3.connect(path, isolation_level=None)
    try:
        c.execute("PRAGMA journal_mode=DELETE")
        c.execute("PRAGMA page_size=65536")  # large pages: less slack around the blobs
        c.execute("VACUUM")
    finally:
        c.close()
    return path.stat().st_size


def trim(path: Path, budget: int) -> float:
    """Keep every root and the pages of the smallest Specs (lowest page coordinates: the
    ones most goals share) that fit ``budget`` bytes; the fraction of pages kept. Any
    subset of pages is valid: each stored value is optimal, a missing page is solved."""
    c = sqlite3.connect(path, isolation_level=None)
    rows = c.execute("SELECT tbl, page, version, length(data) + 2 * length(page) "
                     "FROM pages").fetchall()
    c.close()
    rows.sort(key=lambda r: (sum(int.from_bytes(r[1][i:i + 8], "little")
                                 for i in range(0, len(r[1]), 8)), r[0], r[1]))
    total = _compact(path)
    keep = n0 = len(rows)
    while total > budget:
        per_row = total / max(1, keep)
        keep = max(0, min(keep - 1, int(keep * 0.97 - (total - budget) / per_row)))
        c = sqlite3.connect(path, isolation_level=None)
        c.execute("BEGIN")
        c.executemany("DELETE FROM pages WHERE tbl = ? AND page = ? AND version = ?",
                      [r[:3] for r in rows[keep:]])
        c.execute("COMMIT")
        c.close()
        rows = rows[:keep]
        total = _compact(path)
    return keep / max(1, n0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--serial", action="store_true", help="no Dask")
    ap.add_argument("--workers", type=int, default=None, help="LocalCluster workers")
    ap.add_argument("--only", default=None, help="run the entries of this family only")
    ap.add_argument("--targets", nargs="+", default=sorted(targets.all()))
    ap.add_argument("--budget", type=float, default=18.0,
                    help="megabytes of the shipped file (pages of larger Specs are left out)")
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
    sets = constant_sets(partial, args.targets)
    try:
        for target, label, calibration in sets:
            for family, kw in entries:
                kw = dict(kw)
                bounds = kw.pop("bounds", None)
                p = pc.plan(family, bounds, target=target, calibration=calibration,
                            tasks_per_stage=2 * (args.workers or 2), **kw)
                print(f"ship: {target} ({label} constants) {family} {kw or bounds}: "
                      f"{p.goals} Specs, {len(p.stages)} stages", file=sys.stderr)
                prog = pc.Progress(p)
                try:
                    fig = pc.run(p, partial, client=client, progress=prog)
                finally:
                    prog.close()
                log.append({"target": target, "constants": label, "family": family,
                            "plan": p.key,
                            "specs": p.goals, "seconds": round(fig["seconds"], 1)})
    finally:
        if client is not None:
            client.close()
            cluster.close()
    if args.only is None:
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.unlink(missing_ok=True)
        exchange.snapshot(partial, tmp)
        exchange.absorb(tmp, [], {"shipped": json.dumps(
            {"model": MODEL_VERSION, "corpus": [[f, kw] for f, kw in CORPUS],
             "targets": args.targets, "constants": [c[1] for c in sets],
             "budget_mb": args.budget})})
        kept = trim(tmp, int(args.budget * 1e6))
        tmp.replace(args.out)
        print(f"ship: wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, "
              f"{kept:.0%} of the pages) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for row in log:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
