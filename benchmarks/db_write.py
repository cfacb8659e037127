"""The write after a search, paired: one cold search (1024^3 by default), then its write
(``Store.save`` with ``Solver.persist``) timed in forked children, each holding the same
search state, into fresh files, alternating the configurations ``--rounds`` times. The
configurations are how ``persist`` builds page rows: ``thread`` (a second thread, the
default where there are two cores) and ``inline`` (one thread).

    python benchmarks/db_write.py                   # 1024^3, 7 rounds (~1 min)
    python benchmarks/db_write.py --shape 256 256 256 --rounds 11

A fork copies the search's memory on write, so the children's times run a little above a
plain write's; both configurations pay it alike, and the ratios are paired per round.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = {"inline": False, "thread": True}


def timed_write(eng, target, path: Path, threaded: bool) -> float:
    """The write's seconds, measured in a forked child (the parent's state stays as is)."""
    from morello import db as dbmod

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write, report, leave without cleanup
        code = 1
        try:
            os.close(rfd)
            store = dbmod.Store(path, target)
            t0 = time.perf_counter()
            store.save(eng.pages, eng.table_keys, {}, None, {},
                       lambda flush: eng.solver.persist(flush, threaded))
            os.write(wfd, repr(time.perf_counter() - t0).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    out = os.read(rfd, 64)
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    if status != 0 or not out:
        raise SystemExit(f"the write failed in the child (status {status})")
    return float(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", type=int, nargs=3, default=[1024, 1024, 1024],
                    metavar=("M", "K", "N"))
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    os.environ.setdefault("MORELLO_CALIBRATION", "builtin")
    import morello
    from morello.memory import parse_target
    from morello.search import Engine

    target = parse_target("avx2")
    eng = Engine(target)
    t0 = time.perf_counter()
    eng.solve(morello.matmul(*args.shape))
    print(f"search {'x'.join(map(str, args.shape))}: {time.perf_counter() - t0:.2f} s",
          file=sys.stderr)
    times: dict[str, list[float]] = {c: [] for c in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="morello-write-") as work:
        for r in range(args.rounds):
            for name, threaded in CONFIGS.items():
                path = Path(work) / f"{name}-{r}.sqlite"
                times[name].append(timed_write(eng, target, path, threaded))
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
    ratios = sorted(t / i for i, t in zip(times["inline"], times["thread"]))
    out = {"shape": args.shape, "rounds": args.rounds,
           "median_s": {c: round(statistics.median(v), 3) for c, v in times.items()},
           "thread_over_inline": [round(x, 2) for x in ratios],
           "median_ratio": round(statistics.median(ratios), 2)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
