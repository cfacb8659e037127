"""Declarations of the stored form of a page (implementation in _frozen.pyx).

C-level contract (cimported by morello._pages): ``FrozenPage.locate(point)`` is the box
holding ``point`` or -1, ``col(c, i)`` entry ``i`` of column ``c``; ``freeze_rows`` makes
the FrozenPage of rows ``[lo, hi, values]``; ``lookup_in_part`` finds a point's box in a
FrozenPage or a MemoTable.
"""
cimport cython
from libc.stdint cimport int64_t, uint64_t

from morello._rows cimport PAGE_MAX_NDIM


@cython.final
cdef class FrozenPage:
    cdef readonly int64_t n                  # boxes
    cdef readonly int64_t ndim               # coordinates of a point
    cdef readonly int64_t nvalues            # int64 per value row
    cdef readonly uint64_t exact_dims        # bit d: every box is one point in dim d
    cdef bytes payload                       # the columns (morello.pageblob), kept alive
    cdef const unsigned char* data           # payload's bytes
    cdef int64_t width[2 * PAGE_MAX_NDIM + 16]   # per column: bytes per entry
    cdef int64_t offset[2 * PAGE_MAX_NDIM + 16]  # per column: its first byte
    cdef int64_t key[PAGE_MAX_NDIM]          # the exact dims that vary: the boxes' order
    cdef int64_t nkeys                       # how many
    cdef int64_t fixed[PAGE_MAX_NDIM]        # the exact dims of one value in every box
    cdef int64_t nfixed                      # how many

    cdef int64_t col(self, int64_t c, int64_t i) noexcept nogil
    cdef void _column(self, int64_t c, int64_t* out) noexcept nogil
    cdef int _permute(self, const int64_t* idx) except -1
    cdef int64_t _cmp_point(self, const int64_t* pt, int64_t b) noexcept nogil
    cdef int64_t locate(self, const int64_t* pt) noexcept nogil


cdef FrozenPage freeze_rows(const int64_t* rows, int64_t n, int64_t ndim, int64_t nvalues,
                            exact_dims)
cdef int64_t lookup_in_part(object t, const int64_t* pt, int64_t* val, int64_t* lo,
                            int64_t* hi) except -1
