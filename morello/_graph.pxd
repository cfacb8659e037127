"""Declarations of the Spec graph (implementation in _graph.pyx)."""
cimport cython
from libc.stdint cimport int64_t

from morello._vec cimport map_t, vec_t

cdef enum:
    HARD_MAX_RANK = 16       # most Spec dims a record may have
    HARD_MAX_OPERANDS = 8    # most operands a record may have
    HARD_MAX_KERNELS = 64    # most kernels a kind may have
    HARD_MAX_LEVELS = 8      # most memory levels a target may have
    HARD_MAX_POINT = 32      # most coordinates of a point (morello._memo MAX_NDIM)


@cython.final
cdef class SpecGraph:
    # capacities, fixed at construction (checked against the HARD_ limits)
    cdef readonly int64_t max_rank         # Spec dims per record
    cdef readonly int64_t max_operands     # operands per record
    cdef readonly int64_t max_kernels      # kernels per kind
    cdef readonly int64_t width            # ints per record: form, shape, tids, serial
    cdef readonly int64_t n_levels         # memory levels (limit coordinates)
    cdef int64_t reg[HARD_MAX_LEVELS]      # 1 if a level counts registers (no pow2)
    # records: [form, shape[max_rank] (0-padded), tids[max_operands] (-1), serial]
    cdef int64_t* islots                   # the index, record -> logical id: slots of
    cdef int64_t icap                      # ... pw packed key words and id + 1 (0: empty),
    cdef int64_t pw                        # ... icap of them (a power of two, or 0)
    cdef map_t wide                        # records with a field beyond 32 bits -> id
    cdef vec_t records                     # width ints per logical id
    cdef vec_t id_table                    # per logical id: its persistent table, or -1
    # forms: a kind with its parameters at one rank (see morello.search.FormInfo)
    cdef readonly int64_t n_forms          # forms added so far
    cdef vec_t f_rank                      # Spec dims
    cdef vec_t f_nops                      # operands
    cdef vec_t f_native                    # 1 if the native expander handles it
    cdef vec_t f_member                    # member coordinate, or -1
    cdef vec_t f_reads                     # bitmask of operands read
    cdef vec_t f_writes                    # bitmask of operands written
    cdef vec_t f_out                       # the output operand (tiles follow it)
    cdef vec_t f_nout                      # output rank
    cdef vec_t f_outdims                   # [max_rank]: output dim -> Spec dim, or -1
    cdef vec_t f_row_dim                   # output dim taking row-only sizes, or -1
    cdef vec_t f_accum                     # ToAccum's twin form, or -1
    cdef vec_t f_fill                      # ToAccum's fill form, or -1
    cdef vec_t f_nsplit                    # reduction dims Split loops over
    cdef vec_t f_split                     # [max_rank]: those Spec dims
    cdef vec_t f_move                      # [max_operands]: form of that operand's Move
    cdef vec_t f_oprank                    # [max_operands]: rank of each operand
    cdef vec_t f_opdim                     # [max_operands][max_rank]: Spec dim -> op dim
    cdef vec_t f_opsrc                     # [max_operands][max_rank]: op dim -> Spec dim
    cdef vec_t f_opconst                   # [max_operands][max_rank]: op dim constant
    cdef vec_t f_nkernels                  # kernels of the kind
    cdef vec_t f_kunit                     # [max_kernels]: Spec dims that must be 1
    cdef vec_t f_kvrf                      # [max_kernels]: 1 if some operand must be VRF
    cdef vec_t f_klev                      # [max_kernels][max_operands]: level bitmask
    cdef vec_t f_kdt                       # [max_kernels][max_operands]: dtype bitmask
    # tensors (operand TensorSpecs, by tensor id)
    cdef vec_t t_par                       # 1 if it may be tiled in parallel
    cdef vec_t t_vrf                       # 1 if it lives in VRF
    cdef vec_t t_level                     # its level (int(morello.memory.Level))
    cdef vec_t t_stream                    # its stream dim if in GL, else -1
    cdef vec_t t_blocks                    # separate contiguous runs
    cdef vec_t t_run                       # bytes of each run (in GL; 0 elsewhere)
    cdef vec_t t_dtype                     # dtype code
    cdef vec_t t_coord                     # 4 coordinates (morello.coords.operand_coords)
    # persistent tables
    cdef map_t table_index                 # (form, dtype codes) -> table, or -1
    cdef object table_cb                   # Python: (form, dtype codes) -> table or -1

    cdef int _ensure_forms(self, int64_t n) except -1
    cdef int64_t intern(self, const int64_t* rec) except -2
    cdef bint _pack(self, const int64_t* rec, int64_t* key) noexcept nogil
    cdef int64_t _intern_wide(self, const int64_t* rec) except -2
    cdef int _add_record(self, const int64_t* rec) except -1
    cdef int _index_grow(self) except -1
    cdef int64_t _table_of(self, int64_t* key, int64_t nops) except -2
    cdef void operand_shape(self, const int64_t* rec, int64_t op,
                            int64_t* out) noexcept nogil
    cdef int64_t point(self, int64_t i, const int64_t* limits,
                       int64_t* out) noexcept nogil
    cdef int64_t point_len(self, int64_t i) noexcept nogil
    cdef void limit_point(self, const int64_t* limits, int64_t* out) noexcept nogil
    cdef int64_t volume(self, int64_t i) noexcept nogil
