"""Declarations of the row algebra of a page's new boxes (implementation in _rows.pyx).

A row is ``[lo (ndim), hi (ndim), values (nvalues)]`` int64s, rows one after another.
Every function here runs without the GIL (persist's row thread calls ``prepare_rows``).
"""
from libc.stdint cimport int64_t, uint64_t

from morello._vec cimport vec_t


cdef enum:
    PAGE_MAX_NDIM = 32       # most coordinates of a point (morello._memo MAX_NDIM)


cdef int sort_rows_by(int64_t* rows, int64_t n, int64_t w, const int64_t* cols,
                      int64_t ncols, int64_t* idx) noexcept nogil
cdef int carve_rows(int64_t nd, int64_t nvalues, uint64_t exact, int64_t n, int64_t* rows,
                    vec_t* out, int64_t* carved) except -1 nogil
cdef int64_t prepare_rows(int64_t nd, int64_t nvalues, uint64_t exact, uint64_t merge,
                          int64_t n, int64_t** rows, vec_t* spare,
                          int64_t* carved) except -1 nogil
cdef int sort_exact(int64_t nd, int64_t nvalues, uint64_t exact, int64_t n,
                    int64_t* rows) except -1 nogil
