"""``morello precompute``: the plan's order, equality with on-demand searches (serially and
on Dask), resuming after kill -9, atomic stage merges, and the command line's errors."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import morello
from morello import precompute as pc
from morello.errors import DatabaseError, MorelloError
from morello.store import exchange


def _goals(p: pc.Plan) -> list[tuple[int, ...]]:
    return [g for s in p.stages for t in s for g in t]


def _roots(path: Path) -> dict[tuple[str, str], int]:
    with sqlite3.connect(path) as c:
        return {(t, s): cost for t, s, cost in c.execute(
            "SELECT contexts.target, spec, cost FROM roots JOIN contexts ON ctx = id")}


def _morello(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "morello", *args], capture_output=True,
                          text=True, **kw)


@given(st.lists(st.integers(1, 24), min_size=2, max_size=3),
       st.sampled_from(pc.GRIDS))
def test_every_goal_s_smaller_points_are_in_its_cell_or_an_earlier_stage(bounds, grid):
    fam = "matmul" if len(bounds) == 3 else "softmax"
    p = pc.plan(fam, bounds, grid)
    stage_of = {g: s for s, tasks in enumerate(p.stages) for t in tasks for g in t}
    axes = [pc.grid_values(b, grid) for b in bounds]
    assert len(stage_of) == p.goals == len(_goals(p))  # each point once
    assert p.goals == __import__("math").prod(len(a) for a in axes)
    cell = {g: tuple(v.bit_length() - 1 for v in g) for g in stage_of}
    for g, s in stage_of.items():
        for h, t in stage_of.items():
            if all(a <= b for a, b in zip(h, g)):
                assert t < s or cell[h] == cell[g], (h, g)


def test_a_serial_precompute_answers_every_goal_as_an_on_demand_search_does(tmp_path):
    db = tmp_path / "pc.sqlite"
    p = pc.plan("matmul", [4, 4, 4], "all")
    figures = pc.run(p, db)
    assert figures["goals"] == p.goals == 64 and figures["specs_solved"] > 0
    for sizes in _goals(p):
        got = morello.synthesize(p.spec(sizes), db=db)
        fresh = morello.synthesize(p.spec(sizes), db=False)
        assert got.stats.specs_solved == 0
        assert got.cost == fresh.cost, sizes
    again = pc.run(p, db)
    assert again["stages_skipped"] == len(p.stages) and again["goals"] == 0


def test_dask_workers_give_the_serial_database_s_answers(tmp_path):
    distributed = pytest.importorskip("distributed")
    p = pc.plan("matmul", [8, 8, 4], "pow2", tasks_per_stage=4, min_task_goals=1)
    serial, dask = tmp_path / "serial.sqlite", tmp_path / "dask.sqlite"
    pc.run(p, serial)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        figures = pc.run(p, dask, client=client)
    assert figures["tasks"] == p.tasks > len(p.stages)  # stages were cut into tasks
    assert _roots(dask) == _roots(serial)
    with sqlite3.connect(dask) as c:  # one part per page: the stage merges folded them
        assert c.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM pages "
                         "GROUP BY tbl, page)").fetchone()[0] == 1
    for sizes in _goals(p):
        got = morello.synthesize(p.spec(sizes), db=dask)
        assert got.stats.specs_solved == 0
        assert got.cost == morello.synthesize(p.spec(sizes), db=False).cost


def test_a_precompute_killed_mid_run_continues_to_the_same_content(tmp_path):
    args = ["precompute", "matmul", "--max", "8", "8", "8", "--dims", "all", "--serial",
            "-q"]
    whole = tmp_path / "whole.sqlite"
    assert _morello(*args, "--db", str(whole), cwd=tmp_path).returncode == 0
    cut = tmp_path / "cut.sqlite"
    p = pc.plan("matmul", [8, 8, 8], "all")
    proc = subprocess.Popen([sys.executable, "-m", "morello", *args, "--db", str(cut)],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if pc.stages_done(p, cut) >= 3:
                break
        except DatabaseError:
            pass  # the file is being created
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = pc.stages_done(p, cut)
    assert 0 < done < len(p.stages), "the run ended before the kill: make it longer"
    r = _morello(*args, "--db", str(cut), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stages_skipped"] == done
    assert _roots(cut) == _roots(whole)
    r = _morello("bench", "matmul", "7", "5", "8", "--db", str(cut), "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["specs_solved"] == 0


def test_a_stage_s_merge_is_all_or_nothing(tmp_path, monkeypatch):
    db = tmp_path / "pc.sqlite"
    p = pc.plan("matmul", [2, 2, 2], "pow2")
    pc.run(p, db)
    other = tmp_path / "other.sqlite"
    morello.synthesize(morello.matmul(3, 5, 6), db=other)
    before = _roots(db)
    with sqlite3.connect(db) as c:
        parts = c.execute("SELECT count(*) FROM pages").fetchone()[0]

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(exchange.pageblob, "encode", boom)  # dies mid-transaction
    with pytest.raises(KeyboardInterrupt):
        exchange.absorb(db, [other], {"precompute:x": json.dumps({"stages_done": 9})})
    monkeypatch.undo()
    assert _roots(db) == before
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM pages").fetchone()[0] == parts
        assert c.execute("SELECT count(*) FROM meta WHERE name = 'precompute:x'"
                         ).fetchone()[0] == 0
    exchange.absorb(db, [other], {"precompute:x": "{}"})
    assert set(before) < set(_roots(db))


@pytest.mark.parametrize("args, message", [
    (["conv", "--max", "4"], "invalid choice"),
    (["matmul", "--max", "4", "4"], "matmul takes --max M K N (3 sizes), got 2"),
    (["softmax", "--max", "4", "4", "--dtypes", "f32,f32"], "--dtypes is for matmul only"),
    (["matmul", "--max", "4", "0", "4"], "every --max size must be >= 1"),
    (["matmul", "--max", "4", "4", "4", "--dtypes", "f32,q9,f32"], "q9"),
    (["matmul", "--max", "4", "4", "4", "--workers", "0"], "--workers must be >= 1"),
    (["softmax", "--max", "4096", "4096"], "is 16,777,216 Specs: name --dims all"),
])
def test_bad_precomputes_get_one_line(tmp_path, args, message):
    r = _morello("precompute", *args, "--db", str(tmp_path / "x.sqlite"), cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.sqlite").exists()


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    db = tmp_path / "x.sqlite"
    r = _morello("precompute", "softmax", "--max", "64", "64", "--dims", "pow2", "--serial",
                 "--dry-run", "--samples", "1", "--json", "--db", str(db), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["specs"] == 49 and out["stages"] == 13 and out["stages_done"] == 0
    assert out["estimate_serial_seconds_at_most"] > 0
    assert not db.exists()


def test_plan_refuses_an_unknown_family():
    with pytest.raises(MorelloError, match="unknown family"):
        pc.plan("conv3d", [4], "all")
