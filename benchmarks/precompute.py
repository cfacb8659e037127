"""Scaling of ``morello precompute``: the same plan serially, on 1 and on 2 Dask workers,
in one run, each into a fresh database; then the same plan on paper for more workers.

    python benchmarks/precompute.py                          # matmul --max 16 16 16 --dims all
    python benchmarks/precompute.py --family softmax --max 1024 1024 --dims pow2
    python benchmarks/precompute.py --workers 1 2 4 --paper 8 64

Reports, per run: wall seconds, speed-up over serial, tasks, the Dask overhead per task
(snapshot, engine start, export: measured inside the task; and the driver's scheduling,
the wall time not spent solving or merging), and the fraction of wall time in the
driver's merges. On paper: from the last run's task times, a stage on W workers costs at
least its total over W and at least its dearest Spec (a task's time per goal), plus one
task's overhead and its merge; the sum over stages is the estimate for W workers, and
the sum with W unbounded the critical path.
Every run's database is checked: each goal is a lookup with a fresh search's cost.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import morello
from morello import precompute as pc
from morello.api import close_sessions


def _check(p: pc.Plan, db: Path, sample: int = 40) -> None:
    goals = [g for s in p.stages for t in s for g in t]
    for sizes in goals[:: max(1, len(goals) // sample)]:
        got = morello.synthesize(p.spec(sizes), db=db)
        if got.stats.specs_solved or got.cost != morello.synthesize(p.spec(sizes),
                                                                     db=False).cost:
            raise SystemExit(f"{db}: {sizes} is not answered as a fresh search is")
    close_sessions()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default="matmul")
    ap.add_argument("--max", type=int, nargs="+", default=[16, 16, 16])
    ap.add_argument("--dims", default="all", choices=pc.GRIDS)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--paper", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import distributed

    rows = []
    with tempfile.TemporaryDirectory(prefix="morello-bench-") as d:
        def plan(w: int) -> pc.Plan:
            return pc.plan(args.family, args.max, args.dims, calibration="builtin",
                           tasks_per_stage=2 * max(1, w))

        p = plan(1)
        db = Path(d) / "serial.sqlite"
        close_sessions()
        fig = pc.run(p, db)
        _check(p, db)
        serial = fig["seconds"]
        rows.append({"run": "serial", "seconds": serial, "tasks": fig["tasks"]})
        last = None
        for w in args.workers:
            p = plan(w)
            db = Path(d) / f"dask{w}.sqlite"
            with distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                          dashboard_address=None) as cl, \
                    distributed.Client(cl) as client:
                fig = pc.run(p, db, client=client)
            _check(p, db)
            sched = fig["seconds"] - fig["merge_seconds"] - fig["task_solve_seconds"] / w \
                - fig["task_overhead_seconds"] / w
            rows.append({"run": f"dask {w} workers", "seconds": fig["seconds"],
                         "speedup": serial / fig["seconds"], "tasks": fig["tasks"],
                         "task_overhead_ms": 1e3 * fig["task_overhead_seconds"] / fig["tasks"],
                         "driver_idle_ms_per_task": 1e3 * max(0.0, sched) / fig["tasks"],
                         "merge_fraction": fig["merge_seconds"] / fig["seconds"],
                         "mean_task_s": sum(fig["task_seconds"]) / fig["tasks"]})
            last = (p, fig, w)
    assert last is not None
    p, fig, w = last
    # Task times in plan order (as_completed order within a stage: close enough for the
    # per-stage sums). A stage on n workers, cut into n tasks or more, costs at least its
    # total over n and at least its dearest Spec (a task's time over its goals, the
    # finest cut), plus one task's overhead and the stage's merge.
    times = iter(fig["task_seconds"])
    per_stage = [[(next(times), len(t)) for t in st] for st in p.stages]
    merge_per_stage = fig["merge_seconds"] / len(p.stages)
    overhead = fig["task_overhead_seconds"] / fig["tasks"]
    unit = [max(t / g for t, g in ts) for ts in per_stage]
    crit = sum(u + overhead + merge_per_stage for u in unit)
    paper = []
    for n in args.paper:
        est = sum(max(u, sum(t for t, _ in ts) / n) + overhead + merge_per_stage
                  for u, ts in zip(unit, per_stage))
        paper.append({"workers": n, "seconds": est, "speedup": serial / est})
    out = {"plan": f"{args.family} --max {' '.join(map(str, args.max))} --dims {args.dims}",
           "goals": p.goals, "stages": len(p.stages), "runs": rows,
           "paper": {"critical_path_s": crit, "merge_per_stage_s": merge_per_stage,
                     "task_overhead_s": overhead,
                     "estimates": paper}}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['plan']}: {p.goals} Specs, {len(p.stages)} stages")
        for r in rows:
            print("  " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in r.items()))
        print(f"  on paper (from the {w}-worker tasks): critical path {crit:.1f} s, "
              f"merge {merge_per_stage:.2f} s/stage")
        for r in paper:
            print(f"    {r['workers']} workers: {r['seconds']:.1f} s, {r['speedup']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
