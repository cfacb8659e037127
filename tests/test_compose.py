"""Compose chains: the kind row, coordinates, search (DP = exhaustive, native = Python),
emitted programs against numpy, fusion found by the search, and clear errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import morello
from morello import compose
from morello.coords import spec_from_coords, spec_key, spec_point
from morello.memory import AVX2, Level
from morello.rewrites import Bufferize, TileOut
from morello.specs import PrimKind

STEP_NAMES = ("relu", "add", "mul", "softmax", "max", "sum", "matmul")


@st.composite
def chain_st(draw, max_dim: int = 6, max_steps: int = 3):
    """A chain of 2..max_steps steps over small shapes, built the way users do."""
    n_steps = draw(st.integers(2, max_steps))
    size = st.integers(1, max_dim)
    first = draw(st.sampled_from(STEP_NAMES))
    if first == "matmul":
        steps = [morello.matmul(draw(size), draw(size), draw(size))]
    else:
        shape = tuple(draw(size) for _ in range(draw(st.integers(1, 2))))
        steps = [_step(first, shape, draw)]
    while len(steps) < n_steps:
        name = draw(st.sampled_from(STEP_NAMES))
        shape = steps[-1].output.shape
        if name == "matmul":
            if len(shape) == 1:
                continue
            b, m, k = (1, *shape) if len(shape) == 2 else shape
            steps.append(morello.matmul(m, k, draw(size), batch=b))
        else:
            steps.append(_step(name, shape, draw))
    try:
        return morello.chain(*steps)
    except morello.SpecError as e:  # too many chain dims or operands: a clear refusal
        assert "at most" in str(e), e
        assume(False)


def _step(name, shape, draw):
    dim = draw(st.integers(0, len(shape) - 1))
    if name in ("softmax", "max", "sum"):
        make = {"softmax": morello.softmax, "max": morello.reduce_max,
                "sum": morello.reduce_sum}[name]
        return make(*shape, dim=dim)
    return {"relu": morello.relu, "add": morello.add, "mul": morello.mul}[name](*shape)


def test_attention_is_a_chain_with_shared_dims():
    spec = morello.attention(16, 8)
    ch = spec.kind
    assert isinstance(ch, compose.Chain)
    assert [c.kind for c in ch.components] == [PrimKind.MATMUL, PrimKind.SOFTMAX,
                                               PrimKind.MATMUL]
    # batch, rows of Q, columns of Q, rows of Kt's output (= the softmax dim), V columns
    assert spec.shape == (1, 16, 8, 16, 8)
    assert ch.fixed_dims() == (3,)
    assert [o.shape for o in spec.operands] == [(1, 16, 8), (1, 16, 8), (1, 8, 16),
                                               (1, 16, 8)]
    assert spec.kind.info.operands == ("rhs0", "lhs2", "rhs2", "out")


@settings(max_examples=60, deadline=None)
@given(chain_st())
def test_chain_families_and_coordinates_round_trip(spec):
    assert compose.parse_family(spec.kind.family) == spec.kind
    assert spec_from_coords(spec_key(spec), spec_point(spec, AVX2), AVX2) == spec


@pytest.mark.parametrize("text", [
    "Compose:Nope@0", "Compose:Matmul@0.1.2.3", "Compose:Matmul@0.1.2.3;Relu@9",
    "Compose:Relu@1.0;Relu@0.1", "Compose:Relu@0;Fill{0.0}@0", "Compose:" + "x" * 500,
    "Compose:Relu@0;Softmax{7}@0"])
def test_bad_chain_families_are_refused(text):
    with pytest.raises(ValueError):
        compose.parse_family(text)


def test_an_output_tile_never_splits_a_softmax_row():
    spec = morello.chain(morello.matmul(8, 4, 16), morello.softmax(8, 16))
    # output dims: 0 batch, 1 rows, 2 columns (the softmax dim)
    assert TileOut(2, 4).expand(spec, AVX2) is None
    rows = TileOut(1, 2).expand(spec, AVX2)
    assert rows is not None and rows.children[0].shape == (1, 2, 4, 16)
    relu = morello.chain(morello.matmul(8, 4, 16), morello.relu(8, 16))
    cols = TileOut(2, 4).expand(relu, AVX2)
    assert cols is not None and cols.children[0].shape == (1, 8, 4, 4)


def test_bufferize_splits_at_each_intermediate():
    spec = morello.attention(8, 4)
    inner, outer = Bufferize(0, Level.GL).expand(spec, AVX2).children
    assert isinstance(inner.kind, compose.Chain) and outer.kind is PrimKind.MATMUL
    assert [c.kind for c in inner.kind.components] == [PrimKind.SOFTMAX, PrimKind.MATMUL]
    inner, outer = Bufferize(1, Level.L1).expand(spec, AVX2).children
    assert inner.kind is PrimKind.MATMUL and isinstance(outer.kind, compose.Chain)
    assert inner.output.level is Level.L1 and outer.operands[1].level is Level.L1
    assert Bufferize(2, Level.GL).expand(spec, AVX2) is None
    assert Bufferize(0, Level.RF).expand(spec, AVX2) is None  # 8×8 is not one element


def test_intermediates_go_to_l2_only_when_l1_cannot_hold_them(db):
    """An 8×8 intermediate fits L1, so L2 is not offered; attention 128×64's 128×128
    scores do not, and held in L2 (both intermediates) the chain matches numpy."""
    assert Bufferize(0, Level.L2).expand(morello.attention(8, 4), AVX2) is None
    spec = morello.attention(128, 64)
    inner, _ = Bufferize(1, Level.L2).expand(spec, AVX2).children
    assert inner.output.level is Level.L2
    prog = morello.schedule(spec, [Bufferize(0, Level.L2), Bufferize(0, Level.L2)], db=db)
    ok, err = prog.verify()
    assert ok, err


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_dp_equals_exhaustive_search_on_tiny_chains(data):
    """The DP (chains expanded in Python, their parts by the Cython core) finds what
    exhaustive enumeration of every Impl finds."""
    from strategies import small_limits_st

    from morello.reference_dp import exhaustive_main_cost
    from morello.search import Engine

    spec = data.draw(chain_st(max_dim=2, max_steps=2).filter(lambda s: s.volume <= 4))
    spec = spec.with_limits(data.draw(small_limits_st()))
    sol, _ = Engine(AVX2).solve(spec)
    assert (None if sol is None else sol.cost.main) == exhaustive_main_cost(spec, AVX2)


@settings(max_examples=10, deadline=None)
@given(chain_st(max_dim=5))
def test_the_native_core_and_the_python_expansion_agree_on_chains(spec):
    from morello.search import Engine

    a, _ = Engine(AVX2).solve(spec)
    b, _ = Engine(AVX2, native=False).solve(spec)
    assert a is not None and b is not None and a.cost == b.cost


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return tmp_path_factory.mktemp("compose") / "chains.sqlite"


@settings(max_examples=25, deadline=None)
@given(chain_st(max_dim=12))
def test_every_emitted_chain_matches_numpy(db, spec):
    prog = morello.synthesize(spec, db=db)
    ok, err = prog.verify()
    assert ok, (spec, err)


@pytest.mark.parametrize("seq,dim", [(16, 8), (33, 5)])
def test_attention_matches_numpy_and_the_search_fuses_it(db, seq, dim):
    prog = morello.synthesize(morello.attention(seq, dim), db=db)
    fn = prog.compile()
    v, q, kt = prog.random_inputs(seed=3)
    s = q @ kt
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(fn(v, q, kt), want, rtol=2e-5, atol=2e-6)
    assert any(isinstance(n.action, Bufferize) for n in prog.impl.walk())


def test_the_search_chooses_between_fused_and_unfused():
    """Both the unfused program (every intermediate whole in main memory) and a fused
    one (a loop over output rows, intermediates in L1) are in the space; the optimum
    costs no more than either."""
    spec = morello.attention(32, 16)
    best = morello.synthesize(spec, db=False)
    unfused = morello.schedule(spec, [Bufferize(0, Level.GL), Bufferize(0, Level.GL)])
    fused = morello.schedule(spec, [TileOut(1, 8), Bufferize(0, Level.L1),
                                    Bufferize(0, Level.L1)])
    assert best.cost <= min(unfused.cost, fused.cost)
    for prog in (unfused, fused):
        ok, err = prog.verify()
        assert ok, err


@pytest.mark.parametrize("steps,message", [
    (lambda: (morello.matmul(4, 4, 4),), "2..4 steps"),
    (lambda: (morello.matmul(4, 4, 4), morello.relu(4, 5)), "reads a tensor of shape"),
    (lambda: (morello.relu(4), "relu"), "takes Specs"),
    (lambda: (morello.fill(4, 4), morello.relu(4, 4)), "Fill does not read"),
    (lambda: (morello.relu(4, 4), morello.chain(morello.relu(4, 4), morello.relu(4, 4))),
     "not a chain"),
    (lambda: (morello.matmul(2, 2, 2), morello.relu(1, 2, 2), morello.relu(1, 2, 2),
              morello.relu(1, 2, 2), morello.relu(1, 2, 2)), "2..4 steps"),
    (lambda: (morello.relu(1, 2, 6, 6), morello.conv2d(1, 2, 6, 6, 3, 3, 3)),
     "can only be a chain's first step"),
    (lambda: (morello.conv2d(1, 2, 6, 6, 3, 3, 3), morello.channel_bias(1, 3, 4, 4),
              morello.add(1, 3, 4, 4), morello.relu(1, 3, 4, 4)), "at most 4 operands"),
])
def test_bad_chains_give_one_clear_line(steps, message):
    with pytest.raises(morello.SpecError) as e:
        morello.chain(*steps())
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("argv,message", [
    (["synth", "chain", "matmul 4 4 4"], "at least two steps"),
    (["synth", "chain", "frob 4 | relu"], "unknown operation"),
    (["synth", "chain", "fill 4 4 | relu"], "cannot start a chain"),
    (["synth", "chain", "conv 1 2 6 6 3 3 3 --pad 9 | relu"], "pad 9 must be below"),
    (["synth", "chain", "conv 1 2 6 6 3 3 3 --layout nhcw | relu"], "layout must be one of"),
    (["synth", "chain", "relu 4 | bias 3"], "out of range"),
    (["synth", "chain", "matmul 4 4 4 | conv 3"], "cannot be a later chain step"),
    (["synth", "chain", "matmul 4 4 4 | matmul"], "takes N"),
    (["synth", "chain", "relu 4 | matmul 3"], "reads a matrix"),
    (["synth", "chain", "relu 4 4 | add 3"], "takes no size"),
    (["synth", "chain", "max 4 4 --dim x | relu"], "--dim in the chain"),
    (["synth", "attention", "4"], "two sizes"),
    (["synth", "attention", "4", "4", "--dim", "1"], "--dim is not a parameter"),
])
def test_bad_command_line_chains_give_one_clear_line(tmp_path, argv, message):
    from probes import run_cli

    code, out, err = run_cli(argv + ["--db", str(tmp_path / "db.sqlite"), "-q"])
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_command_line_chains_run(tmp_path):
    from probes import run_cli

    code, out, err = run_cli(["run", "chain", "matmul 6 5 7 | softmax | matmul 3",
                              "--db", str(tmp_path / "db.sqlite"), "-q"])
    assert code == 0 and "matches numpy" in out, (out, err)


@pytest.mark.parametrize("seq,dim", [(16, 8), (33, 5)])
def test_attention_with_k_stored_as_k(db, seq, dim):
    """k_layout='k': the second operand is Kt column-major, i.e. K's own memory; the
    callable takes K.T (a view) without copying and matches numpy."""
    spec = morello.attention(seq, dim, k_layout="k")
    assert spec.operands[2].layout != morello.attention(seq, dim).operands[2].layout
    prog = morello.synthesize(spec, db=db)
    fn = prog.compile()
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((seq, dim)).astype(np.float32) for _ in range(3))
    s = q @ k.T
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(fn(v, q, k.T), want, rtol=2e-5, atol=2e-6)
    ok, err = prog.verify(fn)
    assert ok, err
    with pytest.raises(morello.SpecError):
        morello.attention(seq, dim, k_layout="row")


def test_a_chain_is_verified_as_tightly_as_its_widest_step():
    """The tolerance of a chain follows the largest reduction of one step (the scores'
    64 terms, the weighted sum's 512), not their product."""
    from morello.verify import terms, tolerance

    assert terms(morello.attention(512, 64)) == 512
    assert terms(morello.chain(morello.matmul(8, 300, 8), morello.relu(8, 8))) == 300
    assert tolerance(morello.attention(512, 64))[1] == pytest.approx(512e-5)
