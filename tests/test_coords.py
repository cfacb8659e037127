"""Properties of the Spec <-> integer-coordinate maps (``morello.coords``)."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from strategies import layout_st, matmul_spec_st, spec_st

import morello
from morello import coords, layouts
from morello.coords import (
    defined_for,
    layout_code,
    layout_from_code,
    point_len,
    spec_from_coords,
    spec_key,
    spec_point,
)
from morello.kinds import KINDS
from morello.memory import AVX2, AVX512, LEVELS, NLEVELS, Level
from morello.rewrites import Split, TileOut, actions
from morello.rewrites.move import layout_candidates
from morello.specs import PrimKind

# A Spec with dims up to 33 (not only powers of two), for the round trips.
wide_spec_st = spec_st(max_dim=33)


def _segments(spec):
    """The point of ``spec`` cut into its named segments (see ``morello.coords``)."""
    pt = list(spec_point(spec, AVX2))
    accum = [pt.pop(0)] if KINDS[spec.kind].member is not None else []
    rank = len(spec.shape)
    shape, pt = pt[:rank], pt[rank:]
    ops = [pt[4 * i:4 * i + 4] for i in range(len(spec.operands))]
    pt = pt[4 * len(spec.operands):]
    serial, memory = pt[:1], pt[1:]
    return accum, shape, ops, serial, memory


@given(st.integers(0, 4).flatmap(lambda r: st.tuples(st.just(r), layout_st(r))))
def test_layout_code_round_trips(rank_layout):
    rank, layout = rank_layout
    code = layout_code(layout, rank)
    note(f"code {code}")
    assert code >= 0
    assert layout_from_code(code, rank) == layout


@given(st.integers(1, 4), st.integers(0, 10**7))
def test_layout_from_code_is_exact_on_its_image(rank, code):
    try:
        layout = layout_from_code(code, rank)
    except ValueError:
        return
    assert layout_code(layout, rank) == code


@pytest.mark.parametrize("shape", [(1, 32, 32), (2, 16, 48), (4, 8), (3, 5, 7), (24,)])
def test_reachable_layouts_have_distinct_codes(shape):
    cands = layout_candidates(shape, AVX2.pack_sizes + AVX512.pack_sizes)
    codes = [layout_code(lay, len(shape)) for lay in cands]
    assert len(set(codes)) == len(codes)
    assert [layout_from_code(c, len(shape)) for c in codes] == cands


def test_layout_code_of_row_major_rank_3():
    # Structure (1 + 12 + 144) + 0*144 + 4*12 + 8 = 213, unpacked -> 2 * 213.
    assert layout_code(layouts.row_major(3), 3) == 426
    assert layout_code(layouts.Layout(()), 0) == 0


def test_layout_code_refuses_foreign_dims():
    with pytest.raises(ValueError):
        layout_code(layouts.row_major(3), 2)
    with pytest.raises(ValueError):
        layout_code(layouts.Layout((layouts.PhysDim(0, 0),)), 1)


@given(wide_spec_st)
def test_spec_round_trips_through_coordinates(spec):
    note(str(spec))
    assert defined_for(spec, AVX2)
    key, point = spec_key(spec), spec_point(spec, AVX2)
    note(f"{key} {point}")
    assert spec_from_coords(key, point, AVX2) == spec


@given(wide_spec_st)
def test_points_are_non_negative_ints_of_the_table_length(spec):
    key, point = spec_key(spec), spec_point(spec, AVX2)
    assert len(point) == point_len(key)
    assert all(type(c) is int and c >= 0 for c in point)
    # Keys are hashable and made of small ints and strings only.
    hash(key)
    flat = [key[0], *key[1], *key[2], key[3]]
    assert all(isinstance(x, (int, str)) for x in flat)


def test_accum_shares_the_matmul_table():
    spec = morello.matmul(3, 4, 5)
    accum = dataclasses.replace(spec, kind=PrimKind.MATMUL_ACCUM)
    assert spec_key(spec) == spec_key(accum)
    assert spec_point(accum, AVX2)[0] == 0 < spec_point(spec, AVX2)[0] == 1
    assert spec_point(accum, AVX2)[1:] == spec_point(spec, AVX2)[1:]


def test_point_of_a_user_matmul():
    spec = morello.matmul(7, 13, 9, batch=2)
    assert spec_key(spec) == ("Matmul", (), ("f32", "f32", "f32"), 4)
    # accum; b-1, m-1, k-1, n-1; per operand (GL, row-major, contiguous, no vector);
    # serial; RF, VRF raw, L1 = 512 lines -> 10, L2 = 4096 lines -> 13, GL = 2^25 -> 26.
    assert spec_point(spec, AVX2) == (
        1, 1, 6, 12, 8,
        4, 426, 0, 0, 4, 426, 0, 0, 4, 426, 0, 0,
        0, 16, 16, 10, 13, 26,
    )


@given(wide_spec_st)
def test_malformed_points_raise_value_error(spec):
    key, point = spec_key(spec), spec_point(spec, AVX2)
    with pytest.raises(ValueError):
        spec_from_coords(key, point[:-1], AVX2)
    with pytest.raises(ValueError):
        spec_from_coords(key, (-1,) + point[1:], AVX2)


_KEYS = [
    ("Matmul", (), ("f32", "f32", "f32"), 4),
    ("Move", (), ("f32", "f32"), 3),
    ("Move", (), ("f32", "f32"), 1),
    ("Fill", ("0.0",), ("f32",), 2),
    ("Fill", ("-inf",), ("f32",), 1),
    ("Max", (1,), ("f32", "f32"), 2),
    ("Add", (), ("f32", "f32", "f32"), 3),
    ("Broadcast", (0,), ("f32", "f32"), 2),
]


@st.composite
def _near_valid_point_st(draw, key):
    """A point whose segments are mostly in range (a raw random one almost never is)."""
    family, _, dtypes, rank = key
    pt = [draw(st.integers(0, 1))] if family in coords._HAS_MEMBER else []
    pt += [draw(st.integers(0, 40)) for _ in range(rank)]
    for _ in dtypes:
        level = draw(st.integers(0, 3))
        # Even codes are unpacked layouts, so most of them decode.
        code = draw(st.integers(0, 200).map(lambda c: 2 * c) | st.integers(0, 400))
        vec = draw(st.integers(0, 1)) if level == 1 else 0
        pt += [level, code, draw(st.integers(0, 2)), vec]
    pt += [draw(st.integers(0, 1))] + [draw(st.integers(0, 30)) for _ in range(NLEVELS)]
    return tuple(pt)


@given(st.sampled_from(_KEYS).flatmap(
    lambda key: st.tuples(st.just(key), _near_valid_point_st(key))))
def test_spec_from_coords_is_exact_on_its_image(key_point):
    key, point = key_point
    try:
        spec = spec_from_coords(key, tuple(point), AVX2)
    except ValueError:
        return
    note(str(spec))
    assert spec_key(spec) == key
    assert spec_point(spec, AVX2) == tuple(point)


def test_foreign_vector_sizes_are_not_defined():
    spec = morello.matmul(1, 1, 16)
    out = spec.operands[2]
    odd = dataclasses.replace(out, level=Level.VRF, vector_size=2)
    bad = spec.with_operand(2, odd)
    assert not defined_for(bad, AVX2)
    with pytest.raises(ValueError):
        spec_point(bad, AVX2)


@given(matmul_spec_st(max_dim=8))
def test_tiles_and_splits_have_smaller_shape_coordinates(spec):
    note(str(spec))
    _, parent_shape, *_ = _segments(spec)
    for act in actions(spec, AVX2):
        if not isinstance(act, (TileOut, Split)):
            continue
        exp = act.expand(spec, AVX2)
        if exp is None:
            continue
        sdim = act.spec_dim(spec)
        for child in exp.children:
            _, shape, *_ = _segments(child)
            assert all(c <= p for c, p in zip(shape, parent_shape)), act
            assert shape[sdim] < parent_shape[sdim], act


@given(spec_st(max_dim=4))
def test_same_table_subspecs_are_below_their_parent(spec):
    """In one table, accum, shape, level, serial and limit coordinates never grow."""
    note(str(spec))
    p_accum, p_shape, p_ops, p_serial, p_mem = _segments(spec)
    for act in actions(spec, AVX2):
        exp = act.expand(spec, AVX2)
        if exp is None:
            continue
        for child in exp.children:
            if spec_key(child) != spec_key(spec):
                continue
            accum, shape, ops, serial, mem = _segments(child)
            assert accum <= p_accum, act
            assert all(c <= p for c, p in zip(shape, p_shape)), act
            assert all(o[0] <= p[0] for o, p in zip(ops, p_ops)), act
            assert serial <= p_serial, act
            assert all(c <= p for c, p in zip(mem, p_mem)), act
            assert len(mem) == NLEVELS == len(LEVELS)


@given(spec_st(max_dim=4))
def test_documented_segments_add_up_to_point_len(spec):
    """The segment lengths of the module docstring (as ``_segments`` cuts them) are
    ``point_len``'s, and the docstring lists the segments in that order."""
    member, shape, ops, serial, mem = _segments(spec)
    assert len(member) + len(shape) + 4 * len(ops) + len(serial) + len(mem) \
        == point_len(spec_key(spec))
    assert all(len(o) == 4 for o in ops) and len(serial) == 1 and len(mem) == NLEVELS
    doc = coords.__doc__
    names = ["member", "shape", "per operand", "serial", "memory limits"]
    assert [doc.index(n) for n in names] == sorted(doc.index(n) for n in names)
