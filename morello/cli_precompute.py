"""The ``morello precompute`` command: its arguments, and a run in this process or on Dask."""
from __future__ import annotations

import argparse
import json
import math
import sys

from morello import limits
from morello.errors import MorelloError

# Plans of every size up to --max past this many Specs run only with --dims all named.
UNASKED_ALL = 1_000_000


def add_precompute_parser(sub) -> None:
    """Add the ``precompute`` command to the subparsers ``sub`` of ``morello``'s parser."""
    from morello.cli import _add_calibration_arg, _int, _int_list
    from morello.precompute import FAMILIES, GRIDS

    fams = "; ".join(f"{f.name} {' '.join(f.dims)}" for f in FAMILIES.values())
    p = sub.add_parser(
        "precompute", help="fill a database with every Spec of a family up to bounds",
        description="Solve every Spec of a family whose sizes lie on a grid up to --max, "
                    "bottom-up: stages of north-east diagonals of log2 cells, so that "
                    "each stage's sub-Specs are already stored. Runs on a Dask cluster "
                    "(--workers N on this machine, the default when Dask is installed, or "
                    "--scheduler) or in this process (--serial). A run stopped at any "
                    "point continues, when started again with the same arguments, from "
                    f"its last finished stage. Families: {fams}.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  morello precompute matmul --max 16 16 16\n"
               "  morello precompute matmul --max 1024 1024 1024 --dims pow2 --workers 2\n"
               "  morello precompute softmax --max 4096 4096 --dims pow2 --dry-run\n"
               "  morello precompute attention --max 512 128 --dims pow2 --db team.sqlite\n"
               "  morello precompute matmul --values 1 2048,4096 2048,16384 "
               "--dtypes f32,bf16,f32 --rhs-layout cm\n"
               "  morello precompute matmul --max 32 32 32 --scheduler tcp://host:8786")
    p.add_argument("family", choices=tuple(FAMILIES), metavar="FAMILY",
                   help=f"one of {', '.join(FAMILIES)}")
    sizes = p.add_mutually_exclusive_group(required=True)
    sizes.add_argument("--max", type=_int, nargs="+", metavar="SIZE",
                       help="the largest size of each dim (matmul: M K N)")
    sizes.add_argument("--values", type=_int_list, nargs="+", metavar="S[,S...]",
                       help="the sizes of each dim, listed (e.g. matmul: 1 2048,4096 "
                            "2048,16384)")
    p.add_argument("--dims", default=None, choices=GRIDS,
                   help="the sizes of each dim up to --max: every one (all, the default; "
                        f"past {UNASKED_ALL:,} Specs only when named), powers of two "
                        "(pow2), or powers of two and three times them (pow2x3)")
    p.add_argument("--dtypes", default=None, metavar="D,D,D",
                   help="matmul operand dtypes, e.g. f32,bf16,f32")
    p.add_argument("--rhs-layout", default="rm", choices=("rm", "cm"),
                   help="matmul rhs row-major (rm) or column-major (cm)")
    p.add_argument("--target", default="avx2", help="avx2 (default), avx512 or native")
    _add_calibration_arg(p)
    p.add_argument("--threads", type=_int, default=1, metavar="N",
                   help="threads the programs are for (1: serial programs)")
    p.add_argument("--db", metavar="PATH", default=None,
                   help="the database to fill (default: the user cache's)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--workers", type=_int, default=None, metavar="N",
                     help="start a Dask LocalCluster of N worker processes here "
                          "(default: one per CPU)")
    how.add_argument("--scheduler", metavar="ADDRESS", default=None,
                     help="use a running Dask cluster, e.g. tcp://10.0.0.1:8786")
    how.add_argument("--serial", action="store_true",
                     help="no Dask: solve in this process (the reference)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (stages, tasks, Specs) and an estimate; solve nothing")
    p.add_argument("--samples", type=_int, default=3, metavar="K",
                   help="with --dry-run: goals solved in memory for the estimate (0: none)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="print one JSON object")

def cmd_precompute(args) -> int:
    import os
    from pathlib import Path

    from morello import db as dbmod
    from morello import precompute as pc

    limits.check_threads(args.threads)
    if args.workers is not None and args.workers < 1:
        raise MorelloError("--workers must be >= 1")
    dask = None if args.serial else _dask(required=args.workers is not None
                                          or args.scheduler is not None)
    workers = args.workers or (0 if dask is None or args.scheduler else os.cpu_count() or 1)
    if args.dims is None and args.max is not None:
        count = math.prod(args.max)
        if count > UNASKED_ALL:
            pow2 = math.prod(len(pc.grid_values(b, "pow2")) for b in args.max)
            raise MorelloError(f"every size up to --max is {count:,} Specs: name --dims all "
                               f"to run that, or take --dims pow2 ({pow2:,} Specs) or pow2x3")
    p = pc.plan(args.family, args.max, args.dims or "all", target=args.target, threads=args.threads,
                calibration=args.calibration, dtypes=args.dtypes, rhs_layout=args.rhs_layout,
                values=args.values, tasks_per_stage=2 * max(1, workers) if dask else 1)
    path = Path(args.db) if args.db else dbmod.default_path()
    done = pc.stages_done(p, path)
    how = ("serial" if dask is None else f"dask {args.scheduler}" if args.scheduler
           else f"dask LocalCluster, {workers} workers")
    summary = {"family": p.family, "plan": p.key, "db": str(path), "stages": len(p.stages),
               "stages_done": done, "tasks": p.tasks, "specs": p.goals, "run": how}
    if args.dry_run:
        if not args.quiet and args.samples > 0:
            print(f"estimating: {args.samples} Specs solved cold in memory ...",
                  file=sys.stderr, flush=True)
        est = pc.estimate(p, args.samples)
        summary["estimate_serial_seconds_at_most"] = None if est is None else round(est, 1)
        if args.json:
            print(json.dumps(summary))
        else:
            for k, v in summary.items():
                print(f"{k:32} {v}")
            for i, st in enumerate(p.stages):
                print(f"  stage {i + 1:3}: {len(st)} tasks, {sum(len(t) for t in st)} Specs"
                      f"{'  (done)' if i < done else ''}")
        return 0
    dbmod.check_writable(path)
    progress = pc.Progress(p, quiet=args.quiet or args.json)
    try:
        if dask is None:
            figures = pc.run(p, path, progress=progress)
        elif args.scheduler:
            with dask.Client(args.scheduler, timeout="30s") as client:
                figures = pc.run(p, path, client=client, progress=progress)
        else:
            with dask.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None) as cluster, \
                    dask.Client(cluster) as client:
                figures = pc.run(p, path, client=client, progress=progress)
    except KeyboardInterrupt:
        progress.close()
        print(f"morello: interrupted after {pc.stages_done(p, path)} of {len(p.stages)} "
              "stages; the same command continues from there", file=sys.stderr)
        return 130
    finally:
        progress.close()
    summary.update({k: (round(v, 3) if isinstance(v, float) else v)
                    for k, v in figures.items() if k != "task_seconds"})
    if args.json:
        print(json.dumps(summary))
    else:
        for k, v in summary.items():
            print(f"{k:32} {v}")
    return 0


def _dask(required: bool):
    """``distributed``, or None (with a note) when absent; MorelloError if ``required``."""
    try:
        import distributed
    except ImportError:
        if required:
            raise MorelloError("--workers and --scheduler need Dask: pip install "
                               "'morello[dask]' (or run with --serial)") from None
        print("morello: note: Dask is not installed: solving in this process (pip install "
              "'morello[dask]' to use every core)", file=sys.stderr)
        return None
    return distributed
