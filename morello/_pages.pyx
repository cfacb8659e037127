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

Concurrency: like MemoTable, not locked; the Python methods keep the GIL.
"""
cimport cython
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint64_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdlib cimport free
from libc.string cimport memcpy, memmove, memset

import numpy as np

from morello._memo cimport MemoTable, _read_row
from morello._vec cimport (_grow, _map_free, _map_get, _map_put, _push, _reserve, _sort_pairs,
                           _vec_free)


def doubling_block(int64_t first):
    """The block whose pages double in length after a first page of ``first`` (a power of
    two) values."""
    if first < 1 or first & (first - 1) or first > (1 << 62):
        raise ValueError(f"first page of {first} values: need a power of two")
    return -1 - (first.bit_length() - 1)


def page_range(int64_t page, int64_t block):
    """The first and last coordinate of ``page`` along a coordinate of ``block``."""
    return page_start(page, block), page_end(page, block)


cdef inline int _cmp_keys(const int64_t* x, const int64_t* y, int64_t n) noexcept nogil:
    """Lexicographic order of two rows of ``n`` keys (-1, 0, 1)."""
    cdef int64_t k
    for k in range(n):
        if x[k] != y[k]:
            return -1 if x[k] < y[k] else 1
    return 0


cdef int _order_keys(const int64_t* keys, int64_t n, int64_t nk, int64_t* idx) except -1:
    """The row indices 0..n-1 into ``idx`` in the lexicographic order of the ``n`` rows of
    ``nk`` keys: by a radix sort of the keys packed into one integer (each key less its
    least value, in as many bits as its range needs, the first key highest) when they fit
    in 63 bits, as a page's mostly do; else by comparisons."""
    cdef int64_t i, k, bits = 0
    cdef int64_t kmin[PAGE_MAX_NDIM]
    cdef int64_t shift[PAGE_MAX_NDIM]
    cdef int64_t cols[PAGE_MAX_NDIM]
    cdef uint64_t span, packed
    cdef uint64_t* pairs = NULL
    for k in range(nk):
        kmin[k] = keys[k]
        span = 0
        for i in range(n):
            if keys[i * nk + k] < kmin[k]:
                kmin[k] = keys[i * nk + k]
        for i in range(n):
            if <uint64_t>(keys[i * nk + k] - kmin[k]) > span:
                span = <uint64_t>(keys[i * nk + k] - kmin[k])
        shift[k] = 64 - __builtin_clzll(span) if span else 0
        bits += shift[k]
    if bits > 63:
        for k in range(nk):
            cols[k] = k
        return _sort_rows_by(<int64_t*>keys, n, nk, cols, nk, idx)
    bits = 0
    for k in range(nk - 1, -1, -1):  # widths into offsets: the last key lowest
        shift[k], bits = bits, bits + shift[k]
    try:
        _grow(<void**>&pairs, n * 2 * sizeof(uint64_t))
        for i in range(n):
            packed = 0
            for k in range(nk):
                packed |= <uint64_t>(keys[i * nk + k] - kmin[k]) << shift[k]
            pairs[2 * i] = packed
            pairs[2 * i + 1] = <uint64_t>i
        _sort_pairs(pairs, n)
        for i in range(n):
            idx[i] = <int64_t>pairs[2 * i + 1]
    finally:
        free(pairs)
    return 0


@cython.final
cdef class FrozenPage:
    """A read-only page in the form it is stored: boxes as narrow little-endian columns
    (``morello.pageblob``'s payload: lo, extent hi - lo, values, grouped by width), in
    the order of their *exact* coordinates (those in which every box is a single point),
    so that the boxes of a point are found by a binary search over the columns
    themselves, with no index beside the payload. (A part stored in another order is
    sorted once, when it is loaded.) About a twelfth of a MemoTable's memory, and built
    without a tree.

    ValueError if a box is not a single point in an exact dimension, or if two boxes with
    the same exact coordinates overlap."""

    def __cinit__(self, bytes payload, bytes widths, int64_t n, int64_t ndim,
                  int64_t nvalues, exact_dims):
        cdef int64_t ncols = 2 * ndim + nvalues, c, pos = 0, w, i, j, k, d, t, nx, nk
        cdef int64_t* column = NULL
        cdef int64_t* keys = NULL
        cdef int64_t* box = NULL
        cdef int64_t* idx = NULL
        cdef const int64_t* a
        cdef const int64_t* b
        cdef int64_t dims[PAGE_MAX_NDIM]
        cdef bint overlap, in_order = True
        if not 1 <= ndim <= PAGE_MAX_NDIM or not 1 <= nvalues <= 16 or n < 0 \
                or n >= (1 << 31) or len(widths) != ncols:
            raise ValueError("malformed page shape")
        self.n, self.ndim, self.nvalues = n, ndim, nvalues
        self.exact_dims = 0
        for d in exact_dims:
            if not 0 <= d < ndim:
                raise ValueError(f"exact dim {d} out of range")
            self.exact_dims |= (<uint64_t>1) << d
        for c in range(ncols):
            self.width[c] = widths[c]
            if self.width[c] not in (0, 1, 2, 4, 8) or (self.width[c] == 0 and n == 0):
                raise ValueError("a column of unknown width")
        for w in (1, 2, 4, 8):
            for c in range(ncols):
                if self.width[c] == w:
                    self.offset[c] = pos
                    pos += n * w
        for c in range(ncols):  # constant columns: their one value, 8 bytes, at the end
            if self.width[c] == 0:
                self.offset[c] = pos
                pos += 8
        if len(payload) != pos:
            raise ValueError(f"page payload of {len(payload)} bytes, expected {pos}")
        self.payload = payload
        self.data = payload
        # The order's keys: the exact dims whose column varies, in dim order (one that
        # holds a single value is compared once per lookup).
        self.nkeys = self.nfixed = 0
        for d in range(ndim):
            if (self.exact_dims >> d) & 1:
                if self.width[d] == 0:
                    self.fixed[self.nfixed] = d
                    self.nfixed += 1
                else:
                    self.key[self.nkeys] = d
                    self.nkeys += 1
        nk = self.nkeys
        if n == 0:
            return
        try:
            _grow(<void**>&column, n * sizeof(int64_t))
            _grow(<void**>&keys, n * max(nk, 1) * sizeof(int64_t))
            for d in range(ndim):
                if not (self.exact_dims >> d) & 1:
                    continue
                self._column(ndim + d, column)
                for i in range(n):
                    if column[i] != 0:
                        raise ValueError("a box spans a range in a coordinate whose boxes "
                                         "are single points")
            for k in range(nk):
                self._column(self.key[k], column)
                for i in range(n):
                    keys[i * nk + k] = column[i]
            for i in range(1, n):
                if _cmp_keys(&keys[(i - 1) * nk], &keys[i * nk], nk) > 0:
                    in_order = False
                    break
            if not in_order:
                _grow(<void**>&idx, n * sizeof(int64_t))
                _order_keys(keys, n, nk, idx)
                self._permute(idx)
                for k in range(nk):
                    self._column(self.key[k], column)
                    for i in range(n):
                        keys[i * nk + k] = column[i]
            # Boxes of the same exact coordinates are neighbours: they must not overlap
            # in the other coordinates (compared on those decoded once, as [lo, hi]).
            nx = 0
            for d in range(ndim):
                if not (self.exact_dims >> d) & 1:
                    dims[nx] = d
                    nx += 1
            if nx == 0:
                for i in range(n - 1):
                    if _cmp_keys(&keys[i * nk], &keys[(i + 1) * nk], nk) == 0:
                        raise ValueError(f"boxes {i} and {i + 1} overlap")
                return
            _grow(<void**>&box, n * 2 * nx * sizeof(int64_t))
            for k in range(nx):
                self._column(dims[k], column)
                for i in range(n):
                    box[i * 2 * nx + 2 * k] = column[i]
                self._column(ndim + dims[k], column)
                for i in range(n):
                    box[i * 2 * nx + 2 * k + 1] = box[i * 2 * nx + 2 * k] + column[i]
            i = 0
            while i < n:
                j = i + 1
                while j < n and _cmp_keys(&keys[i * nk], &keys[j * nk], nk) == 0:
                    j += 1
                for k in range(i, j):
                    a = &box[k * 2 * nx]
                    for t in range(k + 1, j):
                        b = &box[t * 2 * nx]
                        overlap = True
                        for d in range(nx):
                            if a[2 * d + 1] < b[2 * d] or b[2 * d + 1] < a[2 * d]:
                                overlap = False
                                break
                        if overlap:
                            raise ValueError(f"boxes {k} and {t} overlap")
                i = j
        finally:
            free(column)
            free(keys)
            free(box)
            free(idx)

    cdef int _permute(self, const int64_t* idx) except -1:
        """Reorder the boxes (in a new payload): box i becomes the old box ``idx[i]``."""
        cdef int64_t c, i, w, n = self.n, size = len(self.payload)
        cdef const unsigned char* src = self.data
        cdef unsigned char* dst
        out = PyBytes_FromStringAndSize(NULL, size)
        dst = <unsigned char*>PyBytes_AS_STRING(out)
        memcpy(dst, src, size)  # the constant columns stay as they are
        for c in range(2 * self.ndim + self.nvalues):
            w = self.width[c]
            if w == 0:
                continue
            for i in range(n):
                memcpy(dst + self.offset[c] + i * w, src + self.offset[c] + idx[i] * w, w)
        self.payload = out
        self.data = out
        return 0

    cdef int64_t col(self, int64_t c, int64_t i) noexcept nogil:
        """Entry i of column c (little-endian, as x86-64 stores it)."""
        cdef const unsigned char* p = self.data + self.offset[c]
        cdef int64_t w = self.width[c]
        if w == 1:
            return (<const int8_t*>p)[i]
        if w == 2:
            return (<const int16_t*>p)[i]
        if w == 4:
            return (<const int32_t*>p)[i]
        if w == 0:  # a constant column
            return (<const int64_t*>p)[0]
        return (<const int64_t*>p)[i]

    cdef void _column(self, int64_t c, int64_t* out) noexcept nogil:
        """All of column c into ``out``."""
        cdef const unsigned char* p = self.data + self.offset[c]
        cdef int64_t w = self.width[c], i
        if w == 1:
            for i in range(self.n):
                out[i] = (<const int8_t*>p)[i]
        elif w == 2:
            for i in range(self.n):
                out[i] = (<const int16_t*>p)[i]
        elif w == 4:
            for i in range(self.n):
                out[i] = (<const int32_t*>p)[i]
        elif w == 0:
            for i in range(self.n):
                out[i] = (<const int64_t*>p)[0]
        else:
            memcpy(out, p, self.n * sizeof(int64_t))

    cdef int64_t _cmp_point(self, const int64_t* pt, int64_t b) noexcept nogil:
        """``pt`` against box ``b`` in the boxes' order (-1, 0, 1)."""
        cdef int64_t k, d, x
        for k in range(self.nkeys):
            d = self.key[k]
            x = self.col(d, b)
            if pt[d] != x:
                return -1 if pt[d] < x else 1
        return 0

    cdef int64_t locate(self, const int64_t* pt) noexcept nogil:
        """The box holding ``pt``, or -1: a binary search for the first box of its exact
        coordinates, then those boxes in turn."""
        cdef int64_t lo = 0, hi = self.n, mid, b, d, x, k
        cdef bint inside
        if self.n == 0:
            return -1
        for k in range(self.nfixed):
            if pt[self.fixed[k]] != self.col(self.fixed[k], 0):
                return -1
        while lo < hi:
            mid = (lo + hi) // 2
            if self._cmp_point(pt, mid) > 0:
                lo = mid + 1
            else:
                hi = mid
        b = lo
        while b < self.n and self._cmp_point(pt, b) == 0:
            inside = True
            for d in range(self.ndim):
                x = self.col(d, b)
                if pt[d] < x or pt[d] > x + self.col(self.ndim + d, b):
                    inside = False
                    break
            if inside:
                return b
            b += 1
        return -1

    def get(self, point):
        """The value at ``point``, or None."""
        cdef int64_t p[PAGE_MAX_NDIM]
        cdef int64_t b
        _read_row(point, p, <int>self.ndim, "point")
        b = self.locate(p)
        if b < 0:
            return None
        return tuple(self.col(2 * self.ndim + j, b) for j in range(self.nvalues))

    def to_arrays(self):
        """(lo, hi, values) int64 arrays of its boxes, sorted by lo."""
        cdef int64_t i, d
        lo = np.empty((self.n, self.ndim), np.int64)
        hi = np.empty((self.n, self.ndim), np.int64)
        values = np.empty((self.n, self.nvalues), np.int64)
        cdef int64_t[:, ::1] L = lo
        cdef int64_t[:, ::1] H = hi
        cdef int64_t[:, ::1] V = values
        for i in range(self.n):
            for d in range(self.ndim):
                L[i, d] = self.col(d, i)
                H[i, d] = L[i, d] + self.col(self.ndim + d, i)
            for d in range(self.nvalues):
                V[i, d] = self.col(2 * self.ndim + d, i)
        order = np.lexsort(lo.T[::-1])
        return lo[order], hi[order], values[order]

    def rows(self):
        """Its boxes as one (n, 2 * ndim + nvalues) int64 array of rows [lo, hi, values],
        in stored order."""
        cdef int64_t nd = self.ndim, w = 2 * nd + self.nvalues, c, i
        out = np.empty((self.n, w), np.int64)
        if self.n == 0:
            return out
        cdef int64_t[:, ::1] R = out
        cdef int64_t* column = NULL
        try:
            _grow(<void**>&column, self.n * sizeof(int64_t))
            for c in range(w):
                self._column(c, column)
                for i in range(self.n):
                    R[i, c] = column[i] + (R[i, c - nd] if nd <= c < 2 * nd else 0)
        finally:
            free(column)
        return out

    def __len__(self):
        return self.n

    def nbytes(self):
        return len(self.payload) + 512

    def check_bounds(self, lo_min, hi_max, value_min, value_max, value_names=None):
        """ValueError unless every box lies in ``lo_min <= lo <= hi <= hi_max`` (one bound
        per coordinate, 0 <= lo_min, hi_max <= 2^62) and every value column ``j`` in
        ``[value_min[j], value_max[j]]`` (what the store checks of a page it reads; the
        message names column j by ``value_names[j]``, if given)."""
        cdef int64_t nd = self.ndim, nv = self.nvalues, d, j, i
        cdef int64_t lmin[PAGE_MAX_NDIM]
        cdef int64_t hmax[PAGE_MAX_NDIM]
        cdef int64_t vmin[16]
        cdef int64_t vmax[16]
        cdef int64_t* a = NULL
        cdef int64_t* b = NULL
        _read_row(lo_min, lmin, <int>nd, "lo_min")
        _read_row(hi_max, hmax, <int>nd, "hi_max")
        _read_row(value_min, vmin, <int>nv, "value_min")
        _read_row(value_max, vmax, <int>nv, "value_max")
        for d in range(nd):
            if lmin[d] < 0 or hmax[d] > (<int64_t>1 << 62):
                raise ValueError("bounds out of range")
        try:
            _grow(<void**>&a, max(self.n, 1) * sizeof(int64_t))
            _grow(<void**>&b, max(self.n, 1) * sizeof(int64_t))
            for d in range(nd):
                self._column(d, a)
                self._column(nd + d, b)
                for i in range(self.n):
                    # lo within its bounds, then the extent (so the sum cannot overflow)
                    if a[i] < lmin[d] or a[i] > hmax[d] or b[i] < 0 \
                            or b[i] > hmax[d] - a[i]:
                        raise ValueError("a box lies outside its page or beyond the "
                                         "target's coordinates")
            for j in range(nv):
                self._column(2 * nd + j, a)
                for i in range(self.n):
                    if not vmin[j] <= a[i] <= vmax[j]:
                        what = value_names[j] if value_names else f"value (column {j})"
                        raise ValueError(f"a stored {what} is out of range")
        finally:
            free(a)
            free(b)

    def stored_form(self):
        """``(payload, widths)``: its columns as ``morello.pageblob`` stores them."""
        cdef int64_t c
        return self.payload, bytes([self.width[c] for c in range(2 * self.ndim
                                                                 + self.nvalues)])


cdef int64_t _lookup_in(object t, const int64_t* pt, int64_t* val, int64_t* lo,
                        int64_t* hi) except -1:
    """Copy the box of ``t`` (a FrozenPage or MemoTable) holding ``pt``; 1, or 0 if none."""
    cdef int64_t b, d, n
    cdef MemoTable m
    cdef FrozenPage f
    if type(t) is FrozenPage:
        f = t
        b = f.locate(pt)
        if b < 0:
            return 0
        n = f.ndim
        for d in range(n):
            lo[d] = f.col(d, b)
            hi[d] = lo[d] + f.col(n + d, b)
        for d in range(f.nvalues):
            val[d] = f.col(2 * n + d, b)
        return 1
    m = t
    b = m._locate(pt)
    if b < 0:
        return 0
    for d in range(m.ndim):
        lo[d] = m.box_lo(b, d)
        hi[d] = m.box_hi(b, d)
    for d in range(m.nvalues):
        val[d] = m.box_value(b, d)
    return 1


# ---- boxes in bulk: merging and freezing a page's new boxes without a MemoTable --------
#
# A row is ``[lo (ndim), hi (ndim), values (nvalues)]`` int64s. ``_merge_rows`` merges
# rows that are neighbours along one dimension (adjacent there, equal everywhere else,
# values included) by sorting; ``_freeze_rows`` writes rows in the stored column form
# (``morello.pageblob``'s payload) as a FrozenPage. A save of a search's results uses both
# (``PageCache.put_page``): a few sorts per page instead of a tree insert per box.

cdef extern from "<stdlib.h>" nogil:
    void qsort_r(void* base, size_t n, size_t size,
                 int (*compar)(const void*, const void*, void*) noexcept nogil, void* arg)


cdef struct sort_by_t:        # what ``_by_cols`` compares: rows, their width, the columns
    const int64_t* rows
    int64_t width
    int64_t ncols
    int64_t cols[2 * PAGE_MAX_NDIM + 16]


cdef int _by_cols(const void* a, const void* b, void* arg) noexcept nogil:
    """Row indices by the columns of ``arg`` (a ``sort_by_t``), in order."""
    cdef const sort_by_t* by = <const sort_by_t*>arg
    cdef const int64_t* x = by.rows + (<const int64_t*>a)[0] * by.width
    cdef const int64_t* y = by.rows + (<const int64_t*>b)[0] * by.width
    cdef int64_t k, c
    for k in range(by.ncols):
        c = by.cols[k]
        if x[c] != y[c]:
            return -1 if x[c] < y[c] else 1
    return 0


cdef int _sort_rows_by(int64_t* rows, int64_t n, int64_t w, const int64_t* cols,
                       int64_t ncols, int64_t* idx) noexcept nogil:
    """Sort the row indices 0..n-1 into ``idx`` by the columns ``cols`` (thread-safe:
    persist's row thread merges rows while the putting thread freezes pages)."""
    cdef sort_by_t by
    cdef int64_t i
    for i in range(n):
        idx[i] = i
    for i in range(ncols):
        by.cols[i] = cols[i]
    by.rows, by.width, by.ncols = rows, w, ncols
    qsort_r(idx, n, sizeof(int64_t), _by_cols, &by)
    return 0


cdef int64_t _varying(const int64_t* rows, int64_t n, int64_t w, int64_t* cols) noexcept nogil:
    """The columns in which some row differs from the first, into ``cols``; their count."""
    cdef int64_t c, i, k = 0
    for c in range(w):
        for i in range(1, n):
            if rows[i * w + c] != rows[c]:
                cols[k] = c
                k += 1
                break
    return k


cdef int64_t _merge_rows(int64_t* rows, int64_t n, int64_t ndim, int64_t nvalues,
                         int64_t d) except -1 nogil:
    """Merge neighbours along ``d`` in place; return the rows left (first in ``rows``)."""
    cdef int64_t w = 2 * ndim + nvalues, i, out = 0, c, k, nvary, ncols = 0
    cdef int64_t vary[2 * PAGE_MAX_NDIM + 16]
    cdef int64_t cols[2 * PAGE_MAX_NDIM + 16]
    cdef int64_t* idx = NULL
    cdef int64_t* tmp = NULL
    cdef int64_t* o
    cdef const int64_t* x
    cdef bint same, at_d = False
    if n < 2:
        return n
    nvary = _varying(rows, n, w, vary)
    for k in range(nvary):
        c = vary[k]
        if c == d or c == ndim + d:
            at_d = True
        else:
            cols[ncols] = c
            ncols += 1
    if not at_d:  # all rows at one [lo, hi] along d: none is a neighbour of another
        return n
    cols[ncols] = d
    try:
        _grow(<void**>&idx, n * sizeof(int64_t))
        _grow(<void**>&tmp, n * w * sizeof(int64_t))
        _sort_rows_by(rows, n, w, cols, ncols + 1, idx)
        memcpy(tmp, &rows[idx[0] * w], w * sizeof(int64_t))
        for i in range(1, n):
            x = &rows[idx[i] * w]
            o = &tmp[out * w]
            same = o[ndim + d] + 1 == x[d]
            if same:
                for k in range(ncols):
                    c = cols[k]
                    if o[c] != x[c]:
                        same = False
                        break
            if same:
                o[ndim + d] = x[ndim + d]
            else:
                out += 1
                memcpy(&tmp[out * w], x, w * sizeof(int64_t))
        memcpy(rows, tmp, (out + 1) * w * sizeof(int64_t))
    finally:
        free(idx)
        free(tmp)
    return out + 1


cdef int64_t _merge_runs(int64_t* rows, int64_t n, int64_t ndim, int64_t nvalues,
                         uint64_t merge) except -1 nogil:
    """Merge neighbours along the dims of ``merge``: rows that may merge are found by a
    hash of every other column, and each group of equal hashes is merged on its own
    (``_merge_rows`` per dim, which compares the columns themselves; a second round if
    two dims merged). Returns the rows left, first in ``rows``, in their order: a merged
    group's rows take the places of its first members (so rows in the order of their
    exact coordinates stay so, and a FrozenPage need not sort them). Only the rows of
    groups of two or more are copied (copying every row twice was a tenth of the write
    after a 1024^3 search)."""
    cdef int64_t w = 2 * ndim + nvalues, i = 0, j, k, c, d, m, before, merged, out = 0
    cdef int64_t ncols = 0, cap = 0, slot
    cdef int64_t cols[2 * PAGE_MAX_NDIM + 16]
    cdef uint64_t h
    cdef uint64_t* pairs = NULL
    cdef int64_t* tmp = NULL
    cdef unsigned char* keep = NULL
    cdef bint dropped = False
    if n < 2 or not merge:
        return n
    for c in range(w):  # the columns rows that merge share
        d = c if c < ndim else c - ndim
        if not (c < 2 * ndim and (merge >> d) & 1):
            cols[ncols] = c
            ncols += 1
    try:
        _grow(<void**>&pairs, n * 2 * sizeof(uint64_t))
        for i in range(n):
            h = 1469598103934665603ULL
            for k in range(ncols):
                h = (h ^ <uint64_t>rows[i * w + cols[k]]) * 1099511628211ULL
            pairs[2 * i] = h ^ (h >> 29)
            pairs[2 * i + 1] = <uint64_t>i
        _sort_pairs(pairs, n)  # stable: a group's members in their order
        i = 0
        while i < n:
            j = i + 1
            while j < n and pairs[2 * j] == pairs[2 * i]:
                j += 1
            m = j - i
            if m > 1:
                if m > cap:
                    cap = m
                    _grow(<void**>&tmp, cap * w * sizeof(int64_t))
                for k in range(m):
                    memcpy(&tmp[k * w], &rows[pairs[2 * (i + k) + 1] * w],
                           w * sizeof(int64_t))
                before = m
                for k in range(2):
                    merged = 0
                    for d in range(ndim):
                        if (merge >> d) & 1:
                            c = m
                            m = _merge_rows(tmp, m, ndim, nvalues, d)
                            merged += m < c
                    if merged < 2:
                        break
                for k in range(before):
                    slot = <int64_t>pairs[2 * (i + k) + 1]
                    if k < m:
                        memcpy(&rows[slot * w], &tmp[k * w], w * sizeof(int64_t))
                    else:
                        if keep == NULL:
                            _grow(<void**>&keep, n)
                            memset(keep, 1, n)
                        keep[slot] = 0
                        dropped = True
            i = j
        if not dropped:
            return n
        for i in range(n):
            if keep[i]:
                if out != i:
                    memcpy(&rows[out * w], &rows[i * w], w * sizeof(int64_t))
                out += 1
    finally:
        free(pairs)
        free(tmp)
        free(keep)
    return out


cdef bint _rows_overlap(const int64_t* x, const int64_t* y, int64_t ndim) noexcept nogil:
    cdef int64_t d
    for d in range(ndim):
        if x[ndim + d] < y[d] or y[ndim + d] < x[d]:
            return False
    return True


cdef int _push_row(vec_t* v, const int64_t* e, int64_t w) except -1 nogil:
    """Push the ``w`` entries of row ``e``."""
    _reserve(v, v.n + w)
    memcpy(&v.data[v.n], e, w * sizeof(int64_t))
    v.n += w
    return 0


cdef int _push_slab(vec_t* v, const int64_t* e, int64_t w, int64_t c,
                    int64_t x) except -1 nogil:
    """Push row ``e`` with column ``c`` set to ``x``."""
    _push_row(v, e, w)
    v.data[v.n - w + c] = x
    return 0


cdef int _carve(int64_t nd, int64_t nvalues, uint64_t exact, int64_t n, int64_t* rows,
                vec_t* out, int64_t* carved) except -1 nogil:
    """If boxes of a run of rows with the same exact coordinates (one Spec; the
    solver writes a Spec's rows together) overlap, write all rows, made disjoint, to
    ``out`` and return 1 (later rows over earlier ones, MemoTable's rule: safe, as
    every row is optimal throughout its box); else return 0 (``out`` untouched).
    Overlaps between rows that are not neighbours are not looked for: the FrozenPage
    made of them refuses them, and ``put_page`` falls back to ``put``. ``nd``: the
    table's coordinates, ``exact``: the mask of its exact dims; ``carved[0]`` counts the
    groups carved."""
    cdef int64_t w = 2 * nd + nvalues, i, j, k, t, d
    cdef int64_t nexact = 0, ncols = 0, nvary
    cdef bint same, overlap, any_overlap = False
    cdef vec_t cur, nxt, swap
    cdef int64_t e[2 * PAGE_MAX_NDIM + 16]
    cdef int64_t vary[2 * PAGE_MAX_NDIM + 16]
    cdef int64_t cols[2 * PAGE_MAX_NDIM + 16]
    memset(&cur, 0, sizeof(vec_t))
    memset(&nxt, 0, sizeof(vec_t))
    if n < 2:
        return 0
    nvary = _varying(rows, n, w, vary)
    for k in range(nvary):  # the exact coordinates that vary in the page
        if vary[k] < nd and (exact >> vary[k]) & 1:
            cols[ncols] = vary[k]
            ncols += 1
    nexact = ncols
    try:
        i = 0
        while i < n:
            j = i + 1
            while j < n:
                same = True
                for k in range(nexact):
                    if rows[j * w + cols[k]] != rows[i * w + cols[k]]:
                        same = False
                        break
                if not same:
                    break
                j += 1
            overlap = False
            for k in range(i, j):
                for t in range(k + 1, j):
                    if _rows_overlap(&rows[k * w], &rows[t * w], nd):
                        overlap = True
                        break
                if overlap:
                    break
            if overlap and not any_overlap:  # the groups before were disjoint
                any_overlap = True
                _push_row(out, rows, i * w)
            if not overlap:
                if any_overlap:
                    _push_row(out, &rows[i * w], (j - i) * w)
                i = j
                continue
            carved[0] += 1
            # Put rows i..j-1 in turn: each cuts the boxes before it that it overlaps
            # into the slabs outside it (as MemoTable._put), then joins them.
            cur.n = 0
            for k in range(i, j):
                nxt.n = 0
                for t in range(cur.n // w):
                    if not _rows_overlap(&cur.data[t * w], &rows[k * w], nd):
                        _push_row(&nxt, &cur.data[t * w], w)
                        continue
                    memcpy(e, &cur.data[t * w], w * sizeof(int64_t))
                    for d in range(nd):
                        if e[d] < rows[k * w + d]:
                            _push_slab(&nxt, e, w, nd + d, rows[k * w + d] - 1)
                            e[d] = rows[k * w + d]
                        if e[nd + d] > rows[k * w + nd + d]:
                            _push_slab(&nxt, e, w, d, rows[k * w + nd + d] + 1)
                            e[nd + d] = rows[k * w + nd + d]
                _push_row(&nxt, &rows[k * w], w)
                swap = cur
                cur = nxt
                nxt = swap
            _push_row(out, cur.data, cur.n)
            i = j
    finally:
        _vec_free(&cur)
        _vec_free(&nxt)
    return 1 if any_overlap else 0


cdef int64_t prepare_rows(int64_t nd, int64_t nvalues, uint64_t exact, uint64_t merge,
                          int64_t n, int64_t** rows, vec_t* spare,
                          int64_t* carved) except -1 nogil:
    """Make the ``n`` rows ``rows[0]`` of one page ready to freeze: carved where one Spec's
    boxes overlap (``_carve``), then merged along the dims of ``merge`` (``_merge_runs``).
    Returns the rows left; ``rows[0]`` may then point into ``spare`` (the caller frees it).
    Needs no GIL and no PageCache (``nd``, ``exact`` and ``merge`` are the table's: see
    ``PageCache.page_geometry``): persist's row thread runs it."""
    cdef int64_t w = 2 * nd + nvalues
    cdef vec_t out
    memset(&out, 0, sizeof(vec_t))
    try:
        if _carve(nd, nvalues, exact, n, rows[0], &out, carved):
            n = out.n // w
            _vec_free(spare)  # (rows may have been in it: out is a copy)
            spare[0] = out
            memset(&out, 0, sizeof(vec_t))
            rows[0] = spare.data
    finally:
        _vec_free(&out)
    return _merge_runs(rows[0], n, nd, nvalues, merge)


cdef inline int64_t _width_of(int64_t lo, int64_t hi) noexcept nogil:
    """The narrowest signed width in bytes (1, 2, 4, 8) holding [lo, hi]."""
    if lo >= -(1 << 7) and hi < (1 << 7):
        return 1
    if lo >= -(1 << 15) and hi < (1 << 15):
        return 2
    if lo >= -(<int64_t>1 << 31) and hi < (<int64_t>1 << 31):
        return 4
    return 8


cdef FrozenPage _freeze_rows(const int64_t* rows, int64_t n, int64_t ndim, int64_t nvalues,
                             exact_dims):
    """The FrozenPage of ``n`` rows (ValueError if they are not a valid page: a range in
    an exact dim, or overlapping boxes)."""
    cdef int64_t ncols = 2 * ndim + nvalues, w = ncols, c, i, x, v, size = 0, pos = 0
    cdef int64_t cmin[2 * PAGE_MAX_NDIM + 16]
    cdef int64_t cmax[2 * PAGE_MAX_NDIM + 16]
    cdef unsigned char cw[2 * PAGE_MAX_NDIM + 16]
    cdef char* out
    if not 1 <= ndim <= PAGE_MAX_NDIM or not 1 <= nvalues <= 16:
        raise ValueError("malformed page shape")
    for c in range(ncols):
        cmin[c] = 0
        cmax[c] = 0
    for i in range(n):
        for c in range(ncols):
            x = rows[i * w + c]
            if ndim <= c < 2 * ndim:
                x = x - rows[i * w + c - ndim]  # the extent hi - lo
            if i == 0 or x < cmin[c]:
                cmin[c] = x
            if i == 0 or x > cmax[c]:
                cmax[c] = x
    for c in range(ncols):  # width 0: a constant column, its value stored once
        cw[c] = <unsigned char>((0 if cmin[c] == cmax[c] else _width_of(cmin[c], cmax[c]))
                                if n else 1)
        size += n * cw[c] if cw[c] else 8
    payload = PyBytes_FromStringAndSize(NULL, size)
    out = PyBytes_AS_STRING(payload)
    for x in (1, 2, 4, 8):
        for c in range(ncols):
            if cw[c] != x:
                continue
            for i in range(n):
                v = rows[i * w + c]
                if ndim <= c < 2 * ndim:
                    v = v - rows[i * w + c - ndim]
                if x == 1:
                    (<int8_t*>(out + pos))[i] = <int8_t>v
                elif x == 2:
                    (<int16_t*>(out + pos))[i] = <int16_t>v
                elif x == 4:
                    (<int32_t*>(out + pos))[i] = <int32_t>v
                else:
                    (<int64_t*>(out + pos))[i] = v
            pos += n * x
    for c in range(ncols):
        if cw[c] == 0:
            memcpy(out + pos, &cmin[c], 8)
            pos += 8
    widths = PyBytes_FromStringAndSize(<char*>cw, ncols)
    return FrozenPage(payload, widths, n, ndim, nvalues, exact_dims)


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
        cdef int64_t i
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
        cdef int64_t d
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
            for d in range(PAGE_MAX_NDIM):
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
        cdef int64_t d, b, n = self.g_ndim.data[table]
        memset(key, 0, KEY_WIDTH * sizeof(int64_t))
        key[0] = table
        for d in range(n):
            key[1 + d] = page_of(pt[d], self.g_block.data[table * PAGE_MAX_NDIM + d])
        return 0

    # ---- slots ----------------------------------------------------------------------

    cdef int64_t _slot(self, const int64_t* key, bint create) except -2:
        cdef int64_t s = _map_get(&self.index, key), d, cap
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
        if fresh is not None and _lookup_in(fresh, pt, val, lo, hi):
            return 1
        for t in self._parts(s):
            if _lookup_in(t, pt, val, lo, hi):
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

    cdef int _sort_exact(self, int64_t table, int64_t n, int64_t* rows) except -1:
        """Sort the rows by their exact coordinates (one Spec's rows together)."""
        cdef int64_t nd = self.g_ndim.data[table], w = 2 * nd + self.nvalues, i, k
        cdef int64_t ncols = 0, nvary
        cdef uint64_t exact = <uint64_t>self.g_exact.data[table]
        cdef int64_t vary[2 * PAGE_MAX_NDIM + 16]
        cdef int64_t cols[2 * PAGE_MAX_NDIM + 16]
        cdef int64_t* idx = NULL
        cdef int64_t* tmp = NULL
        nvary = _varying(rows, n, w, vary)
        for k in range(nvary):
            if vary[k] < nd and (exact >> vary[k]) & 1:
                cols[ncols] = vary[k]
                ncols += 1
        if n < 2 or not ncols:
            return 0
        try:
            _grow(<void**>&idx, n * sizeof(int64_t))
            _grow(<void**>&tmp, n * w * sizeof(int64_t))
            _sort_rows_by(rows, n, w, cols, ncols, idx)
            for i in range(n):
                memcpy(&tmp[i * w], &rows[idx[i] * w], w * sizeof(int64_t))
            memcpy(rows, tmp, n * w * sizeof(int64_t))
        finally:
            free(idx)
            free(tmp)
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
        cdef int64_t nd, nv = self.nvalues, w, i, d, b, s, m, k, npaged
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
                self._sort_exact(table, n[0], rows[0])
            if attempt or not prepared:
                n[0] = prepare_rows(nd, nv, exact_mask, self._merge_mask(table), n[0], rows,
                                    spare, &self.bulk_carved)
            try:
                return _freeze_rows(rows[0], n[0], nd, nv, exact)
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
            return _freeze_rows(NULL, 0, nd, self.nvalues,
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
