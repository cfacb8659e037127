"""Fill a database bottom-up with every Spec of a family up to bounds.

A family (``FAMILIES``) is a Spec constructor over a few sizes, e.g. matmul's M K N. The
plan takes every point of the grid the bounds and ``dims`` choose (all sizes, powers of
two, or powers of two and their triples), puts each in its *cell* (the floor of log2 of
each size), and orders the cells in north-east diagonals: stage ``s`` holds the cells
whose indices sum to ``s``. Every sub-Spec of a goal has sizes at most the goal's, so it
lies in the goal's cell or an earlier stage: when a stage runs, what its goals depend on
is already stored, and the goals of one stage are independent of each other.

A stage is cut into tasks (runs of goals, a cell's together). ``run`` executes them:

- serially in this process (``workers=None``): each goal is ``morello.synthesize`` into
  the database, the on-demand path itself, so it is the reference for equality;
- on Dask (``client``): each task is sent the stage's snapshot of the database (bytes:
  nothing is shared between machines but the scheduler), solves its goals into a local
  copy and returns the parts it added (``morello.store.exchange``); the driver folds a
  stage's results into the database in one transaction that also records the stage as
  finished.

A run that is stopped (kill -9 included) and started again with the same arguments skips
the stages its database records as finished (``meta`` ``precompute:<plan key>``) and
redoes at most the one it was in: every stored result is optimal, so a goal stored
before the interruption is a lookup the second time.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from morello.errors import MorelloError, SpecError

GRIDS = ("all", "pow2", "pow2x3")


def _matmul(sizes, opts):
    import morello

    m, k, n = sizes
    return morello.matmul(m, k, n, dtypes=opts.get("dtypes"),
                          rhs_layout=opts.get("rhs_layout", "rm"), target=opts["target"],
                          serial=opts["threads"] == 1)


def _softmax(sizes, opts):
    import morello

    return morello.softmax(*sizes, target=opts["target"], serial=opts["threads"] == 1)


def _attention(sizes, opts):
    import morello

    seq, dim = sizes
    return morello.attention(seq, dim, target=opts["target"], serial=opts["threads"] == 1)


@dataclass(frozen=True)
class Family:
    """A Spec constructor over ``dims`` sizes, built as the command line builds it (so
    that ``morello bench`` of a precomputed point is a lookup)."""

    name: str
    dims: tuple[str, ...]
    make: Callable
    options: tuple[str, ...] = ()  # the constructor options it takes


FAMILIES = {f.name: f for f in (
    Family("matmul", ("M", "K", "N"), _matmul, ("dtypes", "rhs_layout")),
    Family("softmax", ("ROWS", "COLS"), _softmax),
    Family("attention", ("SEQ", "DIM"), _attention),
)}


def grid_values(bound: int, grid: str) -> list[int]:
    """The sizes 1..``bound`` a grid takes."""
    if grid == "all":
        return list(range(1, bound + 1))
    out = {1 << i for i in range(bound.bit_length()) if 1 << i <= bound}
    if grid == "pow2x3":
        out |= {3 << i for i in range(bound.bit_length()) if 3 << i <= bound}
    return sorted(out)


@dataclass(frozen=True)
class Plan:
    """The stages of a precompute: ``stages[s]`` is a tuple of tasks, each a tuple of
    goals (a goal: its sizes)."""

    family: str
    options: dict = field(hash=False)
    stages: tuple[tuple[tuple[tuple[int, ...], ...], ...], ...]
    key: str

    @property
    def goals(self) -> int:
        return sum(len(t) for s in self.stages for t in s)

    @property
    def tasks(self) -> int:
        return sum(len(s) for s in self.stages)

    def spec(self, sizes: tuple[int, ...]):
        return FAMILIES[self.family].make(sizes, self.options)


def plan(family: str, bounds: list[int] | None, grid: str = "pow2", *, target: str = "avx2",
         threads: int = 1, calibration: str | None = None, dtypes: str | None = None,
         rhs_layout: str = "rm", values: list[list[int]] | None = None,
         tasks_per_stage: int = 2, min_task_goals: int = 4) -> Plan:
    """The plan of ``family`` over ``bounds`` (one per dim) and ``grid``, or over the
    sizes ``values`` (a list per dim). Each stage is cut into at most ``tasks_per_stage``
    tasks of at least ``min_task_goals`` goals."""
    fam = FAMILIES.get(family)
    if fam is None:
        raise MorelloError(f"unknown family {family!r:.40} (one of {', '.join(FAMILIES)})")
    if values is not None:
        values = [sorted(set(v)) for v in values]
        bounds = [max(v) if v else 0 for v in values]
    if bounds is None:
        raise MorelloError("give --max or --values")
    if len(bounds) != len(fam.dims):
        flag = "--values" if values is not None else "--max"
        raise MorelloError(f"{family} takes {flag} {' '.join(fam.dims)} ({len(fam.dims)} "
                           f"sizes), got {len(bounds)}")
    if grid not in GRIDS:
        raise MorelloError(f"--dims must be one of {', '.join(GRIDS)}, got {grid!r:.40}")
    if any(b < 1 for b in bounds) or (values and any(x < 1 for v in values for x in v)):
        raise MorelloError(f"every {'--values' if values else '--max'} size must be >= 1")
    if "dtypes" not in fam.options and dtypes is not None:
        raise MorelloError(f"--dtypes is for matmul only, not {family}")
    if "rhs_layout" not in fam.options and rhs_layout != "rm":
        raise MorelloError(f"--rhs-layout is for matmul only, not {family}")
    opts: dict = {"target": target, "threads": threads, "calibration": calibration}
    if "dtypes" in fam.options:
        opts["dtypes"] = tuple(dtypes.split(",")) if dtypes else None
        opts["rhs_layout"] = rhs_layout
    axes = values if values is not None else [grid_values(b, grid) for b in bounds]
    points: list[tuple[int, ...]] = [()]
    for vals in axes:
        points = [p + (v,) for p in points for v in vals]
    cells: dict[tuple[int, ...], list] = {}
    for p in points:
        cells.setdefault(tuple(v.bit_length() - 1 for v in p), []).append(p)
    by_stage: dict[int, list] = {}
    for cell in sorted(cells):
        by_stage.setdefault(sum(cell), []).extend(cells[cell])
    stages = []
    for s in sorted(by_stage):
        goals = by_stage[s]
        n = max(1, min(tasks_per_stage, len(goals) // max(1, min_task_goals)))
        cut = [round(i * len(goals) / n) for i in range(n + 1)]
        stages.append(tuple(tuple(goals[a:b]) for a, b in zip(cut, cut[1:]) if b > a))
    made = Plan(family, opts, tuple(stages), "")
    try:  # a bad option is one line now, not an error in a worker
        first = made.spec(points[0])
    except SpecError as e:
        raise MorelloError(str(e)) from None
    key = hashlib.sha256(json.dumps(
        [family, axes, sorted((k, v) for k, v in opts.items()),
         _context_of(target, threads, calibration, first)]).encode()).hexdigest()[:16]
    made = Plan(family, opts, tuple(stages), key)
    return made


def _context_of(target: str, threads: int, calibration: str | None, spec) -> list[str]:
    """What decides a goal's results besides its Spec: the target's constants and the
    actions of the goals' family, so a plan recorded under other ones is not taken as
    done."""
    from morello.api import _target
    from morello.coords import spec_key
    from morello.identity import context_actions

    tgt = _target(target, threads, calibration)
    return [tgt.db_key, context_actions(tgt, spec_key(spec)[0])]


def _meta_name(p: Plan) -> str:
    return f"precompute:{p.key}"


def stages_done(p: Plan, db: Path) -> int:
    """How many of ``p``'s stages ``db`` records as finished."""
    from morello.store.exchange import read_meta

    found = read_meta(db, _meta_name(p))
    if isinstance(found, dict) and isinstance(found.get("stages_done"), int):
        return max(0, min(found["stages_done"], len(p.stages)))
    return 0


def solve_task(family: str, options: dict, goals, snapshot: bytes | None) -> tuple[bytes, dict]:
    """Solve ``goals`` against a copy of ``snapshot`` (a database's bytes, or None for
    an empty one); the new results as a database's bytes, and the task's figures.
    Runs in a worker process: it needs no file of the driver."""
    import morello
    from morello.api import close_sessions
    from morello.store import exchange

    t0 = time.perf_counter()
    p = Plan(family, options, (), "")
    with tempfile.TemporaryDirectory(prefix="morello-task-") as d:
        path = Path(d) / "db.sqlite"
        seq, known = 0, set()
        if snapshot is not None:
            path.write_bytes(snapshot)
            seq = exchange.snapshot_seq(path)
            known = exchange.root_names(path)
        solved = 0
        t1 = time.perf_counter()
        try:
            for sizes in goals:
                prog = morello.synthesize(p.spec(tuple(sizes)), options["target"], db=path,
                                          threads=options["threads"],
                                          calibration=options["calibration"])
                solved += prog.stats.specs_solved
        finally:
            close_sessions()
        t2 = time.perf_counter()
        out = Path(d) / "new.sqlite"
        counts = exchange.export_since(path, seq, out, known)
        data = out.read_bytes()
    t3 = time.perf_counter()
    return data, {"goals": len(goals), "specs_solved": solved, "solve_seconds": t2 - t1,
                  "overhead_seconds": (t1 - t0) + (t3 - t2), "bytes": len(data),
                  "pid": os.getpid(), **counts}


class Progress:
    """One line per stage on stderr, rewritten as its tasks finish: goals, rate, ETA."""

    def __init__(self, p: Plan, quiet: bool = False) -> None:
        self.plan, self.quiet = p, quiet
        self.t0 = time.perf_counter()
        self.done = 0
        self.open = False

    def __call__(self, stage: int, tasks_done: int, goals: int) -> None:
        self.done += goals
        if self.quiet:
            return
        elapsed = time.perf_counter() - self.t0
        rate = self.done / elapsed if elapsed else 0.0
        left = self.plan.goals - self.done
        eta = f"{left / rate:,.0f} s" if rate and left else "-"
        tasks = len(self.plan.stages[stage])
        print(f"\rprecompute: stage {stage + 1}/{len(self.plan.stages)}, task "
              f"{tasks_done}/{tasks}, {self.done:,}/{self.plan.goals:,} Specs, "
              f"{rate:,.1f}/s, ETA {eta} ", end="", file=sys.stderr, flush=True)
        self.open = True

    def close(self) -> None:
        if self.open:
            print(file=sys.stderr, flush=True)
            self.open = False


def run(p: Plan, db: Path, *, client=None, progress: Progress | None = None) -> dict:
    """Execute the stages of ``p`` not yet recorded in ``db``: serially in this process
    (``client`` None) or as tasks on the Dask ``client``. Returns the run's figures."""
    from morello.store import exchange

    db = Path(db)
    first = stages_done(p, db)
    figures: dict = {"stages": len(p.stages), "stages_skipped": first, "tasks": 0,
                     "goals": 0, "specs_solved": 0, "merge_seconds": 0.0,
                     "task_overhead_seconds": 0.0, "task_solve_seconds": 0.0,
                     "task_seconds": []}
    t0 = time.perf_counter()
    if progress is not None:
        progress.done = sum(len(t) for s in p.stages[:first] for t in s)
    for s in range(first, len(p.stages)):
        meta = {_meta_name(p): json.dumps({"family": p.family, "stages_done": s + 1,
                                           "stages": len(p.stages)})}
        if client is None:
            _run_serial(p, s, db, figures, progress)
            exchange.absorb(db, [], meta)
        else:
            _run_dask(p, s, db, client, figures, progress, meta)
    figures["seconds"] = time.perf_counter() - t0
    return figures


def _run_serial(p: Plan, s: int, db: Path, figures: dict, progress) -> None:
    import morello

    o = p.options
    for i, task in enumerate(p.stages[s]):
        t0 = time.perf_counter()
        for sizes in task:
            prog = morello.synthesize(p.spec(sizes), o["target"], db=db, threads=o["threads"],
                                      calibration=o["calibration"])
            figures["specs_solved"] += prog.stats.specs_solved
        figures["task_seconds"].append(time.perf_counter() - t0)
        figures["tasks"] += 1
        figures["goals"] += len(task)
        if progress is not None:
            progress(s, i + 1, len(task))


def _run_dask(p: Plan, s: int, db: Path, client, figures: dict, progress, meta) -> None:
    from distributed import as_completed

    from morello.store import exchange

    snap = None
    if db.exists():
        with tempfile.TemporaryDirectory(prefix="morello-snap-") as d:
            exchange.snapshot(db, Path(d) / "snap.sqlite")
            snap = (Path(d) / "snap.sqlite").read_bytes()
    shared = client.scatter(snap, broadcast=True) if snap is not None else None
    futures = [client.submit(solve_task, p.family, p.options, list(task), shared,
                             pure=False, retries=2) for task in p.stages[s]]
    with tempfile.TemporaryDirectory(prefix="morello-stage-") as d:
        files = []
        for i, fut in enumerate(as_completed(futures)):
            data, fig = fut.result()
            path = Path(d) / f"{i}.sqlite"
            path.write_bytes(data)
            files.append(path)
            figures["tasks"] += 1
            figures["goals"] += fig["goals"]
            figures["specs_solved"] += fig["specs_solved"]
            figures["task_overhead_seconds"] += fig["overhead_seconds"]
            figures["task_solve_seconds"] += fig["solve_seconds"]
            figures["task_seconds"].append(fig["solve_seconds"] + fig["overhead_seconds"])
            if progress is not None:
                progress(s, i + 1, fig["goals"])
        t0 = time.perf_counter()
        exchange.absorb(db, files, meta)
        figures["merge_seconds"] += time.perf_counter() - t0


def estimate(p: Plan, samples: int = 3) -> float | None:
    """An upper bound on the serial seconds of ``p``: the mean time of ``samples`` goals
    spread over its order, each solved cold in memory, times the goals (bottom-up shares
    sub-Specs between goals, so the run is faster)."""
    import morello
    from morello.api import close_sessions

    order = [g for st in p.stages for t in st for g in t]
    if samples < 1 or not order:
        return None
    picks = sorted({order[round(i * (len(order) - 1) / max(1, samples - 1))]
                    for i in range(samples)})
    o = p.options
    total = 0.0
    for sizes in picks:
        close_sessions()  # cold: no Engine shared with the previous sample
        t0 = time.perf_counter()
        morello.synthesize(p.spec(sizes), o["target"], db=False, threads=o["threads"],
                           calibration=o["calibration"])
        total += time.perf_counter() - t0
    close_sessions()
    return total / len(picks) * len(order)
