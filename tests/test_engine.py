"""The compiled core against the Python definitions, for every kind of the kind table:
native rows equal the Python rewrites row for row, the DP equals the pure-Python DP,
points equal ``coords.spec_point``, and records round-trip at their capacities."""
from __future__ import annotations

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from strategies import gl_matmul_spec_st, prim_spec_st, small_limits_st, spec_st

import morello
from morello._graph import SpecGraph
from morello.bridge import Bridge
from morello.coords import spec_key, spec_point
from morello.memory import AVX2, AVX512, LEVELS
from morello.rewrites import actions
from morello.search import Engine, logical


def python_rows(spec, target=AVX2):
    rows = []
    for idx, act in enumerate(actions(spec, target)):
        exp = act.expand(spec, target)
        if exp is not None:
            rows.append((idx, exp.const, tuple(exp.own),
                         tuple(logical(c) for c in exp.children), tuple(exp.coefs)))
    return rows


def native_rows(eng: Engine, i: int):
    return [(idx, const, own, tuple(eng.spec_of(c) for c in kids), coefs)
            for idx, const, own, kids, coefs in eng.solver.rows_of(i)]


@settings(max_examples=150)
@given(spec_st(max_dim=6, ranks=(1, 2, 3, 4)), st.sampled_from([AVX2, AVX512]))
def test_native_rows_equal_python_rewrites_for_every_kind(spec, target):
    eng = Engine(target)
    i = eng.id_of(logical(spec))
    note(f"{target.name} {spec}")
    assert native_rows(eng, i) == python_rows(logical(spec), target)


@pytest.mark.parametrize("spec", [
    morello.matmul(2, 3, 5), morello.matmul(4, 4, 4, batch=2, serial=False),
    morello.matmul(9, 2, 16), morello.add(5, 17, serial=False),
    morello.reduce_max(6, 9, dim=1), morello.reduce_sum(3, 4, 10, dim=0),
    morello.broadcast(7, 12, dim=0), morello.relu(33),
], ids=str)
def test_every_spec_a_search_meets_expands_natively_as_in_python(spec):
    eng = Engine(AVX2)
    sol, _ = eng.solve(spec)
    assert sol is not None
    assert eng.graph.n_ids > 20
    for i in range(eng.graph.n_ids):
        assert native_rows(eng, i) == python_rows(eng.spec_of(i)), eng.spec_of(i)


_tiny_st = st.one_of(
    prim_spec_st(max_dim=3, limits=small_limits_st()).filter(lambda s: s.volume <= 6),
    gl_matmul_spec_st(max_dim=2, limits=small_limits_st()).filter(lambda s: s.volume <= 4),
)


@settings(max_examples=60, deadline=None)
@given(_tiny_st, st.sampled_from([AVX2, AVX512]))
def test_cython_dp_equals_pure_python_dp_for_every_kind(spec, target):
    from morello.reference_dp import memoized_optimum

    note(f"{target.name} {spec}")
    ref = memoized_optimum(spec, target)
    sol, _ = Engine(target).solve(spec)
    if ref is None:
        assert sol is None
        return
    main, peaks, depth, action = ref
    assert (sol.cost.main, sol.cost.peaks, sol.cost.depth, sol.action) == (
        main, peaks, depth, action)


@pytest.mark.parametrize("shape", [(1, 4, 4, 4), (2, 3, 5, 7), (1, 8, 16, 8)])
def test_native_and_python_engines_find_the_same_optimum(shape):
    b, m, k, n = shape
    spec = morello.matmul(m, k, n, batch=b)
    fast, _ = Engine(AVX2).solve(spec)
    slow, _ = Engine(AVX2, native=False).solve(spec)
    assert fast == slow


@pytest.mark.parametrize("spec", [morello.matmul(3, 4, 5, batch=2),
                                  morello.reduce_max(5, 12, dim=0),
                                  morello.add(3, 2, 9)], ids=str)
def test_core_points_equal_coords_spec_point(spec):
    eng = Engine(AVX2)
    sol, _ = eng.solve(spec)
    assert sol is not None
    limits = AVX2.max_limits()
    keys = {v: k for k, v in eng._table_index.items()}
    for i in range(eng.graph.n_ids):
        s = eng.spec_of(i).with_limits(limits)
        table, pt = eng.graph.point_of(i, limits.units)
        assert keys[table] == spec_key(s)
        assert pt == spec_point(s, AVX2)


def _graph(max_rank: int, max_operands: int) -> SpecGraph:
    g = SpecGraph(max_rank, max_operands, 2, [lvl.counts_registers for lvl in LEVELS])
    # One form at the full capacity: every operand indexes every Spec dim.
    g.add_form(0, rank=max_rank, native=True, member=-1, reads=range(max_operands - 1),
               writes=[max_operands - 1], out=max_operands - 1,
               outdims=list(range(max_rank)), row_dim=-1, accum=-1, fill=-1, splits=[],
               moves=[0] * max_operands,
               operand_dims=[[(d, 0) for d in range(max_rank)]] * max_operands,
               kernels=[(0, 0)])
    for tid in range(10):
        g.set_tensor(tid, True, False, -1, 1, 5, (4, tid, 0, 0))
    return g


# Sizes up to 2^50 are allowed: records whose fields all fit 32 bits are interned packed,
# the others in a plain map (SpecGraph.intern); draw both, and sizes around 2^31.
_SIZE = st.one_of(st.integers(1, 8), st.integers((1 << 31) - 2, (1 << 31) + 1),
                  st.integers(1, 1 << 40))


@given(st.lists(st.tuples(st.lists(_SIZE, min_size=7, max_size=7),
                          st.lists(st.integers(0, 9), min_size=4, max_size=4),
                          st.booleans()), min_size=1, max_size=60))
def test_four_operand_rank_seven_records_round_trip(records):
    g = _graph(7, 4)
    ids = {}
    for shape, tids, serial in records:
        i = g.intern_spec(0, shape, tids, serial)
        assert ids.setdefault((tuple(shape), tuple(tids), serial), i) == i
        assert g.record(i) == (0, tuple(shape), tuple(tids), serial)
    assert g.n_ids == len(ids)
    for (shape, tids, serial), i in ids.items():
        assert g.intern_spec(0, list(shape), list(tids), serial) == i


def test_the_index_finds_every_record_after_it_grew():
    """20,000 records, packed and wide ones mixed: the index grows several times (from
    1024 slots, at 3/4 full) and still finds each, with its first id."""
    g = _graph(7, 4)
    recs = [([1 + i % 97, 1 + i // 97, 3, 4, 5, 6, (1 << 40) if i % 7 == 0 else 7],
             [i % 10, 0, 1, 2], bool(i % 2)) for i in range(20_000)]
    ids = [g.intern_spec(0, *r) for r in recs]
    assert ids == list(range(len(recs)))
    assert [g.intern_spec(0, *r) for r in recs] == ids
    assert g.record(12_345) == (0, tuple(recs[12_345][0]), tuple(recs[12_345][1]),
                                recs[12_345][2])


def test_records_beyond_the_capacities_are_refused_with_the_limit_named():
    g = _graph(7, 4)
    with pytest.raises(ValueError, match="rank 7"):
        g.intern_spec(0, [1] * 8, [0] * 4, True)
    with pytest.raises(ValueError, match="4 operands"):
        g.intern_spec(0, [1] * 7, [0] * 5, True)
    with pytest.raises(ValueError, match="max_rank 7"):
        g.add_form(1, rank=8, native=True, member=-1, reads=[], writes=[0], out=0,
                   outdims=[], row_dim=-1, accum=-1, fill=-1, splits=[], moves=[0],
                   operand_dims=[[(0, 0)]], kernels=[])
    with pytest.raises(ValueError, match="max_kernels"):
        g.add_form(1, rank=1, native=True, member=-1, reads=[], writes=[0], out=0,
                   outdims=[0], row_dim=-1, accum=-1, fill=-1, splits=[], moves=[1],
                   operand_dims=[[(0, 0)]], kernels=[(0, 0)] * 3)
    with pytest.raises(ValueError, match="HARD_MAX_RANK"):
        SpecGraph(17, 2, 1, [True])
    # A point's size is checked per form: rank 7 with 3 operands fits, with 8 it does not.
    wide = SpecGraph(16, 8, 1, [True] * 5)
    form = dict(native=True, member=-1, reads=[], writes=[0], out=0, outdims=[],
                row_dim=-1, accum=-1, fill=-1, splits=[], kernels=[])
    wide.add_form(0, rank=7, moves=[0] * 3, operand_dims=[[(0, 0)]] * 3, **form)
    with pytest.raises(ValueError, match="HARD_MAX_POINT"):
        wide.add_form(1, rank=7, moves=[1] * 8, operand_dims=[[(0, 0)]] * 8, **form)


def test_stored_pages_reproduce_results_in_a_new_engine(tmp_path):
    from morello.db import Store

    spec = morello.matmul(8, 5, 16)
    store = Store(tmp_path / "t.sqlite", AVX2)
    first = Engine(AVX2, store=store)
    sol, _ = first.solve(spec)
    assert store.save(first.pages, first.table_keys, {}, None, first.store_ids,
                      first.persist) > 0
    second = Engine(AVX2, store=Store(tmp_path / "t.sqlite", AVX2))
    again, stats = second.solve(spec)
    assert again == sol
    assert stats.specs_solved == 0
    assert second.pages.loads > 0
    # Every node of the optimal Impl is answered by the tables alone.
    from morello.impl import reconstruct

    assert reconstruct(spec, AVX2, second.lookup) == reconstruct(spec, AVX2, first.lookup)


@pytest.mark.parametrize("shape", [(1, 2, 2, 2), (1, 3, 5, 2), (2, 4, 1, 4), (1, 1, 7, 8)])
def test_cython_engine_equals_pure_python_dp(shape):
    from morello.reference_dp import memoized_optimum

    b, m, k, n = shape
    spec = morello.matmul(m, k, n, batch=b)
    main, peaks, depth, action = memoized_optimum(spec, AVX2)
    sol, _ = Engine(AVX2).solve(spec)
    assert (sol.cost.main, sol.cost.peaks, sol.cost.depth, sol.action) == (
        main, peaks, depth, action)


@pytest.mark.parametrize("target", ["avx2", "avx512"])
def test_cython_engine_equals_pure_python_dp_for_bf16_x_w(target):
    """x.W with bf16 weights where WidenAxpySweep and its loop-nest rival both apply."""
    from morello.memory import parse_target
    from morello.reference_dp import memoized_optimum

    tgt = parse_target(target)
    spec = morello.matmul(1, 8, 128, dtypes=("f32", "bf16", "f32"))
    main, peaks, depth, action = memoized_optimum(spec, tgt)
    sol, _ = Engine(tgt).solve(spec)
    assert (sol.cost.main, sol.cost.peaks, sol.cost.depth, sol.action) == (
        main, peaks, depth, action)


def test_kernel_level_hints_are_necessary_conditions():
    """Every kernel's ``levels`` and ``dtypes`` (which the core tests before asking
    Python) hold on every Spec its check accepts, over the Specs searches of several
    kinds reach, on both targets: the hints never hide a kernel that would apply."""
    from morello.memory import AVX512, parse_target

    for target in ("avx2", "avx512"):
        tgt = parse_target(target)
        eng = Engine(tgt)
        for spec in (morello.matmul(8, 16, 24), morello.softmax(3, 40),
                     morello.reduce_sum(4, 24, dim=1), morello.add(4, 40),
                     morello.matmul(1, 32, 8, dtypes=("f32", "bf16", "f32")),
                     morello.matmul(1, 64, 32, dtypes=("f32", "bf16", "f32")),
                     morello.matmul(1, 16, 128, dtypes=("f32", "bf16", "f32")),
                     morello.matmul(6, 8, 16, dtypes="u8,s8,s32", target=target),
                     morello.matmul(6, 8, 16, dtypes="u8,s8,s32", saturate=True)):
            eng.solve(spec.canonical())
        checked = 0
        for spec in eng.specs:
            for k in eng.kernels.for_kind(spec.kind):
                if k.check(spec, tgt) is None:
                    assert k._level_reason(spec) is None, (k.name, str(spec))
                    checked += 1
        assert checked > 50, checked
        assert tgt is not AVX512 or any(k.name.endswith("16") for k in eng.kernels.kernels)


def _saved_pages(path):
    import sqlite3

    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT tbl, page, version, nboxes, data FROM pages "
                           "ORDER BY tbl, page, version").fetchall()
    finally:
        con.close()


def test_persist_with_the_row_thread_writes_what_one_thread_writes(tmp_path):
    """``persist`` builds page rows on a second thread (more pages than it may run
    ahead of the writer, so it also waits for it); the file is byte for byte the one a
    single thread writes, and the Engine then holds nothing more to persist."""
    from morello._persist import PERSIST_AHEAD, persist
    from morello.db import Store

    spec = morello.matmul(48, 40, 56)
    written = {}
    for threaded, ahead in ((False, 1), (True, PERSIST_AHEAD), (True, 1)):
        path = tmp_path / f"t{int(threaded)}-{ahead}.sqlite"
        store = Store(path, AVX2)
        eng = Engine(AVX2, store=store)
        eng.solve(spec)
        counts = []
        store.save(eng.pages, eng.table_keys, {}, None, eng.store_ids,
                   lambda flush, e=eng, t=threaded, a=ahead, c=counts:
                   c.append(persist(e.solver, flush, t, a)))
        assert counts[0] > 0 and persist(eng.solver, None, threaded) == 0
        written[threaded, ahead] = _saved_pages(path)
    assert len(written[False, 1]) > 8 * PERSIST_AHEAD  # the thread waits for the writer
    assert written[True, PERSIST_AHEAD] == written[False, 1] == written[True, 1]


def test_persist_stops_its_row_thread_when_the_writer_fails(tmp_path):
    """A failing ``flush`` (the database write) ends ``persist`` with its error, the row
    thread stopped and joined; the entries of pages not put are still to persist."""
    import threading

    from morello._persist import persist
    from morello.db import Store

    store = Store(tmp_path / "t.sqlite", AVX2)
    eng = Engine(AVX2, store=store)
    eng.solve(morello.matmul(48, 40, 56))
    calls = []

    def flush():
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        persist(eng.solver, flush, True)
    assert not any(t.name == "morello-persist-rows" for t in threading.enumerate())
    assert persist(eng.solver, None, False) > 0


def test_the_expander_takes_cost_constants_by_name_not_position():
    """``CostParams`` fills the Expander's ``cost_params_t`` field by field: a field
    missing from either side is refused, not read as another constant."""
    import dataclasses

    from morello._expand import Expander
    from morello.search import CostParams

    eng = Engine(AVX2)
    fields = dataclasses.asdict(CostParams.of(AVX2))
    fewer = dataclasses.make_dataclass("Fewer", list(fields)[1:])
    more = dataclasses.make_dataclass("More", [*fields, "extra"])
    with pytest.raises(ValueError, match="processors"):
        Expander(eng.graph, Bridge(eng), True, fewer(*list(fields.values())[1:]), [])
    with pytest.raises(TypeError, match="fields"):
        Expander(eng.graph, Bridge(eng), True, more(*fields.values(), 0), [])


def test_the_expander_refuses_records_whose_fields_it_does_not_read():
    """The bridge's records and the core's structs name the same fields, in order: a
    record with a field moved or added is refused when the Expander is made."""
    from typing import NamedTuple

    from morello._expand import Expander
    from morello.bridge import KernelRecord, MoveRecord, TemplateRow
    from morello.search import CostParams

    class Swapped(NamedTuple):
        dest: int
        units: int
        level: int
        cost: int
        view: int

    class Odd(Bridge):
        records = (Swapped, KernelRecord, TemplateRow)

    eng = Engine(AVX2)
    Expander(eng.graph, Bridge(eng), True, CostParams.of(AVX2), [])
    with pytest.raises(TypeError, match="Swapped has fields"):
        Expander(eng.graph, Odd(eng), True, CostParams.of(AVX2), [])
    assert MoveRecord._fields != Swapped._fields
