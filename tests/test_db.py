"""The persistent database: reuse across sessions and shapes; roots replay safely."""
from __future__ import annotations

import json

import pytest

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


def _with_extra_kernel(monkeypatch):
    """Add a kernel to the AVX2 table (as a newer morello would), in this process."""
    from morello.kernels import avx2
    from morello.kernels.base import Kernel, KernelTable
    from morello.kinds import PrimKind
    from morello.rewrites import actions_fingerprint

    extra = Kernel("NewKernel", PrimKind.MATMUL_ACCUM, lambda s, t: "never applies",
                   lambda s, t: 0, 0, lambda *a: None)
    table = KernelTable("avx2", (extra,) + avx2.TABLE.kernels, avx2.VECTOR_TYPES)
    monkeypatch.setattr(avx2, "TABLE", table)
    actions_fingerprint.cache_clear()
    fresh_session()


def test_a_database_written_before_a_kernel_was_added_is_refused(tmp_path, monkeypatch,
                                                                  capsys):
    from morello import cli
    from morello.errors import DatabaseError
    from morello.rewrites import actions_fingerprint

    db = tmp_path / "t.db"
    morello.synthesize(morello.matmul(4, 4, 4), db=db)
    _with_extra_kernel(monkeypatch)
    try:
        with pytest.raises(DatabaseError, match="another action table"):
            morello.synthesize(morello.matmul(4, 4, 4), db=db)
        assert cli.main(["synth", "matmul", "4", "4", "4", "-q", "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "another action table" in err
    finally:
        actions_fingerprint.cache_clear()
        fresh_session()


def test_the_default_database_starts_fresh_beside_one_of_another_action_table(
        tmp_path, monkeypatch, capsys):
    from morello import cli
    from morello import db as dbmod
    from morello.memory import AVX2
    from morello.rewrites import actions_fingerprint

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("MORELLO_CALIBRATION", "builtin")
    old = dbmod.default_path(AVX2)
    assert cli.main(["synth", "matmul", "2", "2", "2", "-q"]) == 0
    assert old.exists()
    _with_extra_kernel(monkeypatch)
    try:
        new = dbmod.default_path(AVX2)
        assert new != old and not new.exists()
        assert cli.main(["synth", "matmul", "2", "2", "2"]) == 0
        assert new.exists() and old.exists()
        assert f"{old} was written under another action table" in capsys.readouterr().err
    finally:
        actions_fingerprint.cache_clear()
        fresh_session()


def test_replaying_a_stale_action_index_raises_a_clear_error():
    from morello.errors import MorelloError
    from morello.impl import replay
    from morello.memory import AVX2

    spec = morello.matmul(4, 4, 4)
    trace = morello.synthesize(spec, db=False).impl.trace()
    with pytest.raises(MorelloError, match="stale action index 99999"):
        replay(spec, AVX2, [99999] + trace[1:])
    with pytest.raises(MorelloError, match="stale action index"):
        replay(spec, AVX2, [0] * len(trace))
