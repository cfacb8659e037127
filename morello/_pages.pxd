"""Declarations of the page cache (implementation in _pages.pyx).

A PageCache splits each persistent table's coordinate space into *pages* (blocks of
coordinates) and keeps each page as its own MemoTable: pages the store holds are loaded
on first touch through a Python loader, and clean pages are evicted least-recently-used
when the loaded bytes exceed a budget; dirty pages stay until the store saves them.

C-level contract (cimported by morello._dp, keep stable): ``lookup(table, point, val,
lo, hi)`` finds the box holding ``point`` (loading its page) and copies its value row and
corners, returning 1, or returns 0; ``put(table, lo, hi, val)`` stores a box (splitting it
along page boundaries); ``put_page(table, n, rows)`` stores the rows ``[lo, hi, val]`` of
one page, in bulk when they are its first new boxes. Both take points of the table's
``ndim`` coordinates. Pages read from the store are FrozenPages (``morello._frozen``:
compact, read-only); a put turns its page into a MemoTable.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint64_t

from morello._rows cimport PAGE_MAX_NDIM
from morello._vec cimport map_t, vec_t

cdef extern from *:
    int __builtin_clzll(unsigned long long x) noexcept nogil


cdef enum:
    KEY_WIDTH = 33           # a page key: table, then one page coordinate per dim
    MIN_BLOCK = -63          # blocks below 0 page by bit length (see page_of)


cdef inline int64_t page_of(int64_t x, int64_t block) noexcept nogil:
    """The page of coordinate value ``x >= 0`` under ``block``: ``x // block`` for a
    block > 0; for a block -1 - s < 0, pages that double in length after a first one of
    2^s values (``max(0, bit_length(x) - s)``); 0 for block 0 (unpaged)."""
    cdef int64_t p
    if block > 0:
        return x // block
    if block < 0:
        p = (64 - __builtin_clzll(<unsigned long long>x) if x > 0 else 0) + block + 1
        return p if p > 0 else 0
    return 0


cdef inline int64_t page_start(int64_t page, int64_t block) noexcept nogil:
    if block > 0:
        return page * block
    if block < 0:
        return 0 if page == 0 else (<int64_t>1) << (page - block - 2)
    return 0


cdef inline int64_t page_end(int64_t page, int64_t block) noexcept nogil:
    if block > 0:
        return page * block + block - 1
    if block < 0 and page - block - 1 < 63:
        return ((<int64_t>1) << (page - block - 1)) - 1
    return 0x7FFFFFFFFFFFFFFF


@cython.final
cdef class PageCache:
    cdef readonly int64_t nvalues            # int64 per value row (every table)
    cdef readonly int64_t capacity           # budget of loaded bytes (clean pages)
    cdef readonly int64_t loaded_bytes       # bytes of the loaded pages (approximate)
    # geometry per table (index = table): ndim and per coordinate its block, 0 = unpaged
    cdef vec_t g_ndim                        # coordinates of a point, -1 = no table
    cdef vec_t g_block                       # [PAGE_MAX_NDIM] per table
    cdef vec_t g_pages                       # pages known per table (loaded or stored)
    cdef vec_t g_merge                       # MemoTable.merge_dims of its pages
    cdef vec_t g_exact                       # mask of exact dims, -1 = not declared
    cdef vec_t g_lazy                        # 1: pages are asked for when first met
    # pages, by slot
    cdef map_t index                         # page key -> slot
    cdef vec_t s_keys                        # KEY_WIDTH per slot: its key
    cdef list s_table                        # stored parts (newest first), None: not loaded
    cdef list s_fresh                        # MemoTable of puts not yet saved, or None
    cdef vec_t s_version                     # store version it was loaded at (0: new)
    cdef vec_t s_stored                      # 1 if the store holds (a version of) it
    cdef vec_t s_dirty                       # 1 if it has puts not yet saved
    cdef vec_t fresh_dirty                   # slots made dirty since take_dirty()
    cdef vec_t s_bytes                       # bytes counted in loaded_bytes
    cdef vec_t s_prev                        # LRU list of loaded clean pages: older
    cdef vec_t s_next                        # and newer neighbour, -1 = none
    cdef int64_t lru_old                     # least recently used clean page, -1
    cdef int64_t lru_new                     # most recently used clean page, -1
    cdef object loader                       # Python: (table, page tuple) -> arrays
    # statistics
    cdef public int64_t hits                 # finds answered by a loaded page
    cdef public int64_t loads                # pages read through the loader
    cdef public int64_t evictions            # clean pages dropped for the budget
    cdef public int64_t absent               # finds of pages the store does not have
    cdef public int64_t bulk_boxes           # boxes put_page froze in bulk
    cdef public int64_t bulk_carved          # groups of overlapping boxes it carved

    cdef int _page_key(self, int64_t table, const int64_t* pt, int64_t* key) except -1
    cdef int64_t _slot(self, const int64_t* key, bint create) except -2
    cdef object _load(self, int64_t slot)
    cdef int _lru_unlink(self, int64_t slot) except -1
    cdef int _lru_push(self, int64_t slot) except -1
    cdef int _evict(self) except -1
    cdef int64_t _find_slot(self, int64_t table, const int64_t* pt, bint create) except -2
    cdef object _parts(self, int64_t slot)
    cdef int64_t lookup(self, int64_t table, const int64_t* pt, int64_t* val,
                        int64_t* lo, int64_t* hi) except -1
    cdef int put(self, int64_t table, const int64_t* lo, const int64_t* hi,
                 const int64_t* val) except -1
    cdef int _put_in_page(self, int64_t table, const int64_t* lo, const int64_t* hi,
                          const int64_t* val) except -1
    cdef uint64_t _merge_mask(self, int64_t table) noexcept
    cdef int put_page(self, int64_t table, int64_t n, int64_t* rows,
                      bint prepared=*) except -1
    cdef object _bulk(self, int64_t table, int64_t* n, int64_t** rows, vec_t* spare,
                      bint prepared)
    cdef int page_geometry(self, int64_t table, int64_t* ndim, int64_t* exact,
                           uint64_t* merge) except -1

    cdef inline bint declared(self, int64_t table) noexcept:
        return 0 <= table < self.g_ndim.n and self.g_ndim.data[table] >= 0

    cdef inline bint has_pages(self, int64_t table) noexcept:
        return 0 <= table < self.g_pages.n and (self.g_pages.data[table] > 0
                                                or self.g_lazy.data[table] != 0)
