"""The page cache and the page blobs: paged tables equal one table, whatever the
geometry, the budget and the saves; blobs round-trip and refuse any damage."""
from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_memo import COORDS, SIDE, memo_ops_st

from morello import pageblob
from morello._memo import MemoTable
from morello._pages import PageCache
from morello.reference_memo import DenseMemoTable


class FakeStore:
    """Pages saved by ``save_all``, served to a PageCache's loader (with a load count)."""

    def __init__(self) -> None:
        self.pages: dict[tuple, tuple] = {}
        self.version = 0
        self.loads = 0

    def loader(self, table, page):
        self.loads += 1
        parts = self.pages.get((table, page))
        return None if parts is None else [MemoTable.from_arrays(*a) for a in parts[::-1]]

    def save_all(self, cache: PageCache) -> None:
        self.version += 1
        for s in cache.dirty():
            table, page, _, _ = cache.slot(s)
            part = cache.fresh_arrays(s)
            self.pages.setdefault((table, page), []).append(part)
            cache.saved(s, self.version, MemoTable.from_arrays(*part))

    def reopen(self, ndim, nvalues, blocks, capacity) -> PageCache:
        cache = PageCache(nvalues, capacity, self.loader)
        cache.set_table(0, ndim, blocks)
        for (table, page) in self.pages:
            cache.register(table, page, self.version)
        return cache


def _grid(ndim):
    return list(itertools.product(range(SIDE), repeat=ndim))


@settings(max_examples=60, deadline=None)
@given(memo_ops_st(max_ndim=3), st.data())
def test_a_paged_table_equals_the_dense_model_for_any_geometry_and_budget(ops, data):
    ndim, nvalues, puts = ops
    blocks = data.draw(st.lists(st.integers(-3, 5), min_size=ndim, max_size=ndim))
    capacity = data.draw(st.sampled_from([0, 2000, 1 << 30]))
    split = data.draw(st.integers(0, len(puts)))
    store = FakeStore()
    cache = PageCache(nvalues, capacity, store.loader)
    cache.set_table(0, ndim, blocks)
    model = DenseMemoTable(ndim, nvalues)
    for lo, hi, v in puts[:split]:
        cache.put_box(0, lo, hi, v)
        model.put(lo, hi, v)
    store.save_all(cache)
    # A new process: pages come back through the loader, under the budget.
    cache = store.reopen(ndim, nvalues, blocks, capacity)
    for lo, hi, v in puts[split:]:
        cache.put_box(0, lo, hi, v)
        model.put(lo, hi, v)
    for p in _grid(ndim):
        assert cache.get(0, p) == model.get(p), p
    store.save_all(cache)
    cache = store.reopen(ndim, nvalues, blocks, capacity)
    for p in _grid(ndim):
        assert cache.get(0, p) == model.get(p), p
    if capacity == 0 and store.pages:
        assert cache.n_loaded <= 1  # only the newest clean page is kept
    assert all(len(parts) <= 2 for parts in store.pages.values())


@st.composite
def bulk_rows_st(draw):
    """A table geometry and rows as a search writes them, in any order: boxes that are
    single points in the exact dims, with values that agree wherever boxes overlap (a
    function of the exact point: every stored value is optimal throughout its box)."""
    ndim = draw(st.integers(2, 4))
    kinds = draw(st.lists(st.sampled_from(["exact", "merge", "range"]), min_size=ndim,
                          max_size=ndim).filter(lambda k: "exact" in k))
    paged = draw(st.booleans())
    blocks = [draw(st.sampled_from([1, 2, -2])) if paged and k == "exact" else 0
              for k in kinds]
    nvalues = draw(st.integers(1, 3))
    rows = []
    # Up to 120 rows: pages of more than 48 boxes are sorted by radix, fewer by insertion.
    for _ in range(draw(st.integers(1, 120))):
        lo, hi = [], []
        for k in kinds:
            a, b = sorted(draw(st.lists(COORDS, min_size=2, max_size=2)))
            if k == "exact":
                b = a
            lo.append(a)
            hi.append(b)
        key = tuple(x for x, k in zip(lo, kinds) if k == "exact")
        v = tuple((hash(key) >> (8 * j)) % 5 for j in range(nvalues))
        rows.append(lo + hi + list(v))
    order = draw(st.permutations(range(len(rows))))
    return ndim, kinds, blocks, nvalues, [rows[i] for i in order]


@settings(max_examples=150, deadline=None)
@given(bulk_rows_st())
def test_bulk_puts_of_a_page_equal_puts_box_by_box(case):
    """``put_page`` (a search's save: carve overlaps, merge neighbours by sorting, freeze)
    answers every point as ``put`` box by box does, survives a save and reload, and
    builds a FrozenPage whenever the rows are one page's first. Rows carved and merged
    first (``prepare_rows``, as persist's row thread does) make the same parts."""
    ndim, kinds, blocks, nvalues, rows = case
    exact = [d for d, k in enumerate(kinds) if k == "exact"]
    merge = [d for d, k in enumerate(kinds) if k == "merge"]
    store = FakeStore()
    bulk = PageCache(nvalues, 1 << 30, store.loader)
    bulk.set_table(0, ndim, blocks, merge, exact)
    prep = PageCache(nvalues, 1 << 30, lambda t, p: None)
    prep.set_table(0, ndim, blocks, merge, exact)
    one = PageCache(nvalues, 1 << 30, lambda t, p: None)
    one.set_table(0, ndim, blocks, merge)
    bulk.put_rows(0, np.array(rows, np.int64))
    prep.put_rows(0, np.array(rows, np.int64), prepare=True)
    for r in rows:
        one.put_box(0, r[:ndim], r[ndim:2 * ndim], r[2 * ndim:])
    grid = _grid(ndim)
    assert [bulk.get(0, p) for p in grid] == [one.get(0, p) for p in grid]
    assert [prep.get(0, p) for p in grid] == [one.get(0, p) for p in grid]
    for s, t in zip(bulk.dirty(), prep.dirty()):
        a, b = bulk.fresh_frozen(s), prep.fresh_frozen(t)
        assert (a is None) == (b is None)
        if a is not None:
            assert a.stored_form() == b.stored_form()
    pages = {tuple(pg) for pg in (bulk.slot(s)[1] for s in bulk.dirty())}
    if len(pages) == 1:
        (s,) = bulk.dirty()
        frozen = bulk.fresh_frozen(s)
        assert frozen is not None
    store.save_all(bulk)
    again = store.reopen(ndim, nvalues, blocks, 1 << 30)
    assert [again.get(0, p) for p in grid] == [one.get(0, p) for p in grid]


def test_bulk_puts_merge_neighbours_and_a_later_put_thaws_the_page():
    cache = PageCache(1, 1 << 30, lambda t, p: None)
    cache.set_table(0, 2, [0, 0], [1], [0])
    cache.put_rows(0, [[3, x, 3, x, 7] for x in range(6)] + [[4, 0, 4, 5, 8]])
    (s,) = cache.dirty()
    frozen = cache.fresh_frozen(s)
    assert frozen is not None and len(frozen) == 2  # 6 neighbours along dim 1 merged
    assert cache.stats()["bulk_boxes"] == 2
    cache.put_box(0, (3, 9), (3, 9), (1,))
    assert cache.fresh_frozen(s) is None and cache.get(0, (3, 2)) == (7,)
    assert cache.get(0, (3, 9)) == (1,) and cache.get(0, (4, 5)) == (8,)
    with pytest.raises(ValueError, match="lo <= hi"):
        cache.put_rows(0, [[3, 5, 3, 4, 1]])
    with pytest.raises(ValueError, match="rows must be"):
        cache.put_rows(0, [[1, 2, 3]])


def test_boxes_are_split_along_page_boundaries_and_stay_inside_their_page():
    cache = PageCache(1, 1 << 30, lambda t, p: None)
    cache.set_table(0, 2, [4, 0])
    cache.put_box(0, (1, 0), (9, 6), (7,))
    pages = {}
    for s in range(cache.n_slots):
        _, page, _, _ = cache.slot(s)
        lo, hi, _ = cache.arrays(s)
        assert (lo[:, 0] // 4 == page[0]).all() and (hi[:, 0] // 4 == page[0]).all()
        pages[page] = (lo.tolist(), hi.tolist())
    assert pages == {(0, 0): ([[1, 0]], [[3, 6]]), (1, 0): ([[4, 0]], [[7, 6]]),
                     (2, 0): ([[8, 0]], [[9, 6]])}


def test_puts_read_nothing_and_clean_pages_are_evicted_and_reloaded():
    store = FakeStore()
    cache = PageCache(1, 0, store.loader)
    cache.set_table(0, 1, [1])
    for x in range(5):
        cache.put_box(0, (x,), (x,), (x + 10,))
    assert cache.evictions == 0 and store.loads == 0  # puts read no stored part
    store.save_all(cache)
    assert cache.n_loaded == 0  # saved parts are read back when a lookup needs them
    assert [cache.get(0, (x,)) for x in range(5)] == [(x + 10,) for x in range(5)]
    assert store.loads == 5 and cache.evictions == 4 and cache.n_loaded == 1


def test_a_newer_version_replaces_a_clean_page_and_a_dirty_page_stays():
    store = FakeStore()
    cache = PageCache(1, 1 << 30, store.loader)
    cache.set_table(0, 1, [0])
    cache.put_box(0, (0,), (0,), (1,))
    store.save_all(cache)
    other = store.reopen(1, 1, [0], 1 << 30)
    other.put_box(0, (1,), (1,), (2,))
    store.save_all(other)
    cache.register(0, (0,), store.version)  # what a refresh sees
    assert cache.get(0, (1,)) == (2,)
    cache.put_box(0, (2,), (2,), (3,))
    (s,) = cache.dirty()
    cache.register(0, (0,), store.version + 1)  # a newer one still: ours is not dropped
    assert cache.dirty() == [s] and cache.get(0, (2,)) == (3,)


def test_finds_in_tables_without_pages_touch_nothing():
    cache = PageCache(1, 0, lambda t, p: pytest.fail("no page should be loaded"))
    cache.set_table(0, 2, [1, 1])
    assert cache.get(0, (3, 4)) is None
    cache.register(0, (9, 9), 1)
    assert cache.get(0, (3, 4)) is None and cache.absent == 2


def test_geometry_is_checked():
    cache = PageCache(1, 0, lambda t, p: None)
    cache.set_table(0, 2, [1, 0])
    cache.set_table(0, 2, [1, 0])
    with pytest.raises(ValueError, match="another geometry"):
        cache.set_table(0, 2, [2, 0])
    with pytest.raises(ValueError, match="blocks"):
        cache.set_table(1, 2, [1])
    with pytest.raises(ValueError, match="out of range"):
        cache.register_many(0, np.array([1, -1], "<i8").tobytes(), np.array([1]))
    with pytest.raises(ValueError, match="version"):
        cache.register_many(0, np.array([1, 1], "<i8").tobytes(), np.array([0]))


@st.composite
def boxes_st(draw):
    n = draw(st.integers(0, 30))
    ndim = draw(st.integers(1, 6))
    nvalues = draw(st.integers(1, 5))
    big = st.one_of(st.integers(0, 300), st.integers(0, 1 << 40))
    lo = np.array(draw(st.lists(st.lists(big, min_size=ndim, max_size=ndim),
                                min_size=n, max_size=n)), np.int64).reshape(n, ndim)
    ext = np.array(draw(st.lists(st.lists(st.integers(0, 70000), min_size=ndim,
                                          max_size=ndim), min_size=n, max_size=n)),
                   np.int64).reshape(n, ndim)
    values = np.array(draw(st.lists(st.lists(st.integers(-(1 << 62), 1 << 62),
                                             min_size=nvalues, max_size=nvalues),
                                    min_size=n, max_size=n)), np.int64).reshape(n, nvalues)
    return lo, lo + ext, values


@settings(max_examples=100, deadline=None)
@given(boxes_st(), st.booleans())
def test_page_blobs_round_trip(arrays, compress):
    lo, hi, values = arrays
    blob = pageblob.encode(lo, hi, values, compress)
    for a, b in zip(pageblob.decode(blob, lo.shape[1], values.shape[1]), arrays):
        assert a.dtype == np.int64 and (a == b).all()


@settings(max_examples=150, deadline=None)
@given(boxes_st(), st.data())
def test_damaged_page_blobs_are_refused_with_a_value_error(arrays, data):
    lo, hi, values = arrays
    blob = bytearray(pageblob.encode(lo, hi, values))
    how = data.draw(st.sampled_from(["flip", "truncate", "extend", "other shape"]))
    if how == "flip":
        i = data.draw(st.integers(0, 8 * len(blob) - 1))
        blob[i // 8] ^= 1 << (i % 8)
    elif how == "truncate":
        del blob[data.draw(st.integers(0, len(blob) - 1)):]
    elif how == "extend":
        blob += data.draw(st.binary(min_size=1, max_size=20))
    with pytest.raises(ValueError):
        if how == "other shape":
            pageblob.decode(bytes(blob), lo.shape[1] + 1, values.shape[1])
        else:
            pageblob.decode(bytes(blob), lo.shape[1], values.shape[1])


def test_a_blob_with_a_valid_checksum_but_lying_sizes_is_refused():
    lo = np.zeros((3, 2), np.int64)
    blob = bytearray(pageblob.encode(lo, lo, np.zeros((3, 1), np.int64)))
    blob[8:12] = (1 << 24).to_bytes(4, "little")  # nboxes: a huge claim
    body = bytes(blob[:-4])
    blob = body + zlib.crc32(body).to_bytes(4, "little")
    with pytest.raises(ValueError, match="boxes|payload"):
        pageblob.decode(blob, 2, 1)


def test_constant_columns_are_stored_once():
    from morello._frozen import FrozenPage

    lo = np.array([[5, 0, 2], [5, 1, 2], [5, 2, 2]], np.int64)
    hi = lo + np.array([0, 0, 3])
    values = np.array([[1 << 40, 7], [1 << 40, 8], [1 << 40, 9]], np.int64)
    blob = pageblob.encode(lo, hi, values, compress=False)
    payload, widths, n = pageblob.unpack(blob, 3, 2)
    # lo[0], lo[2], the three extents and values[0] are constant: width 0, 8 bytes each
    assert list(widths) == [0, 1, 0, 0, 0, 0, 0, 1] and len(payload) == 2 * 3 + 6 * 8
    assert all((a == b).all() for a, b in zip(pageblob.decode(blob, 3, 2), (lo, hi, values)))
    page = FrozenPage(payload, widths, n, 3, 2, [0, 1])
    assert page.get((5, 1, 4)) == (1 << 40, 8) and page.get((5, 1, 6)) is None
    assert (page.rows() == np.concatenate([lo, hi, values], axis=1)).all()
    with pytest.raises(ValueError, match="width"):  # no constant column without boxes
        FrozenPage(b"", bytes([0] * 8), 0, 3, 2, [0])


@st.composite
def exact_page_st(draw):
    """Disjoint boxes in any order: single points in the exact dims, in the others a
    cell [2c, 2c + e] (e in 0..1) of a grid, so boxes of distinct cells never overlap."""
    ndim = draw(st.integers(1, 4))
    exact = sorted(draw(st.sets(st.integers(0, ndim - 1))))
    nvalues = draw(st.integers(1, 3))
    # Exact coordinates 2^40 apart need more than 63 bits together (sorted by comparisons).
    scale = draw(st.sampled_from([1, 1 << 40]))
    cells = draw(st.lists(st.tuples(*[st.integers(0, 3)] * ndim), unique=True, max_size=40))
    lo, hi, values = [], [], []
    for cell in cells:
        ext = [0 if d in exact else draw(st.integers(0, 1)) for d in range(ndim)]
        start = [scale * c if d in exact else 2 * c for d, c in enumerate(cell)]
        lo.append(start)
        hi.append([s + e for s, e in zip(start, ext)])
        values.append(draw(st.lists(st.integers(-(1 << 40), 1 << 40), min_size=nvalues,
                                    max_size=nvalues)))
    arrays = (np.array(lo, np.int64).reshape(-1, ndim), np.array(hi, np.int64).reshape(-1, ndim),
              np.array(values, np.int64).reshape(-1, nvalues))
    return arrays, exact, scale


@settings(max_examples=150, deadline=None)
@given(exact_page_st())
def test_a_frozen_page_in_any_order_finds_every_point_like_a_scan(case):
    """Stored parts in any order (the store writes them sorted by their exact
    coordinates; older files did not) are sorted when loaded and answer every point."""
    from morello._frozen import FrozenPage

    (lo, hi, values), exact, scale = case
    ndim, nvalues = lo.shape[1], values.shape[1]
    payload, widths, n = pageblob.unpack(pageblob.encode(lo, hi, values, False), ndim,
                                         nvalues)
    page = FrozenPage(payload, widths, n, ndim, nvalues, exact)
    stored = {tuple(r) for r in page.rows().tolist()}
    assert stored == {tuple(r) for r in np.concatenate([lo, hi, values], 1).tolist()}
    assert page.nbytes() == len(payload) + 512  # no index beside the columns
    for pt in itertools.product(*[range(0, 4 * scale, scale) if d in exact else range(8)
                                  for d in range(ndim)]):
        inside = np.all((lo <= pt) & (pt <= hi), axis=1)
        want = tuple(values[np.argmax(inside)].tolist()) if inside.any() else None
        assert page.get(pt) == want


def test_overlapping_boxes_of_one_exact_point_are_refused_in_any_order():
    from morello._frozen import FrozenPage

    lo = np.array([[1, 0], [0, 0], [1, 3]], np.int64)
    hi = np.array([[1, 4], [0, 9], [1, 5]], np.int64)  # rows 0 and 2 overlap at (1, 3..4)
    values = np.zeros((3, 1), np.int64)
    payload, widths, n = pageblob.unpack(pageblob.encode(lo, hi, values, False), 2, 1)
    with pytest.raises(ValueError, match="overlap"):
        FrozenPage(payload, widths, n, 2, 1, [0])
    hi[2, 1] = 5
    lo[2, 1] = 5  # now disjoint
    payload, widths, n = pageblob.unpack(pageblob.encode(lo, hi, values, False), 2, 1)
    assert FrozenPage(payload, widths, n, 2, 1, [0]).get((1, 5)) == (0,)
