from libc.stdint cimport int64_t

cdef enum:
    MAXL = 8        # most memory levels a target may have


cdef struct Vec:
    int64_t *data
    Py_ssize_t size
    Py_ssize_t cap


cdef struct Frame:
    int64_t id
    int64_t limits[MAXL]
    int64_t row           # current template row (absolute), or -1 before start
    int64_t row_end
    int64_t child         # next child edge of the row to accumulate
    int64_t acc_main
    int64_t acc_peaks[MAXL]
    int64_t acc_depth
    int64_t child_limits[MAXL]
    int64_t best_action
    int64_t best_main
    int64_t best_peaks[MAXL]
    int64_t best_depth


cdef class Solver:
    cdef object compile_cb          # Python: logical id -> rows (see module docstring)
    cdef Py_ssize_t L               # number of memory levels
    cdef int64_t reg[MAXL]          # 1 if level counts registers (no pow2 snapping)
    # per logical id
    cdef Vec row_start              # first template row, -1 if not compiled yet
    cdef Vec row_count              # number of template rows
    cdef Vec memo_head              # first memo entry, -1 if none
    # template rows
    cdef Vec r_index                # action index
    cdef Vec r_const                # constant main cost
    cdef Vec r_own                  # L units allocated per row
    cdef Vec r_child_start          # first child edge
    cdef Vec r_child_count          # number of children
    # child edges
    cdef Vec e_child                # logical id of child
    cdef Vec e_coef                 # coefficient of child's main cost
    # memo entries (per logical id, a linked list of limit boxes)
    cdef Vec m_lo                   # L: lower corner (peaks, 0 when unsat)
    cdef Vec m_hi                   # L: upper corner (limits it was solved at)
    cdef Vec m_main                 # main cost
    cdef Vec m_peaks                # L: peaks
    cdef Vec m_depth                # depth
    cdef Vec m_action               # action index, -1 = unsatisfiable
    cdef Vec m_next                 # next entry of the same id, -1 = end
    cdef public int64_t specs_solved   # (id, limits) pairs solved
    cdef public int64_t rows_evaluated # (Spec, action) rows evaluated

    cdef int _ensure_id(self, int64_t i) except -1
    cdef int _compile(self, int64_t i) except -1
    cdef int64_t _lookup(self, int64_t i, const int64_t *limits) noexcept nogil
    cdef int _store(self, Frame *f) except -1 nogil
