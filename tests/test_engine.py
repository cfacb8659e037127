"""The Cython core's native action expansion equals the Python rewrites, row for row."""
from __future__ import annotations

import pytest

import morello
from morello.memory import AVX2
from morello.rewrites import actions
from morello.search import Engine, logical


def python_rows(spec):
    rows = []
    for idx, act in enumerate(actions(spec, AVX2)):
        exp = act.expand(spec, AVX2)
        if exp is not None:
            rows.append((idx, exp.const, tuple(exp.own),
                         tuple(logical(c) for c in exp.children), tuple(exp.coefs)))
    return rows


@pytest.mark.parametrize("shape", [(1, 2, 3, 5), (2, 4, 4, 4), (1, 3, 1, 7), (1, 9, 2, 16)])
@pytest.mark.parametrize("serial", [True, False])
def test_native_expansion_equals_python_rewrites(shape, serial):
    b, m, k, n = shape
    eng = Engine(AVX2)
    eng.solve(morello.matmul(m, k, n, batch=b, serial=serial))
    checked = 0
    for i in range(eng.solver.n_specs):
        spec = eng.spec_of(i)
        native = [(idx, const, own, tuple(eng.spec_of(c) for c in kids), coefs)
                  for idx, const, own, kids, coefs in eng.solver.rows_of(i)]
        assert native == python_rows(spec), spec
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("shape", [(1, 4, 4, 4), (2, 3, 5, 7), (1, 8, 16, 8)])
def test_native_and_python_engines_find_the_same_optimum(shape):
    b, m, k, n = shape
    spec = morello.matmul(m, k, n, batch=b)
    fast, _ = Engine(AVX2).solve(spec)
    slow, _ = Engine(AVX2, native=False).solve(spec)
    assert fast == slow


def test_core_points_equal_coords_spec_point():
    from morello.coords import spec_key, spec_point
    from morello.search import table_keys

    eng = Engine(AVX2)
    spec = morello.matmul(3, 4, 5, batch=2)
    eng.solve(spec)
    limits = AVX2.max_limits()
    keys = table_keys()
    for i in range(eng.solver.n_specs):
        s = eng.spec_of(i)
        found = eng.solver.point(i, limits.units)
        if found is None:
            continue
        fam, pt = found
        real = type(s)(s.kind, s.shape, s.operands, s.serial_only, limits)
        assert keys[fam] == spec_key(real)
        assert pt == spec_point(real)


def test_tables_reproduce_results_in_a_new_engine():
    spec = morello.matmul(8, 5, 16)
    first = Engine(AVX2)
    sol, _ = first.solve(spec)
    first.persist()
    tables = {k: t.to_arrays() for k, t in first.tables.items()}
    second = Engine(AVX2, tables=tables)
    again, stats = second.solve(spec)
    assert again == sol
    assert stats.specs_solved == 0
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
