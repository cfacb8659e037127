"""The stored form of a page: ``FrozenPage``, read-only boxes in narrow columns.

A part of a page read from the store stays in the column form ``morello.pageblob``
unpacks (lo, extent, values, each column as narrow as its values allow), ordered by its
exact coordinates so a lookup is a binary search over the columns themselves.
``freeze_rows`` writes rows (``morello._rows``) in that form.
"""
cimport cython
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint64_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdlib cimport free
from libc.string cimport memcpy

import numpy as np

from morello._memo cimport MemoTable, _read_row
from morello._rows cimport sort_rows_by
from morello._vec cimport _grow, _sort_pairs

cdef extern from *:
    int __builtin_clzll(unsigned long long x) noexcept nogil


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
        return sort_rows_by(<int64_t*>keys, n, nk, cols, nk, idx)
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


cdef inline int64_t _width_of(int64_t lo, int64_t hi) noexcept nogil:
    """The narrowest signed width in bytes (1, 2, 4, 8) holding [lo, hi]."""
    if lo >= -(1 << 7) and hi < (1 << 7):
        return 1
    if lo >= -(1 << 15) and hi < (1 << 15):
        return 2
    if lo >= -(<int64_t>1 << 31) and hi < (<int64_t>1 << 31):
        return 4
    return 8


cdef FrozenPage freeze_rows(const int64_t* rows, int64_t n, int64_t ndim, int64_t nvalues,
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


cdef int64_t lookup_in_part(object t, const int64_t* pt, int64_t* val, int64_t* lo,
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
