"""The emitter's affine index simplification agrees with integer division everywhere."""
import itertools

from hypothesis import given
from hypothesis import strategies as st

from morello.codegen.affine import Affine, Var


@st.composite
def affines(draw):
    n = draw(st.integers(0, 3))
    terms = tuple(
        (Var(f"v{i}", draw(st.integers(1, 6))), draw(st.integers(1, 64))) for i in range(n)
    )
    return Affine(draw(st.integers(0, 100)), terms)


def _value(a: Affine, env: dict) -> int:
    return a.const + sum(c * env[v] for v, c in a.terms)


@given(affines(), st.sampled_from([2, 4, 8, 16]))
def test_divmod_is_exact_whenever_it_answers(a, p):
    dm = a.divmod(p)
    if dm is None:
        return
    q, r = dm
    for values in itertools.product(*(range(v.extent) for v, _ in a.terms)):
        env = {v: x for (v, _), x in zip(a.terms, values)}
        x = _value(a, env)
        assert (_value(q, env), _value(r, env)) == divmod(x, p)


def test_divmod_simplifies_a_loop_within_one_pack():
    i, j = Var("i", 8), Var("j", 16)
    q, r = (Affine.var(i, 32) + Affine.var(j)).divmod(16)
    assert q == Affine.var(i, 2) and r == Affine.var(j)
    # j runs across pack boundaries: no affine answer.
    assert (Affine.var(i, 32) + Affine.var(Var("k", 32))).divmod(16) is None


def test_programs_over_packed_buffers_index_without_division():
    """Every packing of lhs or rhs, with the rest searched: the emitted C indexes the packed
    buffers with affine expressions only (no ``/`` or ``%`` by a pack size)."""
    import re

    import morello
    from morello.memory import AVX2
    from morello.rewrites import Move, actions

    spec = morello.matmul(64, 64, 64).canonical()
    packs = [a for a in actions(spec, AVX2)
             if isinstance(a, Move) and a.layout is not None and a.layout.is_packed]
    assert packs
    for act in packs:
        src = morello.schedule(spec, [act]).c_source
        assert not re.search(r"\) [/%] \d", src), (act, src)
