"""The write after a search, paired: one cold search (1024^3 by default), then its write
(``Store.save`` with ``morello._persist.persist``) timed in forked children, each holding the same
search state, into fresh files, alternating the configurations ``--rounds`` times. The
configurations are how ``persist`` builds page rows: ``inline`` (one thread) and
``thread-N`` (a second thread, the default where there are two cores, up to N pages
ahead of the one putting them: ``--ahead``, default ``PERSIST_AHEAD``).

    python benchmarks/db_write.py                   # 1024^3, 7 rounds (~1 min)
    python benchmarks/db_write.py --shape 256 256 256 --rounds 11 --ahead 8 64

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


def timed_write(eng, target, path: Path, threaded: bool, ahead: int) -> float:
    """The write's seconds, measured in a forked child (the parent's state stays as is)."""
    from morello import db as dbmod
    from morello._persist import persist

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write, report, leave without cleanup
        code = 1
        try:
            os.close(rfd)
            store = dbmod.Store(path, target)
            t0 = time.perf_counter()
            store.save(eng.pages, eng.table_keys, {}, None, {},
                       lambda flush: persist(eng.solver, flush, threaded, ahead))
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
    ap.add_argument("--ahead", type=int, nargs="+", default=None, metavar="N",
                    help="leads of the row thread to time (default: PERSIST_AHEAD)")
    args = ap.parse_args()
    os.environ.setdefault("MORELLO_CALIBRATION", "builtin")
    import morello
    from morello._persist import PERSIST_AHEAD
    from morello.memory import parse_target
    from morello.search import Engine

    target = parse_target("avx2")
    eng = Engine(target)
    t0 = time.perf_counter()
    eng.solve(morello.matmul(*args.shape))
    print(f"search {'x'.join(map(str, args.shape))}: {time.perf_counter() - t0:.2f} s",
          file=sys.stderr)
    configs = {"inline": (False, 1)}
    configs.update({f"thread-{n}": (True, n) for n in args.ahead or [PERSIST_AHEAD]})
    times: dict[str, list[float]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="morello-write-") as work:
        for r in range(args.rounds):
            for name, (threaded, ahead) in configs.items():
                path = Path(work) / f"{name}-{r}.sqlite"
                times[name].append(timed_write(eng, target, path, threaded, ahead))
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
    ratios = {c: sorted(t / i for i, t in zip(times["inline"], times[c]))
              for c in configs if c != "inline"}
    out = {"shape": args.shape, "rounds": args.rounds,
           "median_s": {c: round(statistics.median(v), 3) for c, v in times.items()},
           "over_inline": {c: [round(x, 2) for x in r] for c, r in ratios.items()},
           "median_ratio": {c: round(statistics.median(r), 2) for c, r in ratios.items()}}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
