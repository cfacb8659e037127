"""Contexts per table family: a change a family cannot reach leaves its stored results
valid, and files written with one context for every family (before contexts per family)
are migrated in place, with no search."""
from __future__ import annotations

import sqlite3

import pytest

import morello
from morello import db as dbmod
from morello import identity
from morello.api import close_sessions
from morello.memory import AVX2


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setenv("MORELLO_SHIPPED_DB", "off")
    close_sessions()
    yield
    close_sessions()
    identity._remembered.cache_clear()


def _as_legacy(path, actions: str | None = None) -> None:
    """Rewrite ``path`` as a morello of one context per target wrote it: every table and
    root in one context named by the legacy fingerprint (or ``actions``)."""
    con = sqlite3.connect(path)
    with con:
        for (target,) in con.execute("SELECT DISTINCT target FROM contexts").fetchall():
            fp = actions or identity.legacy_fingerprint(AVX2)
            con.execute("INSERT INTO contexts(target, actions) VALUES (?, ?)", (target, fp))
            (new,) = con.execute("SELECT id FROM contexts WHERE target = ? AND actions = ?",
                                 (target, fp)).fetchone()
            old = [i for (i,) in con.execute("SELECT id FROM contexts WHERE target = ? AND "
                                             "id != ?", (target, new))]
            for i in old:
                con.execute("UPDATE tables SET ctx = ? WHERE ctx = ?", (new, i))
                con.execute("UPDATE roots SET ctx = ? WHERE ctx = ?", (new, i))
                con.execute("DELETE FROM contexts WHERE id = ?", (i,))
    con.close()


def _actions(path) -> list[str]:
    return sorted(c["actions"] for c in dbmod.stats(path)["contexts"])


SPECS = [morello.matmul(8, 8, 8), morello.softmax(8, 16),
         morello.attention(8, 8, serial=True)]


def test_a_legacy_file_is_migrated_on_opening_and_answers_without_a_search(tmp_path):
    path = tmp_path / "t.sqlite"
    costs = [morello.synthesize(s, db=path).cost for s in SPECS]
    close_sessions()
    families = _actions(path)
    _as_legacy(path)
    assert all("@" not in a for a in _actions(path))
    got = [morello.synthesize(s, db=path) for s in SPECS]
    assert [g.stats.specs_solved for g in got] == [0, 0, 0]
    assert [g.cost for g in got] == costs
    assert _actions(path) == families  # every table and root in its family's context
    roots = sqlite3.connect(path).execute("SELECT COUNT(*) FROM roots").fetchone()[0]
    assert roots == len(SPECS)


def test_a_legacy_context_of_another_action_table_is_left_alone(tmp_path):
    path = tmp_path / "t.sqlite"
    morello.synthesize(SPECS[0], db=path)
    close_sessions()
    _as_legacy(path, actions="0badc0de")
    got = morello.synthesize(SPECS[0], db=path)
    assert got.stats.specs_solved > 0  # not its results: searched again
    assert "0badc0de" in _actions(path)  # kept, for the morello that wrote it


def test_a_family_revised_since_is_not_migrated(tmp_path, monkeypatch):
    """Legacy results of a family whose revision moved (and of the families reaching
    it: attention holds matmuls) were made by its older decisions: left behind and
    searched again; the softmax's still answer."""
    path = tmp_path / "t.sqlite"
    costs = [morello.synthesize(s, db=path).cost for s in SPECS]
    close_sessions()
    _as_legacy(path)
    monkeypatch.setattr(identity, "REVISIONS", {**identity.REVISIONS, "Matmul": 99})
    monkeypatch.setattr(identity, "_fingerprint_path", lambda target: None)
    identity._remembered.cache_clear()
    moved = dbmod.migrate(path)
    assert moved["roots"] == 1 and moved["roots_dropped"] == 2
    got = [morello.synthesize(s, db=path) for s in SPECS]
    assert [g.stats.specs_solved > 0 for g in got] == [True, False, True]
    assert [g.cost for g in got] == costs  # the revision here changed no decision


def test_migrating_twice_moves_nothing_more(tmp_path):
    path = tmp_path / "t.sqlite"
    morello.synthesize(SPECS[2], db=path)
    close_sessions()
    _as_legacy(path)
    first = dbmod.migrate(path)
    assert first["contexts"] == 1 and first["roots"] == 1 and first["tables"] > 3
    assert dbmod.migrate(path) == {"contexts": 0, "tables": 0, "roots": 0,
                                   "roots_dropped": 0}
    assert dbmod.check(path)["ok"] and dbmod.check(path)["roots"] == 1


def test_a_kernel_a_family_cannot_reach_leaves_its_stored_results_valid(tmp_path,
                                                                       monkeypatch):
    """As a newer morello with one more softmax kernel: the stored matmul is answered
    from its context, the stored softmax is searched again in a new one."""
    from morello.kernels import avx2
    from morello.kernels.base import Kernel, KernelTable
    from morello.kinds import PrimKind

    path = tmp_path / "t.sqlite"
    for s in SPECS[:2]:
        morello.synthesize(s, db=path)
    close_sessions()
    extra = Kernel("NewKernel", PrimKind.SOFTMAX, lambda s, t: "never applies",
                   lambda s, t: 0, 0, lambda *a: None)
    monkeypatch.setattr(avx2, "TABLE", KernelTable("avx2", (extra,) + avx2.TABLE.kernels,
                                                   avx2.VECTOR_TYPES))
    monkeypatch.setattr(identity, "_fingerprint_path", lambda target: None)
    identity._remembered.cache_clear()
    assert morello.synthesize(SPECS[0], db=path).stats.specs_solved == 0
    assert morello.synthesize(SPECS[1], db=path).stats.specs_solved > 0
