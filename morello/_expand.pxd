"""Declarations of the native expander (implementation in _expand.pyx)."""
cimport cython
from libc.stdint cimport int64_t

from morello._graph cimport SpecGraph
from morello._vec cimport map_t, vec_t


cdef struct rows_t:          # template rows of logical Specs (an arena; see morello._dp)
    int64_t L                # memory levels: ints of ``own`` per row
    vec_t index              # per row: action index
    vec_t cost               # per row: constant main cost
    vec_t own                # per row: L units allocated
    vec_t child_start        # per row: first child edge
    vec_t child_count        # per row: number of children
    vec_t child              # per edge: logical id of the child
    vec_t coef               # per edge: coefficient of the child's main cost


cdef struct cost_params_t:    # the cost constants rows apply: morello.search.CostParams
    int64_t processors        # processors a parallel loop divides among
    int64_t par_setup         # constant cost of a parallel loop
    int64_t par_iter          # cost per parallel iteration
    int64_t gl_run            # cost of a main-memory run start
    int64_t gl_ramp           # more for a run of ramp_bytes or longer
    int64_t ramp_bytes        # (morello.cost.run_cost)
    int64_t streams           # runs the prefetchers follow at once
    int64_t sweep_save        # per line of a few long runs side by side (cost.sweep_saving)
    int64_t line_bytes        # bytes of a cache line
    int64_t sweep_bytes       # (morello.cost.SWEEP_BYTES)
    int64_t sweep_dtypes      # bit per dtype code of Target.sweep_dtypes


cdef struct move_t:          # a Move of an operand: morello.bridge.MoveRecord
    int64_t dest             # the destination tensor's id; -1: the Move does not apply
    int64_t level            # the level it allocates at
    int64_t units            # the units it allocates there
    int64_t cost             # its constant cost
    int64_t view             # 1: a cache view (no copy, no logues)


cdef int push_row(rows_t* rows, int64_t idx, int64_t cost, int64_t level, int64_t units,
                  int64_t nchildren, const int64_t* children,
                  const int64_t* coefs) except -1 nogil
cdef void rows_free(rows_t* rows) noexcept nogil


@cython.final
cdef class Expander:
    cdef SpecGraph g                # the records and form tables
    cdef object bridge              # Python: tile, moves, select, compile (morello.bridge)
    cdef bint native                # expand native forms here (else all by ``compile``)
    cdef cost_params_t c            # the target's cost constants (CostParams)
    cdef vec_t tile_sizes           # tile sizes to try, ascending
    cdef vec_t tile_rows_only       # per tile size: 1 if only for a form's row dim
    cdef map_t tile_cache           # (tid, shape[max_rank]) -> tid of the tile + 1
    cdef map_t move_cache           # (form, operand, tid) -> start in moves
    cdef vec_t moves                # per cached list: count, then a move_t per Move

    cdef int compile(self, int64_t i, rows_t* rows) except -1
    cdef int _compile_flat(self, int64_t i, rows_t* rows) except -1
    cdef int64_t _sweep_saving(self, int64_t run, int64_t blocks) noexcept nogil
    cdef int _compile_native(self, int64_t i, rows_t* rows) except -1
    cdef int64_t _move_rows(self, rows_t* rows, const int64_t* rec, int64_t idx) except -1
    cdef int64_t _tile_rows(self, rows_t* rows, const int64_t* rec, int64_t idx) except -1
    cdef int64_t _kernel_rows(self, rows_t* rows, int64_t i, const int64_t* rec,
                              int64_t idx) except -1
    cdef int64_t _accum_rows(self, rows_t* rows, const int64_t* rec, int64_t idx) except -1
    cdef int64_t _split_rows(self, rows_t* rows, const int64_t* rec, int64_t idx) except -1
    cdef int64_t _tile(self, int64_t tid, const int64_t* shape, int64_t rank) except -2
    cdef int64_t _moves(self, int64_t form, int64_t op, int64_t tid) except -2
    cdef move_t* _move(self, int64_t start, int64_t j) noexcept nogil
    cdef int64_t _tiled(self, const int64_t* rec, int64_t sdim, int64_t size,
                        bint serial) except -2
    cdef int64_t _move_record(self, const int64_t* rec, int64_t op, int64_t oprank,
                              int64_t mform, int64_t src, int64_t dst,
                              int64_t* t) except -2
    cdef int _loop_row(self, rows_t* rows, const int64_t* rec, int64_t idx, int64_t sdim,
                       int64_t size, bint par) except -1
