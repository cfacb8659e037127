"""The persistent database: reuse across sessions and shapes; roots replay safely."""
from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import morello
from morello import api


def fresh_session():
    api.close_sessions()


def test_repeated_query_replays_its_root_without_search(tmp_path):
    db = tmp_path / "t.db"
    spec = morello.matmul(16, 8, 16)
    first = morello.synthesize(spec, db=db)
    fresh_session()
    again = morello.synthesize(spec, db=db)
    assert again.stats.specs_solved == 0
    assert again.impl == first.impl and again.cost == first.cost


def test_tampered_root_is_ignored_and_the_search_runs(tmp_path):
    import sqlite3

    db = tmp_path / "t.db"
    spec = morello.matmul(4, 4, 8)
    first = morello.synthesize(spec, db=db)
    fresh_session()
    with sqlite3.connect(db) as c:
        c.execute("UPDATE roots SET cost = cost + 1")
    c.close()
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

    extra = Kernel("NewKernel", PrimKind.MATMUL_ACCUM, lambda s, t: "never applies",
                   lambda s, t: 0, 0, lambda *a: None)
    from morello import identity

    table = KernelTable("avx2", (extra,) + avx2.TABLE.kernels, avx2.VECTOR_TYPES)
    monkeypatch.setattr(avx2, "TABLE", table)
    # A patch in memory leaves the code's files (the on-disk fingerprint's stamp) as
    # they are: compute the fingerprint afresh, as a changed morello would.
    monkeypatch.setattr(identity, "_fingerprint_path", lambda target: None)
    identity._remembered.cache_clear()
    fresh_session()


def test_results_of_another_action_table_are_kept_apart_in_one_file(tmp_path,
                                                                   monkeypatch):
    from morello import db as dbmod
    from morello import identity

    db = tmp_path / "t.db"
    before = morello.synthesize(morello.matmul(4, 4, 4), db=db)
    first = {c["actions"] for c in dbmod.stats(db)["contexts"]}
    _with_extra_kernel(monkeypatch)
    try:
        after = morello.synthesize(morello.matmul(4, 4, 4), db=db)
        # Its stored decisions index another action list: none of them is used.
        assert after.stats.specs_solved > 0 and after.cost == before.cost
        fresh_session()
        both = {c["actions"] for c in dbmod.stats(db)["contexts"]}
        matmuls = sorted(a for a in both if a.startswith("Matmul@"))
        assert first < both and len(matmuls) == 2
    finally:
        monkeypatch.undo()
        identity._remembered.cache_clear()
        fresh_session()
    # Back under the first action table, its own context answers.
    assert morello.synthesize(morello.matmul(4, 4, 4), db=db).stats.specs_solved == 0


def test_the_default_database_is_one_file_in_the_user_cache(tmp_path, monkeypatch):
    from morello import cli
    from morello import db as dbmod

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("MORELLO_CALIBRATION", "builtin")
    fresh_session()
    assert cli.main(["synth", "matmul", "2", "2", "2", "-q"]) == 0
    assert cli.main(["synth", "matmul", "2", "2", "2", "-q", "--threads", "2"]) == 0
    fresh_session()
    path = dbmod.default_path()
    assert path.parent == tmp_path / "morello" and path.exists()
    # Two targets (one and two threads), each with a context per family it reached.
    contexts = dbmod.stats(path)["contexts"]
    assert len({c["target"].split("@")[0] for c in contexts}) == 2
    assert sorted(c["actions"].split("@")[0] for c in contexts) == ["Fill", "Fill", "Matmul",
                                                                    "Matmul", "Move", "Move"]


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
    group, index = trace[0]
    for bad in ([group, 99999], [99, index], [group], [group, index, 0], [-1, 0]):
        with pytest.raises(MorelloError, match="stale action index"):
            replay(spec, AVX2, [bad] + trace[1:])


def test_merged_databases_answer_what_each_answered(tmp_path):
    from morello import db as dbmod

    a, b, out = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "out.sqlite"
    specs = [morello.matmul(8, 8, 8), morello.matmul(8, 16, 8)]
    costs = [morello.synthesize(specs[0], db=a).cost,
             morello.synthesize(specs[1], db=b).cost]
    two = morello.synthesize(specs[0], db=b, threads=2)  # another context in b
    fresh_session()
    result = dbmod.merge([a, b], out)
    assert result["pages_merged"] > 0 and result["roots"] == 3  # shared sub-Specs' pages
    assert dbmod.check(out)["ok"]
    for spec, cost in zip(specs, costs):
        again = morello.synthesize(spec, db=out)
        assert again.stats.specs_solved == 0 and again.cost == cost
    assert morello.synthesize(specs[0], db=out, threads=2).cost == two.cost
    for path in (a, b, out):  # searches' and merges' pages are stored in search order
        assert _pages_out_of_exact_order(path) == 0
    # Without their roots, the merged pages alone answer every sub-Spec.
    import sqlite3

    fresh_session()
    with sqlite3.connect(out) as c:
        c.execute("DELETE FROM roots")
    c.close()
    again = morello.synthesize(specs[1], db=out)
    assert again.stats.specs_solved == 0 and again.cost == costs[1]


def test_db_stats_reports_how_the_last_search_used_the_database(tmp_path):
    from morello import db as dbmod

    db = tmp_path / "t.sqlite"
    morello.synthesize(morello.matmul(16, 16, 16), db=db)
    fresh_session()
    morello.synthesize(morello.matmul(16, 16, 32), db=db)
    fresh_session()
    last = dbmod.stats(db)["last_search"]
    assert last["answered_by_database"] > 0 and last["page_loads"] > 0
    assert 0 < last["database_hit_rate"] < 1


def test_context_fingerprints_are_remembered_under_a_stamp_of_the_code(tmp_path,
                                                                       monkeypatch):
    """A fresh process reads each family's fingerprint from the cache dir; a damaged or
    planted file is ignored and rewritten; a changed module changes the stamp."""
    from morello import identity
    from morello.memory import AVX2

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    identity._remembered.cache_clear()
    try:
        want = "Matmul@" + identity.family_fingerprint(AVX2, "Matmul")
        assert identity.context_actions(AVX2, "Matmul") == want
        path = identity._fingerprint_path(AVX2)
        assert path is not None and json.loads(path.read_text())["Matmul"] == want[7:]
        assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no tmp
        for bad in ("", "not json", '{"Matmul": "0000000"}', '["x"]', "x" * 10_000,
                    '{"Matmul": 1}'):
            path.write_text(bad)
            identity._remembered.cache_clear()
            assert identity.context_actions(AVX2, "Matmul") == want
            assert json.loads(path.read_text())["Matmul"] == want[7:]
        with pytest.raises(ValueError):
            identity.context_actions(AVX2, "Compose:Nonsense@0")
        real_stat = identity.os.stat

        def touched(p, *a, **k):  # as if kernels/avx2.py had been edited
            st = real_stat(p, *a, **k)
            if str(p).endswith("avx2.py"):
                return os.stat_result((*st[:6], st[6] + 1, *st[7:]))
            return st

        monkeypatch.setattr(identity.os, "stat", touched)
        assert identity._fingerprint_path(AVX2) != path
    finally:
        identity._remembered.cache_clear()


def test_pages_of_many_parts_are_compacted_and_keep_every_result(tmp_path, monkeypatch):
    """Ten searches append parts to the same small pages; the MAX_PARTS-th save of a page
    compacts its parts into one (built in bulk); the file checks clean and later queries
    get the costs a search without a database finds."""
    import sqlite3

    from morello import db as dbmod
    from morello.store import file as store_file

    monkeypatch.setattr(store_file, "MAX_PARTS", 3)
    db = tmp_path / "t.sqlite"
    for n in range(1, 11):
        morello.synthesize(morello.matmul(n, n + 1, 2), db=db)
        fresh_session()
    conn = sqlite3.connect(db)
    parts = [c for (c,) in conn.execute("SELECT count(*) FROM pages GROUP BY tbl, page")]
    conn.close()
    # The pages of the smallest sizes hold results of all ten searches, in at most 2 parts.
    assert max(parts) < 3
    assert dbmod.check(db)["ok"]
    for s in [(3, 5, 2), (7, 9, 3), (11, 4, 2)]:
        got = morello.synthesize(morello.matmul(*s), db=db)
        assert got.cost == morello.synthesize(morello.matmul(*s), db=False).cost
        fresh_session()


def _simulate_saves(dbmod, saves, max_parts):
    """Parts and boxes rewritten after a sequence of saves of ``saves`` fresh boxes."""
    parts: list[tuple[int, int]] = []  # (version, nboxes), newest first
    rewritten = 0
    for version, fresh in enumerate(saves):
        merged = (dbmod._merged_versions(parts, fresh)
                  if len(parts) + 1 >= max_parts else [])
        assert merged == [v for v, _ in parts[:len(merged)]]  # the newest ones
        n = fresh + sum(b for _, b in parts[:len(merged)])
        rewritten += n if merged else 0
        parts = [(version, n)] + parts[len(merged):]
        assert len(parts) < max_parts
    return parts, rewritten


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=300), st.integers(2, 10))
def test_merges_take_the_newest_parts_and_keep_fewer_than_max_parts(saves, max_parts):
    from morello.store import file as dbmod

    old = dbmod.MAX_PARTS
    dbmod.MAX_PARTS = max_parts  # (hypothesis runs many examples per fixture)
    try:
        parts, _ = _simulate_saves(dbmod, saves, max_parts)
    finally:
        dbmod.MAX_PARTS = old
    assert sum(n for _, n in parts) == sum(saves)


def test_small_saves_rewrite_each_box_a_few_times_not_once_per_compaction(monkeypatch):
    """500 saves of 10 boxes into one page: each box is rewritten about 4 times
    (compacting the whole page at every MAX_PARTS-th save rewrote each about 36 times)."""
    from morello.store import file as dbmod

    monkeypatch.setattr(dbmod, "MAX_PARTS", 8)
    _, rewritten = _simulate_saves(dbmod, [10] * 500, 8)
    assert rewritten <= 6 * 10 * 500


def test_a_small_save_does_not_rewrite_a_large_part():
    from morello.store import file as dbmod

    stored = [(9, 40), (8, 30_000)] + [(v, 10 ** 6) for v in range(7, 7 - dbmod.MAX_PARTS, -1)]
    stored = stored[:dbmod.MAX_PARTS - 1]
    assert dbmod._merged_versions(stored, 25) == [9]
    # Box counts are read from the file: nonsense ones steer the choice, never break it.
    assert dbmod._merged_versions([(3, None), (2, -7), (1, "x")], 0) == [3, 2, 1]
    # A page with more parts than MAX_PARTS (written so by another program) is brought
    # back under it by one save, however the sizes grow.
    many = [(v, 4 ** (20 - v)) for v in range(20, 8, -1)]
    assert len(dbmod._merged_versions(many, 1)) == len(many) + 2 - dbmod.MAX_PARTS


def _pages_out_of_exact_order(path) -> int:
    """How many stored parts have their boxes out of the order of their exact
    coordinates (the order a FrozenPage searches: one stored so is not sorted again)."""
    import sqlite3

    from morello import pageblob
    from morello.store import validate
    from morello.store.format import NVALUES

    bad = 0
    with sqlite3.connect(path) as c:
        tables = {tid: (validate._table_key(key), ndim)
                  for tid, key, ndim in c.execute("SELECT id, key, ndim FROM tables")}
        for tid, data in c.execute("SELECT tbl, data FROM pages"):
            key, ndim = tables[tid]
            lo, _, _ = pageblob.decode(data, ndim, NVALUES)
            rows = [tuple(r) for r in lo[:, list(validate._key_dims(key)[1])].tolist()]
            bad += rows != sorted(rows)
    c.close()
    return bad
