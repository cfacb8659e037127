"""Manual scheduling: hand-chosen steps, the rest searched; never cheaper than the search."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import morello
from morello import RewriteError, Split, TileOut, ToAccum, schedule
from morello.memory import AVX2
from morello.rewrites import actions


@settings(max_examples=15)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6), st.data())
def test_hand_steps_never_beat_the_search_and_stay_in_the_trace(m, k, n, data):
    spec = morello.matmul(m, k, n).canonical()
    best = morello.synthesize(spec, db=False)
    steps = []
    s = spec
    for _ in range(data.draw(st.integers(1, 3))):
        cands = [a for a in actions(s, AVX2) if a.expand(s, AVX2) is not None]
        if not cands:
            break
        a = data.draw(st.sampled_from(cands))
        steps.append(a)
        exp = a.expand(s, AVX2)
        if not exp.children:
            break
        s = exp.children[0]
    try:
        prog = schedule(spec, steps)
    except morello.SpecError as e:
        # Steps may lead to a hole nothing fits (e.g. an output moved to registers that
        # no kernel can then fill): a clear error, not a program.
        assert "no implementation" in str(e) and "after the given steps" in str(e)
        return
    assert [n.action for n in prog.impl.walk()][: len(steps)] == steps
    assert prog.cost >= best.cost


@pytest.mark.isa("avx2")
def test_a_streaming_matvec_schedule_compiles_and_matches_numpy():
    spec = morello.matmul(1, 64, 256)
    prog = schedule(spec, [ToAccum(), None, Split(8), TileOut(2, 32)])
    assert "Split(size=8)" in str(prog.impl)
    _assert_matches_numpy(prog)


def _assert_matches_numpy(prog) -> None:
    _, m, k, n = prog.spec.shape
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    np.testing.assert_allclose(prog.compile()(a, b), a @ b, rtol=1e-4, atol=1e-3)


def test_a_step_that_does_not_apply_names_the_hole_and_the_options():
    with pytest.raises(RewriteError, match=r"Split\(size=8\) does not apply to Matmul.*applicable"):
        schedule(morello.matmul(4, 16, 16), [Split(8)])


def test_leftover_steps_are_an_error():
    with pytest.raises(RewriteError, match="left over"):
        schedule(morello.matmul(1, 1, 1), [ToAccum(), None, None, TileOut(1, 1)])


@pytest.mark.parametrize("steps", [None, "TileOut", ["TileOut(1, 2)"], [3]])
def test_steps_that_are_not_actions_are_refused(steps):
    with pytest.raises(morello.SpecError, match="steps must be"):
        schedule(morello.matmul(2, 2, 2), steps)


@pytest.mark.isa("avx2")
def test_a_block_of_lhs_viewed_in_l2_compiles_and_matches_numpy():
    """L2 views (only of lhs blocks L1 cannot hold) are accounting, no code: the program
    must still compute the product."""
    from morello import Level, Move

    spec = morello.matmul(96, 128, 48)  # lhs: 768 lines, more than L1's 512
    prog = schedule(spec, [ToAccum(), None, Move(0, Level.L2)])
    assert "Move(op=0, L2, view)" in str(prog.impl)
    _assert_matches_numpy(prog)


def test_rhs_panels_are_viewed_in_l2_only_at_the_targets_width():
    """``KindInfo.l2_panels``: a Matmul's rhs may be viewed in L2 only as a panel of
    ``Target.l2_panel_cols`` columns, read in place, that L1 cannot hold (none on avx2)."""
    from morello import Level, Move
    from morello.dtypes import Dtype
    from morello.layouts import row_major
    from morello.memory import AVX512
    from morello.rewrites.move import operand_moves
    from morello.specs import PrimKind
    from morello.tensorspec import fresh

    def offered_t(t, target):
        return Move(1, Level.L2, None) in operand_moves(PrimKind.MATMUL_ACCUM, 1, t, target)

    def offered(shape, target):  # a column panel of a wider row-major B, read in place
        t = fresh((1, shape[1], 1024), Dtype.F32, Level.GL, row_major(3))
        return offered_t(t.tile(shape), target)

    assert AVX512.l2_panel_cols == 64 and AVX2.l2_panel_cols == 0
    assert offered((1, 256, 64), AVX512)       # 1024 lines: more than L1 holds
    assert not offered((1, 256, 128), AVX512)  # wider than a panel
    assert not offered((1, 512, 32), AVX512)   # narrower
    assert not offered((1, 64, 64), AVX512)    # L1 holds it
    packed = fresh((1, 256, 64), Dtype.F32, Level.GL, row_major(3))
    assert packed.contiguous and not offered_t(packed, AVX512)  # a packed B's panel
    assert not offered((1, 256, 64), AVX2)
    # lhs blocks as before, on both targets
    t = fresh((1, 256, 128), Dtype.F32, Level.GL, row_major(3))
    assert Move(0, Level.L2, None) in operand_moves(PrimKind.MATMUL_ACCUM, 0, t, AVX2)


def test_a_view_out_of_l2_costs_its_lines_in_l2_only():
    """``cost.move_pair_cost``: the L1 side of a view out of L2 is the reading kernel's
    loads (counted by the kernel); other moves pay both sides."""
    from dataclasses import replace

    from morello import Level
    from morello.cost import move_cost, move_pair_cost
    from morello.dtypes import Dtype
    from morello.layouts import row_major
    from morello.tensorspec import fresh

    gl = fresh((1, 64, 64), Dtype.F32, Level.GL, row_major(3))
    l2, l1 = replace(gl, level=Level.L2), replace(gl, level=Level.L1)
    assert move_pair_cost(l2, l1, True, AVX2) == move_cost(l2, AVX2) > 0
    assert move_pair_cost(gl, l1, True, AVX2) == move_cost(gl, AVX2) + move_cost(l1, AVX2)
    assert move_pair_cost(l2, l1, False, AVX2) == move_cost(l2, AVX2) + move_cost(l1, AVX2)


@pytest.mark.isa("avx512")
def test_a_panel_of_rhs_viewed_in_l2_compiles_and_matches_numpy():
    """The search's avx512 program for 128x256x128 keeps a 256x64 panel of B in L2 (an
    accounting, no code) and still computes the product."""
    spec = morello.matmul(128, 256, 128, target="avx512")
    prog = morello.synthesize(spec, "avx512", db=False)
    assert "Move(op=1, L2, view)" in str(prog.impl), prog.impl.pformat()
    _assert_matches_numpy(prog)


def test_the_c_tile_of_the_next_row_is_prefetched_on_the_last_column_tile():
    """Register tiles 6x16 over an 18x32 output, rows outermost: the tile loaded after
    the last column tile of a row of tiles is the first of the next row, so its lines
    (each row's first and last element: numpy aligns arrays to 16 bytes, not to a line)
    are prefetched there, and the program still matches numpy."""
    from morello.memory import Level

    prog = schedule(morello.matmul(18, 64, 32),
                    [ToAccum(), None, TileOut(1, 6), morello.Move(0, Level.L1),
                     TileOut(2, 16)])
    c = prog.c_source
    body = c[c.index("int kernel("):]
    nxt = body[body.index("} else if (i0 + 1 < 3) {"):]
    nxt = nxt[:nxt.index("}", 1)]
    want = [f"&out[192 * i0 + {192 + 32 * r + e}]" for r in range(6) for e in (0, 15)]
    assert [w for w in want if w in nxt] == want
    assert "&out[192 * i0 + 16 * i1 + 31]" in body  # the last element of the next column tile
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((18, 64), (64, 32)))
    np.testing.assert_allclose(prog.compile()(a, b), a @ b, rtol=1e-4, atol=1e-4)
