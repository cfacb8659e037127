"""Declarations of the DP solver (implementation in _dp.pyx)."""
cimport cython
from libc.stdint cimport int64_t

from morello._expand cimport Expander, rows_t
from morello._graph cimport HARD_MAX_LEVELS, SpecGraph
from morello._pages cimport PageCache
from morello._vec cimport vec_t


cdef struct frame_t:          # one (logical id, limits) on the DFS stack
    int64_t id
    int64_t limits[HARD_MAX_LEVELS]
    int64_t row               # current template row (absolute), or -1 before start
    int64_t row_end
    int64_t child             # next child edge of the row to accumulate
    int64_t acc_main
    int64_t acc_peaks[HARD_MAX_LEVELS]
    int64_t acc_depth
    int64_t child_limits[HARD_MAX_LEVELS]
    int64_t best_action
    int64_t best_main
    int64_t best_peaks[HARD_MAX_LEVELS]
    int64_t best_depth
    bint owns_rows            # this frame compiled its Spec's rows (and frees them on exit)
    int64_t arena_rows        # row count before compiling
    int64_t arena_edges       # edge count before compiling


@cython.final
cdef class Solver:
    cdef readonly SpecGraph graph   # the logical Specs and their forms
    cdef readonly Expander expander  # their actions as rows
    cdef int64_t L                  # number of memory levels
    cdef int64_t reg[HARD_MAX_LEVELS]  # 1 if level counts registers (no pow2 snapping)
    # per logical id
    cdef vec_t row_start            # first template row, -1 if not compiled now
    cdef vec_t row_count            # number of template rows
    cdef vec_t memo_head            # first memo entry, -1 if none
    cdef rows_t rows                # template rows: an arena, freed with their frames
    # the working memo: per logical id, a linked list of limit boxes (morello._persist
    # reads it with graph and pages, and clears m_persist of what it writes)
    cdef vec_t m_lo                 # L: lower corner (peaks, 0 when unsat)
    cdef vec_t m_hi                 # L: upper corner (limits it was solved at)
    cdef vec_t m_main               # main cost
    cdef vec_t m_peaks              # L: peaks
    cdef vec_t m_depth              # depth
    cdef vec_t m_action             # action index, -1 = unsatisfiable
    cdef vec_t m_next               # next entry of the same id, -1 = end
    cdef vec_t m_persist            # 1 if it must be written to the tables
    # the persistent layer: compressed MemoTables in pages, by table (SpecGraph.id_table)
    cdef PageCache pages            # or None: results stay in the working memo
    cdef int64_t table_hits         # lookups answered by the tables
    cdef public int64_t specs_solved   # (id, limits) pairs solved
    cdef public int64_t rows_evaluated  # (Spec, action) rows evaluated

    cdef int _ensure_ids(self) except -1
    cdef int _compile_rows(self, int64_t i) except -1
    cdef int64_t _lookup(self, int64_t i, const int64_t* limits) except -2
    cdef int64_t _lookup_local(self, int64_t i, const int64_t* limits) noexcept nogil
    cdef int _store(self, frame_t* f) except -1 nogil
    cdef int64_t _from_table(self, int64_t i, const int64_t* limits) except -2
