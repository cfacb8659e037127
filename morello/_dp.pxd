from libc.stdint cimport int64_t

from morello._memo cimport MemoTable

cdef enum:
    MAXL = 8        # most memory levels a target may have


cdef struct Vec:
    int64_t *data
    Py_ssize_t size
    Py_ssize_t cap


cdef enum:
    REC = 10        # spec record: kind, rank, shape[4], tensor ids[3], serial
    MAXK = 8        # most kinds


cdef struct IntMap:
    # open addressing map from fixed-width int64 keys to int64 values
    Py_ssize_t width       # key width
    Vec keys               # width ints per entry
    Vec vals               # one value per entry
    Vec slots              # entry index + 1, 0 = empty; size is a power of two


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
    bint owns_rows        # this frame compiled its Spec's rows (and frees them on exit)
    int64_t arena_rows    # row count before compiling
    int64_t arena_edges   # edge count before compiling


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
    # native expansion of Specs (None: ask compile_cb for flat rows)
    cdef object native              # Python object with the transform callbacks
    cdef IntMap spec_index          # spec record -> logical id
    cdef Vec records                # REC ints per logical id
    cdef Vec t_par                  # per tensor id: 1 if it may be tiled in parallel
    cdef Vec t_vrf                  # per tensor id: 1 if it lives in VRF
    cdef Vec t_stream               # per tensor id: its stream dim if in GL, else -1
    cdef Vec t_blocks               # per tensor id: separate contiguous runs
    cdef int64_t gl_run             # cost of a main-memory run start
    cdef int64_t streams            # runs the prefetchers follow at once
    cdef IntMap tile_cache          # (tid, shape[3]) -> tid of the tile, -1 invalid
    cdef IntMap move_cache          # (kind, operand, tid) -> start in moves
    cdef Vec moves                  # per cached list: count, then (valid, dest, level, units, const, view)
    cdef int64_t nops[MAXK]         # operands per kind
    cdef int64_t reads[MAXK]        # bitmask of operands read, per kind
    cdef int64_t writes[MAXK]       # bitmask of operands written, per kind
    cdef int64_t nkernels[MAXK]     # kernels per kind
    cdef int64_t kunit[MAXK][16]    # per kind and kernel: bitmask of spec dims that must be 1
    cdef int64_t kvrf[MAXK][16]     # per kind and kernel: 1 if some operand must be VRF
    cdef int64_t processors, par_setup, par_iter
    cdef Vec tile_sizes             # tile sizes to try, ascending
    cdef Vec tile_rows_only         # per tile size: 1 if it tiles only Matmul rows
    # persistent layer: one compressed MemoTable per table (Matmul, Move, Zero families)
    cdef list tables                # MemoTables indexed by family, or None
    cdef bint consult_tables        # look misses up in the tables
    cdef Vec t_coord                # 4 coordinates per tensor id (see morello.coords)
    cdef Vec m_persist              # per memo entry: 1 if it must be written to tables
    cdef int64_t table_hits         # lookups answered by the tables
    cdef public int64_t specs_solved   # (id, limits) pairs solved
    cdef public int64_t rows_evaluated # (Spec, action) rows evaluated

    cdef int _ensure_id(self, int64_t i) except -1
    cdef int _compile(self, int64_t i) except -1
    cdef int64_t _lookup(self, int64_t i, const int64_t *limits) except -2
    cdef int64_t _lookup_local(self, int64_t i, const int64_t *limits) noexcept nogil
    cdef int _store(self, Frame *f) except -1 nogil
    cdef int _compile_native(self, int64_t i) except -1
    cdef int64_t _intern(self, const int64_t *rec) except -2
    cdef int64_t _tile(self, int64_t tid, const int64_t *shape) except -2
    cdef int64_t _moves(self, int64_t kind, int64_t op, int64_t tid) except -2
    cdef int _loop_row(self, const int64_t *rec, int64_t idx, int64_t sdim, int64_t size,
                       bint par) except -1
    cdef int _push_row(self, int64_t idx, int64_t const, int64_t level, int64_t units,
                       int64_t nchildren, const int64_t *children,
                       const int64_t *coefs) except -1
    cdef int64_t _tiled(self, const int64_t *rec, int64_t sdim, int64_t size,
                        bint serial) except -2
    cdef int _point(self, int64_t i, const int64_t *limits, int64_t *out) noexcept nogil
    cdef int64_t _from_table(self, int64_t i, const int64_t *limits) except -2
