"""Every Impl the search could choose compiles to correct C, not only the optimal one.

A random walk picks, at each Spec, a random action among those whose sub-Specs the DP found
satisfiable, so layouts, packings, boundary loops and kernels are exercised far beyond the
optimal program.
"""
from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st

import morello
from morello.codegen import compile_c, emit_c
from morello.codegen.build import CompiledProgram
from morello.cost import combine
from morello.impl import Impl
from morello.memory import AVX2
from morello.rewrites import actions
from morello.search import Engine


def random_impl(spec, eng: Engine, rng: random.Random, target=AVX2) -> Impl:
    choices = []
    for idx, act in enumerate(actions(spec, target)):
        exp = act.expand(spec, target)
        if exp is None:
            continue
        try:
            if all(eng.lookup(c) is not None for c in exp.children):
                choices.append((idx, act, exp))
        except KeyError:  # a sub-Spec the DP never had to solve
            continue
    assert choices, f"no satisfiable action for {spec}"
    idx, act, exp = rng.choice(choices)
    kids = tuple(random_impl(c, eng, rng, target) for c in exp.children)
    return Impl(spec, act, idx, kids, combine(exp.const, exp.coefs, exp.own,
                                              [k.cost for k in kids]))


def compiled_random_impl(spec, seed: int, target=AVX2) -> CompiledProgram:
    """A random Impl of ``spec`` (``random_impl``) for ``target``, emitted and compiled;
    f32 operands, every one but the last an input."""
    eng = Engine(target)
    eng.solve(spec)
    impl = random_impl(spec, eng, random.Random(seed), target)
    note(impl.pformat())
    src = emit_c(impl, target)
    note(src)
    n = len(spec.operands)
    return CompiledProgram(compile_c(src, AVX2.cflags), [o.shape for o in spec.operands],
                           [np.float32] * n, n - 1)


@pytest.mark.isa("avx2")
@settings(max_examples=12)
@given(st.integers(1, 2), st.integers(1, 9), st.integers(1, 9), st.integers(1, 17),
       st.integers(0, 10**6))
def test_random_impls_match_numpy(b, m, k, n, seed):
    fn = compiled_random_impl(morello.matmul(m, k, n, batch=b), seed)
    rng = np.random.default_rng(seed)
    lhs = rng.uniform(-1, 1, (b, m, k)).astype(np.float32)
    rhs = rng.uniform(-1, 1, (b, k, n)).astype(np.float32)
    np.testing.assert_allclose(fn(lhs, rhs), lhs @ rhs, rtol=1e-4, atol=1e-4)


@pytest.mark.isa("avx2")
@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.sampled_from([1, 7, 16, 33, 130, 1024]), st.integers(0, 10**6),
       st.booleans())
@example(rows=4, cols=1024, seed=0, dram=True)
def test_random_softmax_impls_match_numpy(rows, cols, seed, dram):
    """The same for row softmaxes: decompositions, row tiles, L1 and L2 views and the
    kernels of every pass in random combinations (and with them the next-tile prefetch
    of ``codegen.emit``, wherever a random loop puts a second pass); and, for the
    target's DRAM variant (``Target.in_dram``), stores past the caches and the exps kept
    in an L1 or L2 row."""
    target = replace(AVX2, llc_bytes=1 << 10).in_dram() if dram else AVX2
    fn = compiled_random_impl(morello.softmax(rows, cols), seed, target)
    x = np.random.default_rng(seed).uniform(-30, 30, (rows, cols)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(fn(x), e / e.sum(axis=1, keepdims=True), rtol=2e-5,
                               atol=1e-7)


@settings(max_examples=25)
@given(st.integers(1, 2), st.integers(1, 12), st.integers(1, 12), st.integers(1, 40),
       st.integers(0, 10**6))
def test_every_node_of_any_impl_costs_at_least_nothing(b, m, k, n, seed):
    """Loops along a stream discount the run starts their bodies paid (see
    ``rewrites.tile.stream_discount``): never more than the bodies paid, whatever the
    Impl, so no cost goes negative."""
    spec = morello.matmul(m, k, n, batch=b)
    eng = Engine(AVX2)
    eng.solve(spec)
    impl = random_impl(spec, eng, random.Random(seed))
    for node in impl.walk():
        assert node.cost.main >= 0, impl.pformat()


@st.composite
def _user_spec_st(draw):
    """A Spec of any non-matmul kind as users write them (row-major, in main memory)."""
    from morello.api import CONSTRUCTORS

    # conv's sizes are not a tensor's shape: tests/test_conv.py draws its own.
    op = draw(st.sampled_from(sorted(set(CONSTRUCTORS) - {"matmul", "conv"})))
    rank = 2 if op == "transpose" else draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 20)) for _ in range(rank))
    kw = {"batch": draw(st.integers(1, 3))} if op == "transpose" else {}
    if op in ("max", "sum", "broadcast", "bias", "channel-bias"):
        kw["dim"] = draw(st.integers(0, rank - 1))
    if op == "fill":
        kw["value"] = draw(st.sampled_from([0.0, -np.inf]))
    return CONSTRUCTORS[op](*shape, **kw)


@pytest.mark.isa("avx2")
@settings(max_examples=25, deadline=None)
@given(_user_spec_st(), st.integers(0, 10**6))
def test_random_impls_of_every_kind_match_numpy(spec, seed):
    from morello.api import Program
    from morello.search import SearchStats

    eng = Engine(AVX2)
    eng.solve(spec)
    impl = random_impl(spec, eng, random.Random(seed))
    note(impl.pformat())
    prog = Program(spec, AVX2, impl, SearchStats(), 0.0)
    note(prog.c_source)
    ok, err = prog.verify(seed=seed)
    assert ok, err


@pytest.mark.isa("avx2")
@settings(max_examples=14, deadline=None)
@given(st.integers(0, 10**6), st.booleans())
def test_random_impls_of_convs_and_blocks_match_numpy(seed, block):
    """Random lowerings of random convs (odd sizes, kernels, strides, pads, both layouts)
    or CNN blocks (a conv and the steps after it), and random programs below them: every
    one matches numpy."""
    from probes import random_conv

    from morello.api import Program
    from morello.search import SearchStats

    spec, _ = random_conv(np.random.default_rng(seed), block=block)
    note(str(spec))
    eng = Engine(AVX2)
    eng.solve(spec)
    impl = random_impl(spec, eng, random.Random(seed))
    note(impl.pformat())
    prog = Program(spec, AVX2, impl, SearchStats(), 0.0)
    ok, err = prog.verify(seed=seed)
    assert ok, err
