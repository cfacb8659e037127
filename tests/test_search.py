"""Properties of the search: the DP against exhaustive search, monotonicity in memory,
stability at the peak, canonical sub-Specs, and Impls rebuilt from memo and trace."""
from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st
from strategies import (
    gl_matmul_spec_st,
    larger_limits_st,
    matmul_spec_st,
    prim_spec_st,
    small_limits_st,
    spec_st,
)

import morello
from morello.codegen import emit_c
from morello.dtypes import Dtype
from morello.impl import reconstruct, replay, trace_json
from morello.layouts import row_major
from morello.memory import AVX2, Level, MemoryLimits
from morello.reference_dp import exhaustive_main_cost
from morello.rewrites import Move, action_groups, actions
from morello.search import Engine
from morello.specs import PrimKind, Spec
from morello.tensorspec import TensorSpec

SEARCH_RANKS = (1, 2, 3)


def _tiny(spec: Spec) -> bool:
    return spec.volume <= 4


# Exhaustive search is exponential: dims <= 2, reduced limits, and all-GL matmuls
# (the costliest to enumerate, about 0.3 s at volume 2) only up to volume 2.
tiny_spec_st = st.one_of(
    matmul_spec_st(max_dim=2, limits=small_limits_st()).filter(_tiny),
    prim_spec_st(max_dim=2, limits=small_limits_st(), ranks=SEARCH_RANKS).filter(_tiny),
    gl_matmul_spec_st(max_dim=2, limits=small_limits_st()).filter(
        lambda s: s.volume <= 2),
)

# Specs for the other properties: any small canonical Spec, and user-style matmuls.
search_spec_st = st.one_of(
    spec_st(max_dim=4, ranks=SEARCH_RANKS),
    gl_matmul_spec_st(max_dim=4, max_batch=2),
)


def _gl_matmul(m, k, n, limits=(4, 4, 16, 32, 64)) -> Spec:
    return dataclasses.replace(morello.matmul(m, k, n), limits=MemoryLimits(limits))


def _main(sol) -> int | None:
    return None if sol is None else sol.cost.main


@given(tiny_spec_st)
@example(_gl_matmul(1, 1, 1))
@example(_gl_matmul(1, 2, 1))
@example(_gl_matmul(2, 1, 1, limits=AVX2.capacity))
@settings(max_examples=50)  # (an unlucky draw of 100 took minutes on a 2-core host)
def test_dp_cost_equals_exhaustive_search(spec):
    note(str(spec))
    sol, _ = Engine(AVX2).solve(spec)
    assert _main(sol) == exhaustive_main_cost(spec, AVX2)


@given(search_spec_st.flatmap(
    lambda s: st.tuples(st.just(s), larger_limits_st(s.limits))))
def test_more_memory_never_worsens_cost(spec_and_limits):
    spec, larger = spec_and_limits
    big = dataclasses.replace(spec, limits=larger)
    note(f"{spec}\n-> {larger}")
    small_sol, _ = Engine(AVX2).solve(spec)
    big_sol, _ = Engine(AVX2).solve(big)
    note(f"costs {_main(small_sol)} -> {_main(big_sol)}")
    if small_sol is not None:
        assert big_sol is not None
        assert big_sol.cost.main <= small_sol.cost.main


@given(search_spec_st)
def test_resolving_at_peak_gives_same_cost(spec):
    sol, _ = Engine(AVX2).solve(spec)
    if sol is None:
        return
    at_peak = dataclasses.replace(spec, limits=MemoryLimits(sol.cost.peaks))
    note(f"{spec}\npeak {at_peak.limits}")
    # A fresh engine, so the answer is recomputed rather than read from the memo box.
    again, _ = Engine(AVX2).solve(at_peak)
    assert again is not None
    assert again.cost == sol.cost
    assert again.action == sol.action


@given(spec_st(max_dim=4))
def test_actions_produce_canonical_subspecs(spec):
    note(str(spec))
    for act in actions(spec, AVX2):
        exp = act.expand(spec, AVX2)
        if exp is None:
            continue
        for child in exp.children:
            assert child.is_canonical, f"{act} of {spec} -> {child}"


@given(spec_st(max_dim=12))
def test_l1_views_of_strided_tensors_fit_in_l1_ways(spec):
    """A strided L1 view taller than L1's ways could sit in one cache set and be evicted
    while the model counts it resident (see ``morello.rewrites.move``). (L2 views are
    bounded by L2's capacity only: a fully strided Softmax operand of 540 lines has one.)"""
    for act in actions(spec, AVX2):
        if isinstance(act, Move) and act.layout is None and act.level is Level.L1:
            t = spec.operands[act.operand]
            assert t.contiguous or t.blocks <= AVX2.l1_ways, f"{act} of {spec}"


def _solved_impl(spec: Spec):
    eng = Engine(AVX2)
    sol, _ = eng.solve(spec)
    if sol is None:
        return eng, None
    return eng, reconstruct(spec, AVX2, eng.lookup)


# A Fill of vector registers: found to have an Impl but no C (see the test body).
_VRF_ZERO = Spec(
    PrimKind.FILL, (1, 2, 4),
    (TensorSpec((1, 2, 4), Dtype.F32, Level.VRF, row_major(3), 1, 4).canonical(),),
    False, MemoryLimits((0, 0, 0, 0, 0)), (0.0,),
)


@given(search_spec_st)
@example(_VRF_ZERO)
@example(morello.matmul(3, 4, 5, batch=2))
def test_impl_replays_from_its_trace(spec):
    _, impl = _solved_impl(spec)
    if impl is None:
        return
    note(impl.pformat())
    trace = json.loads(trace_json(impl))
    assert trace == impl.trace()
    again = replay(spec, AVX2, trace)
    assert again == impl
    # The memo's form (each action's index in actions(spec), an older morello's stored
    # trace) names the same actions: a [group, index] is that index less the groups before.
    flat = [sum(len(g) for g in list(action_groups(n.spec, AVX2))[:n.at[0]]) + n.at[1]
            for n in impl.walk()]
    assert all(actions(n.spec, AVX2)[i] == n.action for n, i in zip(impl.walk(), flat))
    assert replay(spec, AVX2, flat) == impl
    # Kernel parameters are pointers: only Specs over memory operands have C.
    if any(o.level.counts_registers for o in spec.operands):
        return
    src = emit_c(impl)
    note(src)
    assert emit_c(again) == src


@given(search_spec_st)
def test_reconstructed_cost_matches_memo(spec):
    eng, impl = _solved_impl(spec)
    if impl is None:
        return
    note(impl.pformat())
    assert impl.cost.main == eng.lookup(spec).cost.main
    # Every node was solved on the way, at the limits its parent gave it.
    for node in impl.walk():
        assert node.cost.main == eng.lookup(node.spec).cost.main, str(node.spec)


@pytest.mark.parametrize("mkn", [(2, 3, 5), (4, 1, 4), (3, 3, 1)])
def test_synthesize_matches_engine(mkn):
    from morello.api import problem_target

    spec = morello.matmul(*mkn)
    sol, _ = Engine(problem_target(AVX2, spec)).solve(spec)
    assert morello.synthesize(spec, db=False).cost == sol.cost.main


@pytest.mark.parametrize("kind", [PrimKind.FILL, PrimKind.MOVE])
def test_native_engine_solves_low_rank_moves_and_fills(kind):
    shape = (2,)
    src = TensorSpec(shape, Dtype.F32, Level.L1, row_major(1), 1)
    dst = TensorSpec(shape, Dtype.F32, Level.RF, row_major(1), 1)
    ops = (dst,) if kind is PrimKind.FILL else (src, dst)
    params = (0.0,) if kind is PrimKind.FILL else ()
    spec = Spec(kind, shape, ops, True, AVX2.max_limits(), params).canonical()
    python, _ = Engine(AVX2, native=False).solve(spec)
    assert python is not None
    assert _main(python) == exhaustive_main_cost(spec, AVX2)
    native, _ = Engine(AVX2).solve(spec)
    assert _main(native) == _main(python)
