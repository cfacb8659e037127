"""The persistent database: reuse across sessions and shapes; roots replay safely."""
from __future__ import annotations

import json

import morello
from morello import api


def fresh_session():
    api._SESSIONS.clear()


def test_repeated_query_replays_its_root_without_search(tmp_path):
    db = tmp_path / "t.db"
    spec = morello.matmul(16, 8, 16)
    first = morello.synthesize(spec, db=db)
    fresh_session()
    again = morello.synthesize(spec, db=db)
    assert again.stats.specs_solved == 0
    assert again.impl == first.impl and again.cost == first.cost


def test_tampered_root_is_ignored_and_the_search_runs(tmp_path):
    db = tmp_path / "t.db"
    spec = morello.matmul(4, 4, 8)
    first = morello.synthesize(spec, db=db)
    lines = db.read_bytes().split(b"\n", 2)
    roots = json.loads(lines[1])
    for r in roots.values():
        r["cost"] += 1
    db.write_bytes(lines[0] + b"\n" + json.dumps(roots).encode() + b"\n" + lines[2])
    fresh_session()
    again = morello.synthesize(spec, db=db)
    assert again.cost == first.cost


def test_larger_shape_reuses_sub_results_of_a_smaller_one(tmp_path):
    db = tmp_path / "t.db"
    morello.synthesize(morello.matmul(16, 16, 16), db=db)
    fresh_session()
    warm = morello.synthesize(morello.matmul(32, 32, 32), db=db)
    fresh_session()
    cold = morello.synthesize(morello.matmul(32, 32, 32), db=False)
    assert warm.cost == cold.cost
    assert warm.stats.specs_solved < cold.stats.specs_solved
