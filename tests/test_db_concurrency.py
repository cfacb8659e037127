"""The results database under concurrency, kill -9 and termination signals.

Several processes (short-lived ``morello synth`` commands and long-lived Python processes
looping over shapes) and several threads search into one SQLite file at once; processes
are killed with SIGKILL at random points of their search and of their save; SIGTERM and
SIGHUP stop a search, which then saves what it solved. After each: the file passes
``morello db check``, every root committed before is still there, and Specs answered
from the file cost what a search without a database finds.

Slow variants (more rounds, more kills) are marked ``slow``, which the default run
excludes (``pytest -m slow tests/test_db_concurrency.py`` runs them);
``benchmarks/db_robustness.py`` runs the full-size evidence.
"""
from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from dbprocs import (
    Watched,
    morello_cmd,
    popen_outside,
    roots_in,
    run_concurrent_writers,
    run_outside,
    spec_text,
    stray_files,
)

import morello
from morello import api
from morello import db as dbmod

TIMEOUT = 120  # seconds any one subprocess may take before the test calls it a hang


@pytest.fixture(autouse=True)
def _fresh_sessions():
    """Start and end with no open database in this process."""
    api.close_sessions()
    yield
    api.close_sessions()


# ---- helpers -------------------------------------------------------------------------

def db_check(path: Path) -> subprocess.CompletedProcess:
    return run_outside(morello_cmd("db", "check", "--db", str(path)),
                          capture_output=True, text=True, timeout=TIMEOUT)


def assert_db_check_passes(path: Path) -> None:
    r = db_check(path)
    assert r.returncode == 0, f"morello db check failed ({r.returncode}):\n{r.stdout}{r.stderr}"


_COLD: dict[tuple, int] = {}


def cold_cost(shape, **kw) -> int:
    """The cost a search without a database finds."""
    key = (tuple(shape), tuple(sorted(kw.items())))
    if key not in _COLD:
        threads = kw.pop("threads", 1)
        _COLD[key] = morello.synthesize(morello.matmul(*shape, **kw), threads=threads,
                                        db=False).cost
    return _COLD[key]


def assert_answered_from_file(path: Path, shape, **kw) -> None:
    """A fresh session answers ``shape`` from its stored root, at the cold cost."""
    api.close_sessions()
    threads = kw.pop("threads", 1)
    prog = morello.synthesize(morello.matmul(*shape, **kw), threads=threads, db=path)
    assert prog.stats.specs_solved == 0, f"{shape} was searched again, not replayed"
    assert prog.cost == cold_cost(shape, threads=threads, **kw), shape
    api.close_sessions()


def assert_no_stray_files(path: Path) -> None:
    extra = stray_files(path)
    assert not extra, f"stray files beside the database: {extra}"


def writers_plan(nprocs: int, rounds: int, seed: int) -> list[list[tuple]]:
    """Distinct small matmul shapes (sizes 1..12, or up to 16 for many rounds), one per
    process and round. Processes 0 and 1 take neighbouring shapes (their searches meet
    the same sub-Specs, so they write the same pages)."""
    rng = random.Random(seed)
    top = 12 if nprocs * rounds <= 40 else 16
    seen: set[tuple] = set()
    plan: list[list[tuple]] = [[] for _ in range(nprocs)]
    for _ in range(rounds):
        base = (rng.randint(6, top), rng.randint(6, top), rng.randint(6, top))
        for p in range(nprocs):
            while True:
                if p < 2:  # neighbours of one base shape
                    s = tuple(max(1, min(top, b - rng.randint(0, 2))) for b in base)
                else:
                    s = (rng.randint(1, top), rng.randint(1, top), rng.randint(1, top))
                if s not in seen:
                    break
            seen.add(s)
            plan[p].append(s)
    return plan


# ---- a. concurrent writers -------------------------------------------------------------

def _concurrent_writers(tmp_path: Path, nprocs: int, rounds: int, seed: int) -> None:
    path = tmp_path / "shared.sqlite"
    plan = writers_plan(nprocs, rounds, seed)
    found, errors = run_concurrent_writers(path, plan, {2}, TIMEOUT)
    assert not errors, "\n".join(errors)
    shapes = [s for shapes in plan for s in shapes]
    assert len(set(shapes)) == nprocs * rounds
    assert set(found) == set(shapes)
    for s in shapes:  # what each process found is optimal
        assert found[s] == cold_cost(s), s
    held = roots_in(path)
    missing = [s for s in shapes if spec_text(s) not in held]
    assert not missing, f"roots lost: {missing}"
    for s in shapes:
        assert_answered_from_file(path, s)
    assert_db_check_passes(path)
    # The merged pages answer a new query correctly, and do answer part of it.
    api.close_sessions()
    new = next((m, k, n) for m in range(12, 0, -1) for k in range(12, 0, -1)
               for n in range(12, 0, -1) if (m, k, n) not in set(shapes))
    warm = morello.synthesize(morello.matmul(*new), db=path)
    cold = morello.synthesize(morello.matmul(*new), db=False)
    assert warm.cost == cold.cost
    assert warm.stats.specs_solved < cold.stats.specs_solved
    api.close_sessions()
    assert_db_check_passes(path)
    assert_no_stray_files(path)


def test_concurrent_writers_lose_nothing(tmp_path):
    _concurrent_writers(tmp_path, nprocs=3, rounds=4, seed=1)


@pytest.mark.slow
def test_concurrent_writers_lose_nothing_many_rounds(tmp_path):
    _concurrent_writers(tmp_path, nprocs=3, rounds=12, seed=2)


# ---- b. threads --------------------------------------------------------------------------

def test_threads_share_a_database(tmp_path):
    """Three threads search into one file at once: two share the process's session of
    the serial target (serialized by its lock), the third searches parallel Specs for 2
    threads, a session (and SQLite connection) of its own, so its writes really overlap."""
    path = tmp_path / "threads.sqlite"
    work = [
        [((12, 10, 8), {}), ((9, 9, 9), {})],
        [((8, 12, 10), {}), ((7, 11, 5), {})],
        [((12, 12, 12), {"serial": False, "threads": 2}),
         ((10, 8, 12), {"serial": False, "threads": 2})],
    ]
    barrier = threading.Barrier(len(work))
    errors: list[BaseException] = []
    costs: dict[tuple, int] = {}

    def run(items):
        try:
            barrier.wait(30)
            for shape, kw in items:
                kw = dict(kw)
                threads = kw.pop("threads", 1)
                prog = morello.synthesize(morello.matmul(*shape, **kw), threads=threads,
                                          db=path)
                costs[(shape, threads)] = prog.cost
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(items,)) for items in work]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in ts), "a thread hung"
    if errors:
        raise errors[0]
    api.close_sessions()
    held = roots_in(path)
    for items in work:
        for shape, kw in items:
            kw = dict(kw)
            threads = kw.pop("threads", 1)
            text = str(morello.matmul(*shape, **kw).canonical())
            assert text in held, f"root of {shape} {kw} missing"
            assert costs[(shape, threads)] == cold_cost(shape, threads=threads, **kw)
            assert_answered_from_file(path, shape, threads=threads, **kw)
    assert_db_check_passes(path)


# ---- c. a long-lived process sees what others saved ------------------------------------

def test_long_lived_process_sees_what_others_saved(tmp_path):
    a, b, c = (2, 2, 2), (16, 16, 16), (16, 16, 32)

    # Control: a session that has only A's results.
    ctrl = tmp_path / "ctrl.sqlite"
    morello.synthesize(morello.matmul(*a), db=ctrl)
    ctrl_c = morello.synthesize(morello.matmul(*c), db=ctrl)

    path = tmp_path / "shared.sqlite"
    first = morello.synthesize(morello.matmul(*a), db=path)  # the session stays open
    assert first.stats.specs_solved > 0
    r = run_outside(morello_cmd("synth", "matmul", *map(str, b), "-q", "--db",
                                   str(path)),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    # B's root, saved by the other process, answers B here without a search.
    got_b = morello.synthesize(morello.matmul(*b), db=path)
    assert got_b.stats.specs_solved == 0
    assert got_b.cost == cold_cost(b)
    # C's search in this (older) session reads the pages B's search saved.
    got_c = morello.synthesize(morello.matmul(*c), db=path)
    assert got_c.cost == ctrl_c.cost == cold_cost(c)
    assert got_c.stats.specs_solved < ctrl_c.stats.specs_solved
    api.close_sessions()
    assert_db_check_passes(path)


# ---- d. kill -9 ------------------------------------------------------------------------

KILL_SIZES = (24, 32, 40, 48, 56)


def kill_campaign(tmp_path: Path, kills: int, seed: int, check_every_root: bool):
    """Kill ``kills`` searches of moderately sized matmuls with SIGKILL: the even ones at
    a random time in [0, typical runtime], the odd ones at a random time in the first
    0.1 s of their save (which takes 0.1 s or more: saves got faster, and kills later in
    one mostly found it done); before every third kill, one search
    runs to the end. Checks the file after each kill; returns the phases the kills hit."""
    rng = random.Random(seed)
    path = tmp_path / "killed.sqlite"
    # A file with committed results to begin with.
    r = run_outside(morello_cmd("synth", "matmul", "16", "16", "16", "-q", "--db",
                                   str(path)), capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    typical = 2.5  # seconds a search here takes, updated from those that reach the save
    phases = {"searching": 0, "saving": 0, "finished": 0}
    shapes = [(m, k, n) for m in KILL_SIZES for k in KILL_SIZES for n in KILL_SIZES]
    rng.shuffle(shapes)
    checked: set[str] = set()
    for i in range(kills):
        held = roots_in(path)
        if i % 3 == 2:  # a search left to finish, between kills: more roots at stake
            shape = next(s for s in shapes if spec_text(s) not in held)
            shapes.remove(shape)
            r = run_outside(morello_cmd("synth", "matmul", *map(str, shape), "-q",
                                           "--db", str(path)),
                               capture_output=True, text=True, timeout=TIMEOUT)
            assert r.returncode == 0, r.stderr
            held = roots_in(path)
            assert spec_text(shape) in held
        shape = next(s for s in shapes if spec_text(s) not in held)
        shapes.remove(shape)
        w = Watched(path, shape, TIMEOUT)
        if i % 2 == 0:
            deadline = w.t0 + rng.uniform(0, typical)
            while time.monotonic() < deadline and w.proc.poll() is None:
                time.sleep(0.005)
        else:
            w.wait_for_save(TIMEOUT)
            time.sleep(rng.uniform(0, 0.1))
        before = roots_in(path)  # committed before the kill
        saving = w.saving.is_set()
        if w.proc.poll() is None:
            w.proc.send_signal(signal.SIGKILL)
        rc = w.finish()
        if rc == 0:
            phases["finished"] += 1
        else:
            assert rc == -signal.SIGKILL, (rc, w.err.decode(errors="replace"))
            phases["saving" if saving else "searching"] += 1
        if w.saving_at is not None:
            typical = 0.7 * typical + 0.3 * (w.saving_at + 0.8)

        after = roots_in(path)  # the file opens
        lost = before - after
        assert not lost, f"kill {i} ({shape}) lost committed roots: {sorted(lost)}"
        assert_db_check_passes(path)
        assert_no_stray_files(path)
        by_text = {spec_text(s): s for s in
                   [(16, 16, 16)] + [(m, k, n) for m in KILL_SIZES for k in KILL_SIZES
                                     for n in KILL_SIZES]}
        unchecked = sorted(before - checked)
        sample = unchecked if check_every_root else unchecked[:1] + rng.sample(
            sorted(before), min(1, len(before)))
        for text in sample:
            assert_answered_from_file(path, by_text[text])
            checked.add(text)
    return phases


def test_kill_minus_9_never_corrupts_or_loses_saved_results(tmp_path):
    phases = kill_campaign(tmp_path, kills=8, seed=9, check_every_root=False)
    assert phases["searching"] + phases["saving"] >= 4, phases  # most kills hit a process


@pytest.mark.slow
def test_kill_minus_9_many_times(tmp_path):
    phases = kill_campaign(tmp_path, kills=40, seed=10, check_every_root=True)
    assert phases["saving"] >= 5, phases


# ---- e. SIGTERM and SIGHUP -------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP],
                         ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_save_what_was_solved(tmp_path, signum):
    path = tmp_path / "stopped.sqlite"
    spec = morello.matmul(256, 256, 256)
    t0 = time.monotonic()
    proc = popen_outside(morello_cmd("synth", "matmul", "256", "256", "256", "--db",
                                        str(path)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Wait until the search runs (its first progress line), and at least 1.5 s.
    err = b""
    while b"search:" not in err:
        chunk = proc.stderr.read1(4096)
        assert chunk, f"exited before searching: {err!r}"
        err += chunk
    time.sleep(max(0.0, 1.5 - (time.monotonic() - t0)))
    assert proc.poll() is None, "the search ended before the signal"
    proc.send_signal(signum)
    try:
        out, rest = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(
            f"{signal.Signals(signum).name} did not stop the search") from None
    err += rest
    assert proc.returncode == 130, (proc.returncode, err.decode(errors="replace"))
    assert b"interrupted" in err
    assert b"Traceback" not in err, err.decode(errors="replace")
    assert out == b""
    assert str(spec.canonical()) not in roots_in(path)
    assert dbmod.stats(path)["pages"] > 0
    assert_db_check_passes(path)
    assert_no_stray_files(path)
