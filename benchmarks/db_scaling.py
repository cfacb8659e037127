"""Does the results database scale with use? Times and peak memory of new queries on a
full database against the same queries on an empty one, in one run.

1. Fill a database with ``--shapes`` random matmul shapes (1 to 200 per dim, fixed seed)
   and 1024^3 (``--no-big`` skips it), reporting pages, boxes and bytes. The 1024^3 search
   is timed in parts: the search, and the write (``Store.save``: the merge of its
   results into pages, ``Engine.persist``, and their encoding and writing, interleaved
   page by page in one transaction).
2. For each probe query (a small 3x7x9 and a medium 96x80x112), in fresh processes,
   alternating ``--rounds`` times: synthesize it into a copy of the full database, and
   into an empty one. Reports the median wall time of ``synthesize`` (search and save)
   and the peak RSS of the process, and their ratios.
3. A warm root: a query the database already answered, in a fresh process (the call,
   after import); again after compiling the package's bytecode (as pip does on install).
4. Cold searches of 8^3, 64^3 and 1024^3 into empty databases; with ``--baseline DIR``
   (another morello installed with ``pip install --target DIR``) the same, alternated,
   with that morello, for a paired before/after.

    python benchmarks/db_scaling.py                   # the full run (~10 min)
    python benchmarks/db_scaling.py --shapes 10 --no-big --rounds 1   # a quick look
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

PROBES = {"small 3x7x9": (3, 7, 9), "medium 96x80x112": (96, 80, 112)}

_CHILD = textwrap.dedent("""
    import json, os, resource, sys, time
    {path_setup}
    import morello
    from morello import api
    shape, db = json.loads(sys.argv[1]), sys.argv[2]
    t0 = time.perf_counter()
    prog = morello.synthesize(morello.matmul(*shape), db=db if db != "-" else False)
    t1 = time.perf_counter()
    print(json.dumps({{"seconds": t1 - t0, "cost": prog.cost,
                      "solved": prog.stats.specs_solved,
                      "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
""")

_WRITE = textwrap.dedent("""
    import json, resource, sys, time
    import morello
    from morello import api
    from pathlib import Path
    shape, db = json.loads(sys.argv[1]), sys.argv[2]
    sess = api._session(morello.memory.parse_target("avx2"), Path(db))
    eng = sess.engine(None)
    t0 = time.perf_counter()
    eng.solve(morello.matmul(*shape))
    t1 = time.perf_counter()
    pages = sess.store.save(eng.pages, eng.table_keys, {}, None, eng.store_ids,
                            eng.persist)
    t2 = time.perf_counter()
    print(json.dumps({"search": t1 - t0, "write": t2 - t1, "pages": pages,
                      "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""")


def child(shape, db, baseline: str | None = None) -> dict:
    setup = f"sys.path.insert(0, {baseline!r})" if baseline else ""
    code = _CHILD.format(path_setup=setup)
    env = dict(os.environ, MORELLO_CALIBRATION="builtin", OPENBLAS_NUM_THREADS="1")
    if baseline:
        # The baseline's own default database must not be touched: give it a cache dir.
        env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="morello-base-cache-")
    p = subprocess.run([sys.executable, "-c", code, json.dumps(list(shape)), str(db)],
                       capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise SystemExit(f"child failed for {shape}: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def db_figures(db: Path) -> dict:
    from morello import db as dbmod

    s = dbmod.stats(db)
    return {"pages": s["pages"], "boxes": s["boxes"], "bytes": s["bytes"],
            "roots": sum(c["roots"] for c in s["contexts"])}


def remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", type=int, default=60, help="random shapes to fill (60)")
    ap.add_argument("--no-big", action="store_true", help="do not add 1024^3 to the fill")
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds per probe (3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baseline", metavar="DIR", default=None,
                    help="another morello (pip install --target DIR) for paired cold times")
    ap.add_argument("--dir", default=None, help="working directory (default: a temp dir)")
    ap.add_argument("--full", metavar="DB", default=None,
                    help="skip the fill: use (a copy of) this filled database instead")
    ap.add_argument("--json", action="store_true", help="also print one JSON object")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="morello-db-scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    full = work / "full.sqlite"
    remove_db(full)
    out: dict = {"work": str(work)}

    rng = random.Random(args.seed)
    shapes = [tuple(rng.randint(1, 200) for _ in range(3)) for _ in range(args.shapes)]
    if args.full:
        import sqlite3

        import morello

        shutil.copyfile(args.full, full)
        conn = sqlite3.connect(full)
        held = {row[0] for row in conn.execute("SELECT spec FROM roots")}
        conn.close()
        shapes = [s for s in shapes if str(morello.matmul(*s)) in held]
    print(f"filling {full} with {len(shapes)} random shapes ...", file=sys.stderr)
    fill_seconds = 0.0
    for i, s in enumerate(shapes if not args.full else []):
        r = child(s, full)
        fill_seconds += r["seconds"]
        print(f"\r  {i + 1}/{len(shapes)} {s} {r['seconds']:.2f} s", end="", file=sys.stderr)
    print(file=sys.stderr)
    if not args.no_big:
        print("adding 1024^3 (timed in parts) ...", file=sys.stderr)
        p = subprocess.run([sys.executable, "-c", _WRITE, json.dumps([1024] * 3), str(full)],
                           capture_output=True, text=True, cwd=tempfile.gettempdir(),
                           env=dict(os.environ, MORELLO_CALIBRATION="builtin"))
        if p.returncode != 0:
            raise SystemExit(p.stderr)
        out["cold_1024_into_full"] = json.loads(p.stdout.strip().splitlines()[-1])
        parts = out["cold_1024_into_full"]
        print(f"  1024^3 into the filling database: search {parts['search']:.2f} s, "
              f"write {parts['write']:.2f} s ({parts['pages']} pages), "
              f"peak RSS {parts['rss_mib']:.0f} MiB", file=sys.stderr)
    out["fill"] = {"shapes": len(shapes), "seconds": round(fill_seconds, 1),
                   **db_figures(full)}
    print(f"full database: {out['fill']}", file=sys.stderr)

    probes = {}
    for name, shape in PROBES.items():
        runs: dict[str, list[dict]] = {"full": [], "empty": []}
        for _ in range(args.rounds):
            for which in ("full", "empty"):
                db = work / f"probe-{which}.sqlite"
                remove_db(db)
                if which == "full":
                    shutil.copyfile(full, db)
                runs[which].append(child(shape, db))
        costs = {r["cost"] for rs in runs.values() for r in rs}
        assert len(costs) == 1, f"{name}: costs differ between full and empty: {costs}"
        med = {w: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "rss_mib")}
               for w, rs in runs.items()}
        probes[name] = {**{f"{w}_{k}": round(v, 3) for w, m in med.items()
                           for k, v in m.items()},
                        "time_ratio": round(med["full"]["seconds"] / med["empty"]["seconds"], 2),
                        "solved_full": runs["full"][0]["solved"],
                        "solved_empty": runs["empty"][0]["solved"]}
        print(f"{name}: {probes[name]}", file=sys.stderr)
    out["probes"] = probes

    warm_db = work / "probe-full.sqlite"
    remove_db(warm_db)
    shutil.copyfile(full, warm_db)
    warm = [child(shapes[0], warm_db) for _ in range(3)]
    assert all(w["solved"] == 0 for w in warm)
    out["warm_root_seconds"] = round(statistics.median(w["seconds"] for w in warm), 4)
    # As installed (pip compiles bytecode): a host with PYTHONDONTWRITEBYTECODE=1 compiles
    # the modules a fresh process imports lazily, every time.
    pkg = subprocess.run([sys.executable, "-c", "import morello, os; "
                          "print(os.path.dirname(morello.__file__))"], capture_output=True,
                         text=True, cwd=tempfile.gettempdir()).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", pkg], check=False,
                   env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))
    warm = [child(shapes[0], warm_db) for _ in range(3)]
    out["warm_root_seconds_bytecode"] = round(statistics.median(w["seconds"] for w in warm), 4)
    print(f"warm root: {out['warm_root_seconds']} s ({out['warm_root_seconds_bytecode']} s "
          f"with the package's bytecode compiled)", file=sys.stderr)

    cold: dict[str, dict] = {}
    for n in (8, 64, 1024):
        rounds = args.rounds if n < 1024 else 1
        for _ in range(rounds):
            for who, base in (("now", None), ("baseline", args.baseline)):
                if who == "baseline" and base is None:
                    continue
                db = work / f"cold-{who}.db"
                remove_db(db)
                if base is None:
                    r = child((n, n, n), db)
                else:
                    r = child((n, n, n), db, base)
                cold.setdefault(f"{n}^3", {}).setdefault(who, []).append(r["seconds"])
        row = {who: round(statistics.median(v), 3) for who, v in cold[f"{n}^3"].items()}
        cold[f"{n}^3"] = row
        print(f"cold {n}^3: {row}", file=sys.stderr)
    out["cold_seconds"] = cold

    print("\n| probe | empty db s | full db s | ratio | empty RSS MiB | full RSS MiB |")
    print("|---|---|---|---|---|---|")
    for name, r in probes.items():
        print(f"| {name} | {r['empty_seconds']} | {r['full_seconds']} | {r['time_ratio']} | "
              f"{r['empty_rss_mib']:.0f} | {r['full_rss_mib']:.0f} |")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
