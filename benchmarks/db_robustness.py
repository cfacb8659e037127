"""Robustness of the results database: concurrent writers and kill -9, at full size.

    python benchmarks/db_robustness.py [--procs 3] [--rounds 10] [--kills 50]
                                       [--db-dir DIR] [--seed 0] [--keep]

Two phases, each into a fresh SQLite file under ``--db-dir`` (default: a temporary
directory, removed afterwards unless ``--keep``):

1. Concurrent writers. ``--procs`` processes start together and search ``--rounds``
   distinct small matmul shapes each (sizes 4..20) into one file. Even-numbered processes
   are long-lived (one Python process, one session, all its shapes); odd-numbered ones
   run one ``morello synth ... -q`` command per shape. Processes 0 and 1 take neighbouring
   shapes, so they write the same pages and their saves merge. Afterwards, a result is
   *lost* if its root is missing from the file, or a fresh session does not answer it
   from the file (a search ran: ``specs_solved > 0``), or answers it at another cost
   than a search without a database (``db=False``), or fails.

2. kill -9. ``--kills`` times, a ``morello synth`` of a moderately sized matmul (sizes
   24..56) into one file is killed with SIGKILL: at a random time in [0, its typical
   time with the file open] after it opened the file (even kills: most of a run here is
   Python starting), or after it announced its save (``saving results to ...``, odd
   kills) at a random time in the first 70% of the time a save takes (measured on
   searches left to finish). Only kills that land while the process has the database
   open (searching or saving) count: one that finds it exited (its runtime was
   overestimated) is logged as ``finished``, one that finds it still starting (Python's
   imports, the file not yet open) as ``starting``, and another is tried, up to three
   times ``--kills`` tries. Just before each kill, the roots the file
   holds are read with a read-only SQLite connection. After it, the file is *corrupt* if
   a read-only connection cannot read it, ``morello db check`` fails, or a fresh session
   cannot open it; a result is *lost* if a root read before the kill is gone, or (for
   roots not checked before, and at the end for all) is not answered from the file at
   the ``db=False`` cost. Files left beside the database other than its ``-wal`` and
   ``-shm`` are counted as *stray*. Before every fourth kill one search runs to the end
   (so the file holds more roots to lose).

Prints a table and one JSON line; exits 1 if anything was lost, corrupt or stray.
Results use the built-in cost constants (``MORELLO_CALIBRATION=builtin``).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

os.environ["MORELLO_CALIBRATION"] = "builtin"  # before morello reads it; children inherit

import morello  # noqa: E402
from morello import api  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from dbprocs import (
    Watched,
    morello_cmd,
    roots_in,
    run_concurrent_writers,
    run_outside,  # noqa: E402
    spec_text,
    stray_files,
)

TIMEOUT = 600  # seconds any subprocess may take before it is called hung
KILL_SIZES = (24, 32, 40, 48, 56)

def db_check(path: Path) -> tuple[bool, str]:
    r = run_outside(morello_cmd("db", "check", "--db", str(path)),
                       capture_output=True, text=True, timeout=TIMEOUT)
    return r.returncode == 0, (r.stdout + r.stderr).strip()


_COLD: dict[tuple, int] = {}


def cold_cost(shape) -> int:
    if shape not in _COLD:
        _COLD[shape] = morello.synthesize(morello.matmul(*shape), db=False).cost
    return _COLD[shape]


def answered(path: Path, shape) -> str | None:
    """None if a fresh session answers ``shape`` from the file at the cold cost; else
    what went wrong."""
    api.close_sessions()
    try:
        prog = morello.synthesize(morello.matmul(*shape), db=path)
    except Exception as e:  # noqa: BLE001 - reported
        return f"{type(e).__name__}: {e}"
    finally:
        api.close_sessions()
    if prog.stats.specs_solved:
        return f"searched again ({prog.stats.specs_solved} solved)"
    if prog.cost != cold_cost(shape):
        return f"cost {prog.cost}, db=False finds {cold_cost(shape)}"
    return None


# ---- phase 1 ---------------------------------------------------------------------------

def writers_plan(nprocs: int, rounds: int, rng: random.Random) -> list[list[tuple]]:
    top = 20
    seen: set[tuple] = set()
    plan: list[list[tuple]] = [[] for _ in range(nprocs)]
    for _ in range(rounds):
        base = tuple(rng.randint(8, top) for _ in range(3))
        for p in range(nprocs):
            while True:
                if p < 2:
                    s = tuple(max(4, b - rng.randint(0, 3)) for b in base)
                else:
                    s = tuple(rng.randint(4, top) for _ in range(3))
                if s not in seen:
                    break
            seen.add(s)
            plan[p].append(s)
    return plan


def phase_writers(path: Path, nprocs: int, rounds: int, rng: random.Random) -> dict:
    plan = writers_plan(nprocs, rounds, rng)
    t0 = time.monotonic()
    found, errors = run_concurrent_writers(path, plan, {p for p in range(nprocs) if p % 2},
                                           TIMEOUT)
    seconds = time.monotonic() - t0

    shapes = [s for ss in plan for s in ss]
    lost: list[str] = []
    try:
        held = roots_in(path)
    except sqlite3.Error as e:
        held = set()
        errors.append(f"read-only open failed: {e}")
    for s in shapes:
        if spec_text(s) not in held:
            lost.append(f"{s}: root missing")
            continue
        if s in found and found[s] != cold_cost(s):
            lost.append(f"{s}: its process found cost {found[s]}, db=False {cold_cost(s)}")
        why = answered(path, s)
        if why:
            lost.append(f"{s}: {why}")
    ok, msg = db_check(path)
    stray = stray_files(path)
    return {"results": len(shapes), "lost": len(lost), "corrupt": int(not ok),
            "errors": len(errors), "stray_files": len(stray), "seconds": round(seconds, 1),
            "details": lost + errors + ([] if ok else [f"db check: {msg}"])
            + [f"stray file {n}" for n in stray]}


# ---- phase 2 ---------------------------------------------------------------------------

def holds_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has the file ``path`` open (Linux: its /proc fds)."""
    target = os.path.realpath(path)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            pass
    return False


def phase_kills(path: Path, kills: int, rng: random.Random, log) -> dict:
    r = run_outside(morello_cmd("synth", "matmul", "16", "16", "16", "-q", "--db",
                                   str(path)), capture_output=True, text=True,
                       timeout=TIMEOUT)
    if r.returncode != 0:
        raise SystemExit(f"the first search failed: {r.stderr}")
    by_text = {spec_text(s): s for s in [(16, 16, 16)] + [
        (m, k, n) for m in KILL_SIZES for k in KILL_SIZES for n in KILL_SIZES]}
    shapes = [s for t, s in by_text.items() if s != (16, 16, 16)]
    rng.shuffle(shapes)
    typical = 1.0  # seconds from opening the file to the exit (measured as runs end)
    save_time = 0.8  # seconds from the announced save to the exit (from completed runs)
    phases = {"starting": 0, "searching": 0, "saving": 0, "finished": 0,
              "saving_committed": 0}
    corrupt = lost = stray = errors = completed = 0
    details: list[str] = []
    checked: set[str] = set()
    t_start = time.monotonic()
    landed = i = 0
    while landed < kills and i < 3 * kills:
        i += 1
        try:
            held = roots_in(path)
        except sqlite3.Error:
            held = set()
        todo = [s for s in shapes if spec_text(s) not in held]
        if not todo:
            details.append("ran out of shapes")
            break
        if i % 4 == 0 and len(todo) > 1:  # a search left to finish: more roots at stake
            shape = todo.pop(0)
            shapes.remove(shape)
            done = Watched(path, shape, TIMEOUT)
            rc = done.finish()
            completed += 1
            if rc != 0:
                details.append(f"completed run {shape}: exit {rc}: "
                               f"{done.err.decode(errors='replace')[-2000:]}")
                errors += 1
            elif done.saving_at is not None:
                save_time = 0.5 * save_time + 0.5 * (done.ended - done.t0 - done.saving_at)
        shape = todo[0]
        shapes.remove(shape)
        w = Watched(path, shape, TIMEOUT)
        t_open = None
        if i % 2 == 1:
            while w.proc.poll() is None and not holds_open(w.proc.pid, path):
                time.sleep(0.002)
            t_open = time.monotonic() - w.t0
            deadline = time.monotonic() + rng.uniform(0, typical)
            while time.monotonic() < deadline and w.proc.poll() is None:
                time.sleep(0.002)
        else:
            w.wait_for_save(TIMEOUT)
            delay = rng.uniform(0, 0.7 * save_time)
            time.sleep(delay)
        try:
            before = roots_in(path)
        except sqlite3.Error as e:
            before = set()
            details.append(f"kill {i}: read-only read before the kill failed: {e}")
        saving = w.saving.is_set()
        opened = saving or holds_open(w.proc.pid, path)
        when = round(time.monotonic() - w.t0, 2)  # of the kill (or of the exit, below)
        if w.proc.poll() is None:
            w.proc.send_signal(signal.SIGKILL)
        rc = w.finish()
        if rc == 0:
            when = round(w.ended - w.t0, 2)
        if rc == 0:
            phase = "finished"
        elif rc == -signal.SIGKILL:
            phase = "saving" if saving else "searching" if opened else "starting"
        else:
            phase = "searching"
            errors += 1
            details.append(f"kill {i}: {shape} exited {rc} before the kill: "
                           f"{w.err.decode(errors='replace')[-2000:]}")
        phases[phase] += 1
        landed += phase in ("searching", "saving")
        if t_open is not None and rc == 0:  # it ran to its end before the kill
            typical = 0.7 * typical + 0.3 * (w.ended - w.t0 - t_open)
        elif t_open is not None and w.saving_at is not None:
            typical = 0.7 * typical + 0.3 * (w.saving_at - t_open + save_time)

        bad = []
        try:
            after = roots_in(path)
        except sqlite3.Error as e:
            after = set()
            bad.append(f"read-only open: {e}")
        if phase == "saving" and spec_text(shape) in after:
            phases["saving_committed"] += 1  # killed after its commit
            phase = "saved"
        ok, msg = db_check(path)
        if not ok:
            bad.append(f"db check: {msg}")
        if bad:
            corrupt += 1
            details.append(f"kill {i} ({shape}, {phase}): corrupt: {'; '.join(bad)}")
        gone = before - after
        for text in sorted(gone):
            details.append(f"kill {i} ({shape}, {phase}): root lost: {text}")
        n_lost = len(gone)
        for text in sorted((before & after) - checked):
            why = answered(path, by_text[text])
            checked.add(text)
            if why:
                n_lost += 1
                details.append(f"kill {i}: {by_text[text]}: {why}")
        lost += n_lost
        s = stray_files(path)
        if s:
            stray += 1
            details.append(f"kill {i}: stray files {s}")
        log(f"kill {landed:3}/{kills}  {'x'.join(map(str, shape)):9}  at {when:5.2f} s  "
            f"{phase:9}  roots {len(after):3}  {'OK' if not (bad or n_lost or s) else 'BAD'}")
    # At the end, every root the file holds answers at the cold cost.
    final_lost = 0
    try:
        final = roots_in(path)
    except sqlite3.Error as e:
        final = set()
        corrupt += 1
        details.append(f"final read failed: {e}")
    for text in sorted(final):
        if text in by_text:
            why = answered(path, by_text[text])
            if why:
                final_lost += 1
                details.append(f"final: {by_text[text]}: {why}")
    lost += final_lost
    return {"kills": landed, "tries": i, **{f"killed_{k}": v for k, v in phases.items()},
            "completed_runs": completed, "errors": errors,
            "roots_at_end": len(final), "corrupt": corrupt, "lost": lost,
            "stray_files": stray, "seconds": round(time.monotonic() - t_start, 1),
            "details": details}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, default=3, metavar="P",
                    help="concurrent writer processes (default 3)")
    ap.add_argument("--rounds", type=int, default=10, metavar="R",
                    help="distinct shapes each writer searches (default 10)")
    ap.add_argument("--kills", type=int, default=50, metavar="N",
                    help="searches killed with SIGKILL (default 50; 0 skips the phase)")
    ap.add_argument("--db-dir", metavar="DIR", default=None,
                    help="where to make the databases (default: a temporary directory); "
                         "use a local file system")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the databases (their paths are printed)")
    args = ap.parse_args(argv)
    if args.procs < 1 or args.rounds < 1 or args.kills < 0:
        ap.error("--procs and --rounds must be >= 1, --kills >= 0")

    base = Path(args.db_dir) if args.db_dir else Path(tempfile.mkdtemp(prefix="morello-rb-"))
    base.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    (run / "writers").mkdir()
    (run / "kills").mkdir()
    rng = random.Random(args.seed)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    log(f"phase 1: {args.procs} processes x {args.rounds} rounds into "
        f"{run / 'writers' / 'shared.sqlite'}")
    w = phase_writers(run / "writers" / "shared.sqlite", args.procs, args.rounds, rng)
    k = None
    if args.kills:
        log(f"phase 2: {args.kills} kill -9s into {run / 'kills' / 'killed.sqlite'}")
        k = phase_kills(run / "kills" / "killed.sqlite", args.kills, rng, log)

    print()
    print(f"{'phase':28} {'results':>8} {'lost':>6} {'corrupt':>8} {'stray':>6} "
          f"{'seconds':>8}")
    print(f"{'concurrent writers':28} {w['results']:8} {w['lost']:6} {w['corrupt']:8} "
          f"{w['stray_files']:6} {w['seconds']:8}")
    if k is not None:
        print(f"{'kill -9':28} {k['roots_at_end']:8} {k['lost']:6} {k['corrupt']:8} "
              f"{k['stray_files']:6} {k['seconds']:8}")
        print(f"  kills: {k['kills']} of {k['tries']} tries landed: "
              f"{k['killed_searching']} while searching, "
              f"{k['killed_saving']} after announcing the save (of which "
              f"{k['killed_saving'] - k['killed_saving_committed']} before its commit, "
              f"{k['killed_saving_committed']} after); not counted: {k['killed_finished']} "
              f"tries found it exited, {k['killed_starting']} still starting; "
              f"{k['completed_runs']} searches run to the end between kills")
    for d in w["details"] + (k["details"] if k else []):
        print(f"  ! {d}")
    summary = {
        "procs": args.procs, "rounds": args.rounds,
        "writers": {x: v for x, v in w.items() if x != "details"},
        "kills": None if k is None else {x: v for x, v in k.items() if x != "details"},
    }
    bad = (w["lost"] + w["corrupt"] + w["errors"] + w["stray_files"]
           + (k["lost"] + k["corrupt"] + k["stray_files"] + k["errors"] if k else 0))
    summary["ok"] = bad == 0
    print(json.dumps(summary))
    if args.keep:
        print(f"databases kept in {run}", file=sys.stderr)
    elif args.db_dir:
        shutil.rmtree(run, ignore_errors=True)
    else:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
