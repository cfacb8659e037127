"""The page cache: persistent tables split into pages of coordinates, loaded on demand.

A table's points are cut into pages along each coordinate by that coordinate's *block*:
a block b > 0 cuts it into runs of b values (page ``x // b``), a block -1 - s < 0 into
runs that double after a first run of 2^s values (block -4: {0..7}, {8..15}, {16..31},
...: fine pages for small sizes, few for large ones), and 0 leaves it unpaged (every page
spans all of it). A search reads only the pages its Specs touch, and a save writes only
what it added.

A page (a *slot*) has *parts*: the stored ones (each a validated FrozenPage, or a
MemoTable, newest first), loaded together through the Python ``loader(table, page)``
when a lookup first needs them and dropped least-recently-used when the loaded bytes
exceed ``capacity``; and a *fresh* MemoTable of the boxes put since the last save, pinned
until the store writes it as a new part (``saved``). Puts never read the stored parts.
A lookup tries the fresh part, then the stored ones, newest first: every stored value is
optimal at its points, so any part holding a point answers it.

Finds of pages the store does not have are answered by one hash probe, and finds in a
table without pages by none: a search into an empty database pays almost nothing here.

The stored form of a part is ``morello._frozen``'s, and the bulk work on a page's new
rows (carving, merging) is ``morello._rows``'s.

Concurrency: like MemoTable, not locked; the Python methods keep the GIL.
"""
cimport cython
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memset

import numpy as np

from morello._frozen cimport FrozenPage, freeze_rows, lookup_in_part
from morello._memo cimport MemoTable, _read_row
from morello._rows cimport prepare_rows, sort_exact
from morello._vec cimport _map_free, _map_get, _map_put, _push, _vec_free


def doubling_block(int64_t first):
    """The block whose pages double in length after a first page of ``first`` (a power of
    two) values."""
    if first < 1 or first & (first - 1) or first > (1 << 62):
        raise ValueError(f"first page of {first} values: need a power of two")
    return -1 - (first.bit_length() - 1)


def page_range(int64_t page, int64_t block):
    """The first and last coordinate of ``page`` along a coordinate of ``block``."""
    return page_start(page, block), page_end(page, block)


@cython.final
cdef class PageCache:
    """Pages of persistent tables, loaded on demand (see the module docstring).

    ``loader(table, page)`` is called with a table index and a page (one integer per
    coordinate, 0 in unpaged ones) that the store holds; it returns the page as a
    FrozenPage or a MemoTable (validated by the store), or None if the store no longer
    has it."""

    def __cinit__(self, int64_t nvalues, int64_t capacity, loader):
        if not 1 <= nvalues <= 16:
            raise ValueError(f"nvalues must be in 1..16, got {nvalues}")
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0 bytes, got {capacity}")
        self.nvalues = nvalues
        self.capacity = capacity
        self.loader = loader
        self.index.width = KEY_WIDTH
        self.s_table = []
        self.s_fresh = []
        self.lru_old = self.lru_new = -1

    def __dealloc__(self):
        _map_free(&self.index)
        _vec_free(&self.g_ndim)
        _vec_free(&self.g_block)
        _vec_free(&self.g_pages)
        _vec_free(&self.g_merge)
        _vec_free(&self.g_exact)
        _vec_free(&self.g_lazy)
        _vec_free(&self.s_keys)
        _vec_free(&self.s_version)
        _vec_free(&self.s_stored)
        _vec_free(&self.s_dirty)
        _vec_free(&self.fresh_dirty)
        _vec_free(&self.s_bytes)
        _vec_free(&self.s_prev)
        _vec_free(&self.s_next)

    # ---- geometry -------------------------------------------------------------------

    def set_table(self, int64_t table, int64_t ndim, blocks, merge_dims=None,
                  exact_dims=None):
        """Declare table ``table``: points of ``ndim`` coordinates, paged by ``blocks``
        (one per coordinate, >= 0; 0 = unpaged), its pages merging neighbours along the
        dimensions ``merge_dims`` (default: all). ``exact_dims``: the coordinates in
        which every box is one point (``morello.coords.exact_dims``); given, ``put_page``
        builds new parts in bulk. Declaring it again identically is a no-op; otherwise
        ValueError."""
        cdef int64_t b[PAGE_MAX_NDIM]
        cdef int64_t d, _d
        if not 0 <= table < (1 << 30):
            raise ValueError(f"table index {table} out of range")
        if not 1 <= ndim <= PAGE_MAX_NDIM:
            raise ValueError(f"ndim must be in 1..{PAGE_MAX_NDIM}, got {ndim}")
        _read_row(blocks, b, <int>ndim, "blocks")
        for d in range(ndim):
            if not MIN_BLOCK <= b[d] <= (1 << 40):
                raise ValueError(f"block {d} = {b[d]} out of range")
        mask = 0
        for d in (range(ndim) if merge_dims is None else merge_dims):
            if not 0 <= d < ndim:
                raise ValueError(f"merge dim {d} out of range")
            mask |= 1 << d
        exact = -1
        if exact_dims is not None:
            exact = 0
            for d in exact_dims:
                if not 0 <= d < ndim or (mask >> d) & 1:
                    raise ValueError(f"exact dim {d} out of range or merged")
                exact |= 1 << d
        while self.g_ndim.n <= table:
            _push(&self.g_ndim, -1)
            _push(&self.g_pages, 0)
            _push(&self.g_merge, 0)
            _push(&self.g_exact, -1)
            _push(&self.g_lazy, 0)
            for _d in range(PAGE_MAX_NDIM):
                _push(&self.g_block, 0)
        if self.g_ndim.data[table] >= 0:
            if self.g_ndim.data[table] != ndim or self.g_merge.data[table] != mask or any(
                    self.g_block.data[table * PAGE_MAX_NDIM + d] != b[d]
                    for d in range(ndim)) or self.g_exact.data[table] != exact:
                raise ValueError(f"table {table} is declared with another geometry")
            return
        self.g_ndim.data[table] = ndim
        self.g_merge.data[table] = mask
        self.g_exact.data[table] = exact
        for d in range(ndim):
            self.g_block.data[table * PAGE_MAX_NDIM + d] = b[d]

    def set_lazy(self, int64_t table):
        """The store holds pages of ``table`` but its page directory is not read: each page
        is asked for (through the loader) when a find first meets it, and known as absent
        if the store does not have it. (Reading a large table's directory would cost in
        proportion to the file, not to the search.)"""
        if self.geometry(table) is None:
            raise ValueError(f"table {table} is not declared")
        self.g_lazy.data[table] = 1

    def new_table(self, int64_t table):
        """An empty MemoTable shaped and merging like the pages of ``table``."""
        if self.geometry(table) is None:
            raise ValueError(f"table {table} is not declared")
        t = MemoTable(self.g_ndim.data[table], self.nvalues)
        t.merge_dims = <uint64_t>self.g_merge.data[table]
        return t

    def geometry(self, int64_t table):
        """``(ndim, blocks)`` of a declared table, or None."""
        if not 0 <= table < self.g_ndim.n or self.g_ndim.data[table] < 0:
            return None
        n = self.g_ndim.data[table]
        return n, tuple(self.g_block.data[table * PAGE_MAX_NDIM + d] for d in range(n))

    cdef int _page_key(self, int64_t table, const int64_t* pt, int64_t* key) except -1:
        cdef int64_t d, n = self.g_ndim.data[table]
        memset(key, 0, KEY_WIDTH * sizeof(int64_t))
        key[0] = table
        for d in range(n):
            key[1 + d] = page_of(pt[d], self.g_block.data[table * PAGE_MAX_NDIM + d])
        return 0

    # ---- slots ----------------------------------------------------------------------

    cdef int64_t _slot(self, const int64_t* key, bint create) except -2:
        cdef int64_t s = _map_get(&self.index, key), d
        if s >= 0 or not create:
            return s
        s = len(self.s_table)
        for d in range(KEY_WIDTH):
            _push(&self.s_keys, key[d])
        self.s_table.append(None)
        self.s_fresh.append(None)
        _push(&self.s_version, 0)
        _push(&self.s_stored, 0)
        _push(&self.s_dirty, 0)
        _push(&self.s_bytes, 0)
        _push(&self.s_prev, -1)
        _push(&self.s_next, -1)
        _map_put(&self.index, key, s)
        self.g_pages.data[key[0]] += 1
        return s

    cdef int _lru_unlink(self, int64_t s) except -1:
        cdef int64_t p = self.s_prev.data[s], n = self.s_next.data[s]
        if p < 0 and n < 0 and self.lru_old != s:
            return 0  # not in the list
        if p >= 0:
            self.s_next.data[p] = n
        else:
            self.lru_old = n
        if n >= 0:
            self.s_prev.data[n] = p
        else:
            self.lru_new = p
        self.s_prev.data[s] = self.s_next.data[s] = -1
        return 0

    cdef int _lru_push(self, int64_t s) except -1:
        """Make ``s`` the most recently used clean page."""
        self._lru_unlink(s)
        self.s_prev.data[s] = self.lru_new
        if self.lru_new >= 0:
            self.s_next.data[self.lru_new] = s
        else:
            self.lru_old = s
        self.lru_new = s
        return 0

    cdef int _evict(self) except -1:
        """Drop least recently used clean pages while over budget (never the newest)."""
        cdef int64_t s
        while self.loaded_bytes > self.capacity and self.lru_old >= 0 \
                and self.lru_old != self.lru_new:
            s = self.lru_old
            self._lru_unlink(s)
            self.s_table[s] = None
            self.loaded_bytes -= self.s_bytes.data[s]
            self.s_bytes.data[s] = 0
            self.evictions += 1
        return 0

    cdef object _load(self, int64_t s):
        """Load the stored parts of slot ``s`` (newest first)."""
        cdef int64_t table = self.s_keys.data[s * KEY_WIDTH]
        cdef int64_t n = self.g_ndim.data[table]
        cdef int64_t nbytes = 0
        page = tuple(self.s_keys.data[s * KEY_WIDTH + 1 + d] for d in range(n))
        loaded = self.loader(table, page)
        if loaded is None:
            parts = []
            self.s_stored.data[s] = 0
            self.absent += 1
            self.loads -= 1  # (counted below: a page the store does not have is no load)
        elif isinstance(loaded, (MemoTable, FrozenPage)):
            parts = [loaded]
        else:
            parts = list(loaded)
        for t in parts:
            if not isinstance(t, (MemoTable, FrozenPage)):
                raise TypeError("the page loader must return MemoTables or FrozenPages")
            if t.ndim != n or t.nvalues != self.nvalues:
                raise ValueError(f"page {page} of table {table} has {t.ndim} coordinates "
                                 f"and {t.nvalues} values, expected {n} and {self.nvalues}")
            nbytes += t.nbytes()
        self.loads += 1
        self.s_table[s] = parts
        self.s_bytes.data[s] = nbytes
        self.loaded_bytes += nbytes
        self._lru_push(s)
        self._evict()
        return parts

    cdef int64_t _find_slot(self, int64_t table, const int64_t* pt, bint create) except -2:
        cdef int64_t key[KEY_WIDTH]
        cdef int64_t s
        if not 0 <= table < self.g_ndim.n or self.g_ndim.data[table] < 0:
            if create:
                raise ValueError(f"table {table} is not declared")
            return -1
        if not create and self.g_pages.data[table] == 0 and not self.g_lazy.data[table]:
            self.absent += 1
            return -1
        self._page_key(table, pt, key)
        s = self._slot(key, create)
        if s < 0 and self.g_lazy.data[table]:
            # A table whose page directory is not read: ask the store (the loader) when
            # a page is first met; a page it does not have stays known as absent.
            s = self._slot(key, True)
            self.s_stored.data[s] = 1
        elif s < 0:
            self.absent += 1
        return s

    cdef object _parts(self, int64_t s):
        """The stored parts of slot ``s`` (loading them), newest first."""
        parts = self.s_table[s]
        if parts is not None:
            self.hits += 1
            if not self.s_dirty.data[s]:
                self._lru_push(s)
            return parts
        if self.s_stored.data[s]:
            return self._load(s)
        self.s_table[s] = []
        return self.s_table[s]

    cdef int64_t lookup(self, int64_t table, const int64_t* pt, int64_t* val,
                        int64_t* lo, int64_t* hi) except -1:
        cdef int64_t s = self._find_slot(table, pt, False)
        if s < 0:
            return 0
        fresh = self.s_fresh[s]
        if fresh is not None and lookup_in_part(fresh, pt, val, lo, hi):
            return 1
        for t in self._parts(s):
            if lookup_in_part(t, pt, val, lo, hi):
                return 1
        return 0

    # ---- puts -----------------------------------------------------------------------

    cdef int put(self, int64_t table, const int64_t* lo, const int64_t* hi,
                 const int64_t* val) except -1:
        """Store the box [lo, hi] -> val, split along the pages it crosses."""
        cdef int64_t n, d, b
        cdef int64_t first[PAGE_MAX_NDIM]
        cdef int64_t last[PAGE_MAX_NDIM]
        cdef int64_t cur[PAGE_MAX_NDIM]
        cdef int64_t clo[PAGE_MAX_NDIM]
        cdef int64_t chi[PAGE_MAX_NDIM]
        if not 0 <= table < self.g_ndim.n or self.g_ndim.data[table] < 0:
            raise ValueError(f"table {table} is not declared")
        n = self.g_ndim.data[table]
        for d in range(n):
            b = self.g_block.data[table * PAGE_MAX_NDIM + d]
            first[d] = page_of(lo[d], b)
            last[d] = page_of(hi[d], b)
            cur[d] = first[d]
        while True:
            for d in range(n):
                b = self.g_block.data[table * PAGE_MAX_NDIM + d]
                clo[d] = max(lo[d], page_start(cur[d], b))
                chi[d] = min(hi[d], page_end(cur[d], b))
            self._put_in_page(table, clo, chi, val)
            # next page: an odometer over [first, last]
            d = n - 1
            while d >= 0 and cur[d] == last[d]:
                cur[d] = first[d]
                d -= 1
            if d < 0:
                return 0
            cur[d] += 1

    cdef int _put_in_page(self, int64_t table, const int64_t* lo, const int64_t* hi,
                          const int64_t* val) except -1:
        cdef int64_t s = self._find_slot(table, lo, True)
        cdef MemoTable t
        # New boxes go to the page's fresh part (the stored parts are not even read).
        fresh = self.s_fresh[s]
        if fresh is None:
            self.s_fresh[s] = self.new_table(table)
        elif type(fresh) is FrozenPage:  # built by put_page: thaw it to put into it
            t = self.new_table(table)
            for a, b, v in zip(*fresh.to_arrays()):
                t.put(a, b, v)
            self.s_fresh[s] = t
        t = self.s_fresh[s]
        t._put(lo, hi, val)
        if not self.s_dirty.data[s]:
            self.s_dirty.data[s] = 1
            _push(&self.fresh_dirty, s)
            self._lru_unlink(s)
        return 0

    cdef uint64_t _merge_mask(self, int64_t table) noexcept:
        """The merge dims of ``table`` that are unpaged (merges stay inside a page)."""
        cdef uint64_t m = 0
        cdef int64_t d
        for d in range(self.g_ndim.data[table]):
            if (self.g_merge.data[table] >> d) & 1 \
                    and self.g_block.data[table * PAGE_MAX_NDIM + d] == 0:
                m |= (<uint64_t>1) << d
        return m

    cdef int put_page(self, int64_t table, int64_t n, int64_t* rows,
                      bint prepared=False) except -1:
        """``put`` the ``n`` rows ``[lo, hi, values]`` (overwritten: they are sorted and
        merged in place), in bulk when they are the first new boxes of one page, disjoint,
        and single points in the table's exact dims: merged along its merge dims by
        sorting and frozen, they become the page's fresh part. Otherwise box by box.
        ``prepared``: the rows are already carved and merged (``prepare_rows``, which
        keeps what they hold), as persist's row thread leaves them."""
        cdef int64_t nd, nv = self.nvalues, w, i, d, b, s, k, npaged
        cdef int64_t paged[PAGE_MAX_NDIM]
        cdef int64_t first[PAGE_MAX_NDIM]
        cdef vec_t spare
        cdef bint bulk
        memset(&spare, 0, sizeof(vec_t))
        if n <= 0:
            return 0
        if not self.declared(table):
            raise ValueError(f"table {table} is not declared")
        nd = self.g_ndim.data[table]
        w = 2 * nd + nv
        bulk = self.g_exact.data[table] >= 0
        npaged = 0
        for d in range(nd):
            if self.g_block.data[table * PAGE_MAX_NDIM + d] != 0:
                paged[npaged] = d
                first[npaged] = page_of(rows[d], self.g_block.data[table * PAGE_MAX_NDIM + d])
                npaged += 1
        for i in range(n):
            for d in range(nd):
                if rows[i * w + d] < 0 or rows[i * w + d] > rows[i * w + nd + d]:
                    raise ValueError("box needs 0 <= lo <= hi")
            for k in range(npaged if bulk else 0):
                d = paged[k]
                b = self.g_block.data[table * PAGE_MAX_NDIM + d]
                if (rows[i * w + d] != rows[i * w + nd + d]
                        and page_of(rows[i * w + nd + d], b) != first[k]) \
                        or page_of(rows[i * w + d], b) != first[k]:
                    bulk = False
        s = self._find_slot(table, rows, True) if bulk else -1
        if bulk and self.s_fresh[s] is None:
            part = self._bulk(table, &n, &rows, &spare, prepared)
            if part is not None:
                _vec_free(&spare)
                self.s_fresh[s] = part
                if not self.s_dirty.data[s]:
                    self.s_dirty.data[s] = 1
                    _push(&self.fresh_dirty, s)
                    self._lru_unlink(s)
                self.bulk_boxes += len(part)
                return 0
            # not a valid page after all (a range in an exact dim): box by box below
        try:
            for i in range(n):
                self.put(table, &rows[i * w], &rows[i * w + nd], &rows[i * w + 2 * nd])
        finally:
            _vec_free(&spare)
        return 0

    cdef object _bulk(self, int64_t table, int64_t* n, int64_t** rows, vec_t* spare,
                      bint prepared):
        """The FrozenPage of the ``n[0]`` rows ``rows[0]`` (made disjoint: carved where
        one Spec's boxes overlap, first as the rows come, then sorted by Spec; merged
        along the merge dims; ``prepared``: the first of these is done, ``prepare_rows``),
        or None if they are not a valid page (a range in an exact dim). The rows are
        rewritten: ``rows[0]`` may then point into ``spare`` (the caller frees it) and
        ``n[0]`` be another count."""
        cdef int64_t nd = self.g_ndim.data[table], nv = self.nvalues
        cdef uint64_t exact_mask = <uint64_t>self.g_exact.data[table]
        exact = [d for d in range(nd) if (exact_mask >> d) & 1]
        for attempt in range(2):
            if attempt:  # overlaps the first did not see: group one Spec's rows
                sort_exact(nd, nv, exact_mask, n[0], rows[0])
            if attempt or not prepared:
                n[0] = prepare_rows(nd, nv, exact_mask, self._merge_mask(table), n[0], rows,
                                    spare, &self.bulk_carved)
            try:
                return freeze_rows(rows[0], n[0], nd, nv, exact)
            except ValueError:
                pass
        return None

    cdef int page_geometry(self, int64_t table, int64_t* ndim, int64_t* exact,
                           uint64_t* merge) except -1:
        """What ``prepare_rows`` needs of ``table``: its coordinates, exact dims and merge
        dims (-1 for ``exact`` when its exact dims are not declared: its rows are put
        box by box)."""
        if not self.declared(table):
            raise ValueError(f"table {table} is not declared")
        ndim[0] = self.g_ndim.data[table]
        exact[0] = self.g_exact.data[table]
        merge[0] = self._merge_mask(table)
        return 0

    def build_part(self, int64_t table, rows):
        """The FrozenPage of ``rows`` (an (n, 2 * ndim + nvalues) array of boxes that agree
        where they overlap, e.g. every part of a page: a compaction), made as a search's
        save makes a page's part; None if the rows are not a valid page of ``table``."""
        cdef int64_t n, nd
        cdef int64_t* p
        cdef vec_t spare
        if self.geometry(table) is None or self.g_exact.data[table] < 0:
            raise ValueError(f"table {table} is not declared with its exact dims")
        nd = self.g_ndim.data[table]
        a = np.array(rows, dtype=np.int64, order="C", copy=True)
        if a.ndim != 2 or a.shape[1] != 2 * nd + self.nvalues:
            raise ValueError(f"rows must be (n, {2 * nd + self.nvalues})")
        if (a[:, :nd] < 0).any() or (a[:, :nd] > a[:, nd:2 * nd]).any():
            raise ValueError("box needs 0 <= lo <= hi")
        cdef int64_t[:, ::1] r = a
        n = a.shape[0]
        if n == 0:
            return freeze_rows(NULL, 0, nd, self.nvalues,
                               [d for d in range(nd) if (self.g_exact.data[table] >> d) & 1])
        p = &r[0, 0]
        memset(&spare, 0, sizeof(vec_t))
        try:
            return self._bulk(table, &n, &p, &spare, False)
        finally:
            _vec_free(&spare)

    # ---- Python API -----------------------------------------------------------------

    def get(self, int64_t table, point):
        """The value at ``point`` of ``table`` (loading its page), or None."""
        cdef int64_t p[PAGE_MAX_NDIM]
        cdef int64_t lo[PAGE_MAX_NDIM]
        cdef int64_t hi[PAGE_MAX_NDIM]
        cdef int64_t val[16]
        cdef int64_t n, d
        geo = self.geometry(table)
        if geo is None:
            return None
        n = geo[0]
        _read_row(point, p, <int>n, "point")
        for d in range(n):
            if p[d] < 0:
                return None
        if not self.lookup(table, p, val, lo, hi):
            return None
        return tuple(val[d] for d in range(self.nvalues))

    def put_box(self, int64_t table, lo, hi, value):
        """``put`` from Python (checks its arguments like MemoTable.put)."""
        cdef int64_t clo[PAGE_MAX_NDIM]
        cdef int64_t chi[PAGE_MAX_NDIM]
        cdef int64_t cval[16]
        cdef int64_t n, d
        geo = self.geometry(table)
        if geo is None:
            raise ValueError(f"table {table} is not declared")
        n = geo[0]
        _read_row(lo, clo, <int>n, "lo")
        _read_row(hi, chi, <int>n, "hi")
        _read_row(value, cval, <int>self.nvalues, "value")
        for d in range(n):
            if not 0 <= clo[d] <= chi[d]:
                raise ValueError(f"box needs 0 <= lo <= hi, got {clo[d]}, {chi[d]} at {d}")
        self.put(table, clo, chi, cval)

    def register(self, int64_t table, page, int64_t version):
        """The store holds ``page`` of ``table`` at ``version`` (>= 1). A loaded clean copy
        of an older version is dropped (reloaded when next touched); a dirty one is kept,
        and merged into the newer version when it is saved."""
        geo = self.geometry(table)
        if geo is None:
            raise ValueError(f"table {table} is not declared")
        if len(page) != geo[0]:
            raise ValueError(f"a page of table {table} has {geo[0]} coordinates, got "
                             f"{len(page)}")
        self.register_many(table, np.asarray(page, "<i8").tobytes(),
                           np.array([version], np.int64))

    def register_many(self, int64_t table, const unsigned char[::1] pages,
                      const int64_t[::1] versions):
        """``register`` for many pages at once: ``pages`` holds their coordinates as
        little-endian int64 (one row of ndim per page), ``versions`` their versions.
        ValueError if a coordinate is outside [0, 2^62] or a version outside [1, 2^62)."""
        cdef int64_t n, d, i, s, v
        cdef int64_t key[KEY_WIDTH]
        cdef const int64_t* coords
        geo = self.geometry(table)
        if geo is None:
            raise ValueError(f"table {table} is not declared")
        n = geo[0]
        if pages.shape[0] != versions.shape[0] * n * 8:
            raise ValueError("page coordinates and versions disagree in length")
        coords = <const int64_t*>&pages[0] if pages.shape[0] else NULL
        for i in range(versions.shape[0]):
            v = versions[i]
            if not 1 <= v < (<int64_t>1 << 62):
                raise ValueError(f"page version {v} out of range")
            memset(key, 0, sizeof(key))
            key[0] = table
            for d in range(n):
                # little-endian on every target morello supports (x86-64)
                key[1 + d] = coords[i * n + d]
                if not 0 <= key[1 + d] <= (<int64_t>1 << 62):
                    raise ValueError(f"page coordinate {key[1 + d]} out of range")
            s = self._slot(key, True)
            self.s_stored.data[s] = 1
            if self.s_version.data[s] >= v:
                continue
            # A newer part exists: drop the loaded parts (reloaded when next touched).
            if self.s_table[s] is not None:
                self._lru_unlink(s)
                self.s_table[s] = None
                self.loaded_bytes -= self.s_bytes.data[s]
                self.s_bytes.data[s] = 0
            self.s_version.data[s] = v

    def dirty(self):
        """Slots with puts not yet saved."""
        return [s for s in range(len(self.s_table)) if self.s_dirty.data[s]]

    def take_dirty(self):
        """Slots made dirty since the last call (still dirty now)."""
        out = [self.fresh_dirty.data[i] for i in range(self.fresh_dirty.n)
               if self.s_dirty.data[self.fresh_dirty.data[i]]]
        self.fresh_dirty.n = 0
        return out

    def slot(self, int64_t s):
        """``(table, page, version, stored)`` of slot ``s``."""
        if not 0 <= s < len(self.s_table):
            raise IndexError(f"no slot {s}")
        table = self.s_keys.data[s * KEY_WIDTH]
        n = self.g_ndim.data[table]
        page = tuple(self.s_keys.data[s * KEY_WIDTH + 1 + d] for d in range(n))
        return table, page, self.s_version.data[s], bool(self.s_stored.data[s])

    def put_rows(self, int64_t table, rows, bint prepare=False):
        """``put_page`` from Python: ``rows`` an (n, 2 * ndim + nvalues) int64 array.
        ``prepare``: first ``prepare_rows`` them, as persist's row thread does (for a
        table declared with its exact dims)."""
        cdef int64_t n, nd, exact, carved = 0
        cdef uint64_t merge
        cdef int64_t* p
        cdef vec_t spare
        geo = self.geometry(table)
        if geo is None:
            raise ValueError(f"table {table} is not declared")
        a = np.array(rows, dtype=np.int64, order="C", copy=True)
        if a.ndim != 2 or a.shape[1] != 2 * geo[0] + self.nvalues:
            raise ValueError(f"rows must be (n, {2 * geo[0] + self.nvalues})")
        cdef int64_t[:, ::1] r = a
        n = a.shape[0]
        if not n:
            return
        p = &r[0, 0]
        self.page_geometry(table, &nd, &exact, &merge)
        if not prepare or exact < 0:
            self.put_page(table, n, p)
            return
        memset(&spare, 0, sizeof(vec_t))
        try:
            n = prepare_rows(nd, self.nvalues, <uint64_t>exact, merge, n, &p, &spare, &carved)
            self.bulk_carved += carved
            self.put_page(table, n, p, True)
        finally:
            _vec_free(&spare)

    def fresh_frozen(self, int64_t s):
        """The fresh part of slot ``s`` if ``put_page`` built it (a FrozenPage), or None."""
        self.slot(s)
        fresh = self.s_fresh[s]
        return fresh if type(fresh) is FrozenPage else None

    def fresh_arrays(self, int64_t s):
        """``to_arrays()`` of the boxes put into slot ``s`` since it was last saved."""
        table, _, _, _ = self.slot(s)
        fresh = self.s_fresh[s]
        return (fresh if fresh is not None else self.new_table(table)).to_arrays()

    def arrays(self, int64_t s):
        """All boxes of slot ``s`` (loading it), newer parts over older ones."""
        table, _, _, _ = self.slot(s)
        parts = list(self._parts(s))
        if self.s_fresh[s] is not None:
            parts.insert(0, self.s_fresh[s])
        if len(parts) == 1:
            return parts[0].to_arrays()
        t = self.new_table(table)
        for part in reversed(parts):
            for a, b, v in zip(*part.to_arrays()):
                t.put(a, b, v)
        return t.to_arrays()

    def saved(self, int64_t s, int64_t version, part=None, bint replaces=False):
        """The store now holds the fresh part of slot ``s`` as its part ``version``:
        ``part`` is that part as stored (a FrozenPage or MemoTable, kept if the older
        parts are loaded); ``replaces``: it is now the page's only part (a compaction)."""
        self.slot(s)
        if self.s_table[s] is not None:
            if part is None:
                self.s_table[s] = None  # reloaded when next touched
            elif replaces:
                self.s_table[s] = [part]
            else:
                self.s_table[s].insert(0, part)
        self.s_fresh[s] = None
        self.s_version.data[s] = max(version, self.s_version.data[s])
        self.s_stored.data[s] = 1
        self.s_dirty.data[s] = 0
        parts = self.s_table[s]
        self.loaded_bytes -= self.s_bytes.data[s]
        self.s_bytes.data[s] = 0 if parts is None else sum(t.nbytes() for t in parts)
        self.loaded_bytes += self.s_bytes.data[s]
        if parts is not None:
            self._lru_push(s)
        self._evict()

    def slots_of(self, int64_t table):
        """The slots of ``table``."""
        return [s for s in range(len(self.s_table))
                if self.s_keys.data[s * KEY_WIDTH] == table]

    @property
    def n_slots(self):
        return len(self.s_table)

    @property
    def n_loaded(self):
        return sum(t is not None and len(t) > 0 for t in self.s_table)

    def stats(self):
        """Counters: finds answered by loaded pages, pages loaded, pages evicted, finds
        of pages the store does not have, loaded bytes and the budget."""
        return {"hits": self.hits, "loads": self.loads, "evictions": self.evictions,
                "bulk_boxes": self.bulk_boxes, "bulk_carved": self.bulk_carved,
                "absent": self.absent, "loaded_pages": self.n_loaded,
                "loaded_bytes": self.loaded_bytes, "capacity": self.capacity}
