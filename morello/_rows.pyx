"""Row algebra of a page's new boxes: sorting, merging neighbours, carving overlaps.

A row is ``[lo (ndim), hi (ndim), values (nvalues)]`` int64s. ``_merge_rows`` merges rows
that are neighbours along one dimension (adjacent there, equal everywhere else, values
included) by sorting; ``carve_rows`` cuts the boxes one Spec's results overlap into disjoint
ones; ``prepare_rows`` does both for one page. A save of a search's results uses them
(``PageCache.put_page``, ``morello._persist``): a few sorts per page instead of a tree
insert per box. Nothing here needs the GIL or knows a page cache.
"""
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

from morello._vec cimport _grow, _reserve, _sort_pairs, _vec_free, vec_t


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


cdef int sort_rows_by(int64_t* rows, int64_t n, int64_t w, const int64_t* cols,
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
        sort_rows_by(rows, n, w, cols, ncols + 1, idx)
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
    cdef int64_t ncols = 0, cap = 0, slot, _pass
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
                for _pass in range(2):
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


cdef int carve_rows(int64_t nd, int64_t nvalues, uint64_t exact, int64_t n, int64_t* rows,
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
    boxes overlap (``carve_rows``), then merged along the dims of ``merge`` (``_merge_runs``).
    Returns the rows left; ``rows[0]`` may then point into ``spare`` (the caller frees it).
    Needs no GIL and no PageCache (``nd``, ``exact`` and ``merge`` are the table's: see
    ``PageCache.page_geometry``): persist's row thread runs it."""
    cdef int64_t w = 2 * nd + nvalues
    cdef vec_t out
    memset(&out, 0, sizeof(vec_t))
    try:
        if carve_rows(nd, nvalues, exact, n, rows[0], &out, carved):
            n = out.n // w
            _vec_free(spare)  # (rows may have been in it: out is a copy)
            spare[0] = out
            memset(&out, 0, sizeof(vec_t))
            rows[0] = spare.data
    finally:
        _vec_free(&out)
    return _merge_runs(rows[0], n, nd, nvalues, merge)


cdef int sort_exact(int64_t nd, int64_t nvalues, uint64_t exact, int64_t n,
                    int64_t* rows) except -1 nogil:
    """Sort the ``n`` rows by their coordinates in the dims of ``exact`` (one Spec's rows
    together)."""
    cdef int64_t w = 2 * nd + nvalues, i, k
    cdef int64_t ncols = 0, nvary
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
        sort_rows_by(rows, n, w, cols, ncols, idx)
        for i in range(n):
            memcpy(&tmp[i * w], &rows[idx[i] * w], w * sizeof(int64_t))
        memcpy(rows, tmp, n * w * sizeof(int64_t))
    finally:
        free(idx)
        free(tmp)
    return 0
