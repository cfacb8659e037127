"""Property tests of the compiled memo table against the dense reference model."""

import itertools
import pickle

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from morello._memo import MemoTable
from morello.reference_memo import DenseMemoTable

SIDE = 8  # small grids: coordinates 0..7
COORDS = st.integers(0, SIDE - 1)

Box = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@st.composite
def box_st(draw, ndim, coords):
    """An inclusive box whose corners are drawn from coords."""
    lo, hi = [], []
    for _ in range(ndim):
        a, b = sorted(draw(st.lists(coords, min_size=2, max_size=2)))
        lo.append(a)
        hi.append(b)
    return tuple(lo), tuple(hi)


@st.composite
def memo_ops_st(draw, max_ndim=4, coords=COORDS, max_puts=20):
    """(ndim, nvalues, puts): a put sequence using a few distinct values."""
    ndim = draw(st.integers(1, max_ndim))
    nvalues = draw(st.integers(1, 3))
    pool = [
        tuple(v * 10 + j for j in range(nvalues))
        for v in range(-1, draw(st.integers(1, 3)))
    ]
    puts = draw(
        st.lists(
            st.tuples(box_st(ndim, coords), st.sampled_from(pool)),
            max_size=max_puts,
        )
    )
    return ndim, nvalues, [(lo, hi, v) for (lo, hi), v in puts]


def _build(ndim, nvalues, puts):
    table, model = MemoTable(ndim, nvalues), DenseMemoTable(ndim, nvalues)
    for lo, hi, v in puts:
        table.put(lo, hi, v)
        model.put(lo, hi, v)
    return table, model


def _grid(ndim, side=SIDE):
    return np.array(list(itertools.product(range(side), repeat=ndim)), np.int64)


def _dense(model, grid):
    """The model's (values, found) at every grid point."""
    values = np.zeros((len(grid), model.nvalues), np.int64)
    found = np.zeros(len(grid), np.bool_)
    index = {p: r for r, p in enumerate(map(tuple, grid.tolist()))}
    for p, v in model.cells.items():
        values[index[p]] = v
        found[index[p]] = True
    return values, found


def _assert_same_on_grid(table, model, grid) -> None:
    """The table answers exactly like the dense model at every grid point."""
    values, found = table.get_many(grid)
    want_values, want_found = _dense(model, grid)
    np.testing.assert_array_equal(found, want_found)
    np.testing.assert_array_equal(values, want_values)


def _volume(lo, hi):
    vol = 1
    for a, b in zip(lo, hi):
        vol *= b - a + 1
    return vol


def _overlap(a: Box, b: Box) -> bool:
    return all(al <= bh and bl <= ah for al, ah, bl, bh in zip(a[0], a[1], b[0], b[1]))


def _mergeable(a: Box, b: Box) -> bool:
    """Equal values and the union of the two boxes is itself a box."""
    if a[2] != b[2]:
        return False
    differ = [i for i in range(len(a[0])) if (a[0][i], a[1][i]) != (b[0][i], b[1][i])]
    if len(differ) != 1:
        return False
    (i,) = differ
    return a[1][i] + 1 == b[0][i] or b[1][i] + 1 == a[0][i]


@settings(max_examples=150, deadline=None)
@given(memo_ops_st())
@example((2, 1, [((0, 0), (7, 7), (0,)), ((2, 2), (5, 5), (1,)), ((2, 2), (5, 5), (0,))]))
def test_memo_table_matches_dense_model(ops):
    ndim, nvalues, puts = ops
    table, model = MemoTable(ndim, nvalues), DenseMemoTable(ndim, nvalues)
    grid = _grid(ndim)
    for lo, hi, v in puts:
        table.put(lo, hi, v)
        model.put(lo, hi, v)
        _assert_same_on_grid(table, model, grid)
        assert table.covered() == model.covered()
    for p in grid.tolist():
        assert table.get(p) == model.get(p)


@settings(max_examples=100, deadline=None)
@given(
    memo_ops_st(),
    st.lists(st.lists(st.integers(-2, SIDE + 2), min_size=4, max_size=4), max_size=40),
)
def test_get_many_agrees_with_get(ops, raw_points):
    ndim, nvalues, puts = ops
    table, _ = _build(ndim, nvalues, puts)
    points = np.array([p[:ndim] for p in raw_points], np.int64).reshape(-1, ndim)
    values, found = table.get_many(points)
    assert values.shape == (len(points), nvalues) and values.dtype == np.int64
    for p, v, f in zip(points.tolist(), values.tolist(), found.tolist()):
        got = table.get(p)
        assert f == (got is not None)
        assert tuple(v) == (got if f else (0,) * nvalues)


@settings(max_examples=100, deadline=None)
@given(memo_ops_st())
def test_boxes_are_disjoint_and_cover_exactly_the_models_points(ops):
    ndim, nvalues, puts = ops
    table, model = _build(ndim, nvalues, puts)
    boxes = table.boxes()
    assert len(boxes) == len(table)
    for a, b in itertools.combinations(boxes, 2):
        assert not _overlap(a, b), (a, b)
    assert table.covered() == sum(_volume(lo, hi) for lo, hi, _ in boxes)
    assert table.covered() == model.covered()
    cells = {}
    for lo, hi, v in boxes:
        for p in itertools.product(*(range(a, b + 1) for a, b in zip(lo, hi))):
            cells[p] = v
    assert cells == model.cells


@settings(max_examples=100, deadline=None)
@given(memo_ops_st())
def test_no_two_stored_boxes_could_merge(ops):
    table, _ = _build(*ops)
    for a, b in itertools.combinations(table.boxes(), 2):
        assert not _mergeable(a, b), (a, b)


@settings(max_examples=60, deadline=None)
@given(memo_ops_st())
def test_arrays_round_trip(ops):
    ndim, nvalues, puts = ops
    table, model = _build(ndim, nvalues, puts)
    lo, hi, values = table.to_arrays()
    assert lo.shape == hi.shape == (len(table), ndim)
    assert values.shape == (len(table), nvalues)
    assert lo.dtype == hi.dtype == values.dtype == np.int64
    again = MemoTable.from_arrays(lo, hi, values)
    assert again.boxes() == table.boxes()
    for a, b in zip(again.to_arrays(), (lo, hi, values)):
        np.testing.assert_array_equal(a, b)
    grid = _grid(ndim)
    for a, b in zip(again.get_many(grid), table.get_many(grid)):
        np.testing.assert_array_equal(a, b)
    assert pickle.loads(pickle.dumps(table)).boxes() == table.boxes()
    # The model reads the same arrays: both describe the same map.
    assert DenseMemoTable.from_arrays(lo, hi, values).cells == model.cells
    # The bulk-built index takes further puts like the incremental one.
    for _, hi_, v in reversed(puts):
        again.put(hi_, hi_, v)
        model.put(hi_, hi_, v)
    _assert_same_on_grid(again, model, grid)


def test_from_arrays_rejects_overlapping_boxes():
    lo = np.array([[0, 0], [1, 1]])
    hi = np.array([[2, 2], [3, 3]])
    with pytest.raises(ValueError, match="overlap"):
        MemoTable.from_arrays(lo, hi, np.zeros((2, 1), np.int64))


# Far and boundary coordinates: page edges at levels 0 and above (4, 32, 64,
# 1024...), 10**6 and beyond. Too large for the dense model, so the oracle is
# "the last put containing the point wins", checked on each cell of the grid
# cut by all box faces, on which the map is constant.
FAR = st.sampled_from(
    [0, 1, 3, 4, 31, 32, 33, 63, 64, 1023, 1024, 10**6, 10**6 + 1, 2**40, 2**62]
)


@settings(max_examples=100, deadline=None)
@given(memo_ops_st(max_ndim=3, coords=FAR, max_puts=8))
def test_far_coordinates_match_last_put_wins(ops):
    ndim, nvalues, puts = ops
    table, _ = _build(ndim, nvalues, [])
    for lo, hi, v in puts:
        table.put(lo, hi, v)
    cuts = [
        sorted({0} | {lo[i] for lo, _, _ in puts} | {hi[i] + 1 for _, hi, _ in puts})
        for i in range(ndim)
    ]
    cells = [
        [(a, b - 1) for a, b in zip(c, c[1:])] + [(c[-1], c[-1])] for c in cuts
    ]
    covered = 0
    for cell in itertools.product(*cells):
        lo = tuple(a for a, _ in cell)
        hi = tuple(b for _, b in cell)
        want = None
        for plo, phi, v in puts:
            if all(a <= x <= b for a, x, b in zip(plo, lo, phi)):
                want = v
        assert table.get(lo) == want
        assert table.get(hi) == want
        if want is not None:
            covered += _volume(lo, hi)
    assert table.covered() == covered


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.data())
def test_filling_a_line_one_point_at_a_time_leaves_one_box(ndim, data):
    axis = data.draw(st.integers(0, ndim - 1))
    base = data.draw(st.lists(st.integers(0, 10**6), min_size=ndim, max_size=ndim))
    order = data.draw(st.permutations(range(100)))
    table = MemoTable(ndim, 2)
    for x in order:
        p = list(base)
        p[axis] = x
        table.put(p, p, (3, -4))
    lo, hi = list(base), list(base)
    lo[axis], hi[axis] = 0, 99
    assert table.boxes() == [(tuple(lo), tuple(hi), (3, -4))]


@pytest.mark.parametrize("side", [8, 16, 40])
def test_filling_a_grid_row_by_row_leaves_one_box(side):
    by_points, by_rows = MemoTable(2, 1), MemoTable(2, 1)
    for r in range(side):
        by_rows.put((r, 0), (r, side - 1), (5,))
        for c in range(side):
            by_points.put((r, c), (r, c), (5,))
    whole = [((0, 0), (side - 1, side - 1), (5,))]
    assert by_points.boxes() == by_rows.boxes() == whole


def test_overwriting_a_hole_and_refilling_it_leaves_one_box():
    table = MemoTable(3, 1)
    table.put((0, 0, 0), (7, 7, 7), (1,))
    table.put((2, 3, 4), (5, 5, 5), (2,))
    assert len(table) > 1
    table.put((2, 3, 4), (5, 5, 5), (1,))
    assert table.boxes() == [((0, 0, 0), (7, 7, 7), (1,))]


def test_memory_boxes_of_many_specs_stay_separate_and_findable():
    # The DP's shape: a point in the Spec coordinates times [peak, limit] in
    # the 4 memory coordinates.
    rng = np.random.default_rng(0)
    table, expected = MemoTable(8, 2), {}
    for spec in itertools.product(range(6), repeat=4):
        peak = rng.integers(0, 20, size=4)
        limit = peak + rng.integers(0, 20, size=4)
        value = (sum(spec) % 3, int(peak[0]))
        table.put(spec + tuple(peak), spec + tuple(limit), value)
        expected[spec] = (peak, limit, value)
    for spec, (peak, limit, value) in expected.items():
        assert table.get(spec + tuple(peak)) == value
        assert table.get(spec + tuple(limit)) == value
        assert table.get(spec + tuple(limit + 1)) is None
    assert len(table) <= len(expected)


def test_reputting_a_stored_value_changes_nothing():
    table = MemoTable(2, 1)
    table.put((0, 0), (9, 9), (4,))
    before = table.boxes()
    table.put((3, 3), (4, 6), (4,))
    table.put([0, 0], np.array([9, 9]), (4,))
    assert table.boxes() == before


def test_invalid_input_is_rejected():
    table = MemoTable(2, 1)
    with pytest.raises(ValueError):
        table.put((0, -1), (1, 1), (0,))
    with pytest.raises(ValueError):
        table.put((2, 0), (1, 1), (0,))
    with pytest.raises(ValueError):
        table.put((0,), (1,), (0,))
    with pytest.raises(ValueError):
        table.put((0, 0), (1, 1), (0, 1))
    with pytest.raises(TypeError):
        table.put((0, 0.5), (1, 1), (0,))
    with pytest.raises(ValueError):
        table.get_many(np.zeros((3, 3), np.int64))
    with pytest.raises(ValueError):
        MemoTable(0, 1)
    with pytest.raises(ValueError):
        MemoTable(2, 17)
    assert table.get((-1, 0)) is None
    assert len(table) == 0 and table.covered() == 0


def test_covered_counts_volumes_beyond_int64():
    table = MemoTable(3, 1)
    table.put((0, 0, 0), (2**62, 2**62, 2**62), (1,))
    assert table.covered() == (2**62 + 1) ** 3


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_many_puts_that_split_and_join_leaves_match_dense_model(seed):
    # Points scattered over a 64 x 64 plane, wiped every 50 puts by a wide
    # box: index leaves are split, emptied and joined again many times, and
    # subtrees are rebuilt.
    rng = np.random.default_rng(seed)
    table, model = MemoTable(6, 1), DenseMemoTable(6, 1)
    for step in range(600):
        if step % 50 == 49:
            lo = np.concatenate([rng.integers(0, 48, 2), [0, 0, 0, 0]])
            hi = lo + np.array([int(rng.integers(4, 16))] * 2 + [1, 1, 1, 1])
        else:
            lo = np.concatenate([rng.integers(0, 64, 2), rng.integers(0, 2, 4)])
            hi = lo
        value = (int(rng.integers(0, 3)),)
        table.put(lo, hi, value)
        model.put(lo, hi, value)
    assert table.covered() == model.covered()
    points = np.array(list(model.cells), np.int64)
    values, found = table.get_many(points)
    assert found.all()
    np.testing.assert_array_equal(values[:, 0], [v for (v,) in model.cells.values()])


@pytest.mark.parametrize("ndim", [1, 3])
def test_sorted_inserts_keep_the_index_shallow(ndim):
    # Inserting in sorted order grows one side of a k-d tree only; the
    # scapegoat rebuilds must keep the depth logarithmic in the leaf count.
    table = MemoTable(ndim, 1)
    for i in range(20_000):
        p = (0,) * (ndim - 1) + (i,)
        table.put(p, p, (i % 2,))
    stats = table._tree_stats()
    assert len(table) == 20_000
    assert stats["max_depth"] <= 3 * np.log2(stats["leaves"]) + 4, stats
    assert table.get((0,) * (ndim - 1) + (12_345,)) == (1,)


def test_bulk_load_builds_a_shallow_index():
    rng = np.random.default_rng(0)
    lo = np.unique(rng.integers(0, 1000, (5000, 3)), axis=0)
    table = MemoTable.from_arrays(lo, lo, rng.integers(0, 9, (len(lo), 2)))
    stats = table._tree_stats()
    assert stats["max_depth"] <= 2 * np.log2(stats["leaves"]) + 4, stats
    values, found = table.get_many(lo)
    assert found.all()
