"""The Spec graph: logical Specs interned as integer records, and the per-form tables.

A *record* is a logical Spec (a Spec without its memory limits) as ``width`` ints::

    [form, shape[max_rank] (0-padded), tensor ids[max_operands] (-1-padded), serial]

A *form* is a primitive kind with its parameters at one rank (Matmul at rank 4,
Max{dim=1} at rank 2, ...). The core knows kinds only through the integer tables of
their forms, which ``morello.search`` packs from the kind table (``morello.kinds``):
operand count and ranks, which Spec dim each operand dim is, which operands are read and
written, the output dims tiles follow, the reduction dims Split loops over, the forms
ToAccum and Move produce, and the kernels' cheap necessary conditions. So a new kind is
a new row of the kind table and no change here.

Capacities (rank, operands, kernels per kind, levels) are set at construction and
checked: anything beyond them raises ValueError naming the limit; nothing is truncated.
Tensors (operand TensorSpecs) are interned in Python; the graph keeps the attributes of
each that the expander and the table bridge read.
"""
cimport cython
from libc.stdint cimport INT32_MAX, INT32_MIN, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy

from morello._vec cimport (
    _hash_key,
    _map_free,
    _map_get,
    _map_put,
    _push,
    _same_row,
    _vec_free,
    vec_t,
)


cdef extern from *:
    int __builtin_clzll(unsigned long long x) noexcept nogil

# The most coordinates of a point the core takes (a Spec's own and its memory limits).
MAX_POINT = HARD_MAX_POINT


@cython.final
cdef class SpecGraph:
    """Interned logical Specs and the tables of their forms (see the module docstring).

    ``table_cb(form, dtype_codes)`` names the persistent table of a form over operands of
    those dtypes (an index into the Solver's table list, or -1 for none)."""

    def __cinit__(self, int64_t max_rank, int64_t max_operands, int64_t max_kernels,
                  register_levels, table_cb=None):
        cdef int64_t l
        if not 1 <= max_rank <= HARD_MAX_RANK:
            raise ValueError(f"max_rank {max_rank} is outside the core's limit "
                             f"1..{HARD_MAX_RANK} (HARD_MAX_RANK)")
        if not 1 <= max_operands <= HARD_MAX_OPERANDS:
            raise ValueError(f"max_operands {max_operands} is outside the core's limit "
                             f"1..{HARD_MAX_OPERANDS} (HARD_MAX_OPERANDS)")
        if not 0 <= max_kernels <= HARD_MAX_KERNELS:
            raise ValueError(f"max_kernels {max_kernels} is outside the core's limit "
                             f"0..{HARD_MAX_KERNELS} (HARD_MAX_KERNELS)")
        if len(register_levels) > HARD_MAX_LEVELS:
            raise ValueError(f"{len(register_levels)} memory levels exceed the core's "
                             f"limit {HARD_MAX_LEVELS} (HARD_MAX_LEVELS)")
        self.max_rank = max_rank
        self.max_operands = max_operands
        self.max_kernels = max_kernels
        self.width = 2 + max_rank + max_operands
        self.n_levels = len(register_levels)
        for l in range(self.n_levels):
            self.reg[l] = 1 if register_levels[l] else 0
        self.pw = (self.width + 1) // 2
        self.wide.width = self.width
        self.table_index.width = 1 + max_operands
        self.table_cb = table_cb

    def __dealloc__(self):
        cdef vec_t* vs[34]
        vs[:] = [&self.records, &self.id_table, &self.f_rank, &self.f_nops, &self.f_native,
                 &self.f_member, &self.f_reads, &self.f_writes, &self.f_out, &self.f_nout,
                 &self.f_outdims, &self.f_row_dim, &self.f_accum, &self.f_fill,
                 &self.f_nsplit, &self.f_split, &self.f_move, &self.f_oprank,
                 &self.f_opdim, &self.f_opsrc, &self.f_opconst, &self.f_nkernels,
                 &self.f_kunit, &self.f_kvrf, &self.f_klev, &self.t_par, &self.t_vrf,
                 &self.t_level, &self.t_stream, &self.t_blocks, &self.t_dtype, &self.t_coord,
                 &self.f_kdt, &self.t_run]
        cdef int k
        for k in range(34):
            _vec_free(vs[k])
        free(self.islots)
        _map_free(&self.wide)
        _map_free(&self.table_index)

    # ---- forms ----------------------------------------------------------------------

    cdef int _ensure_forms(self, int64_t n) except -1:
        """Grow the form tables to ``n`` forms (new rows hold defaults)."""
        cdef vec_t* one[13]
        cdef int64_t k, _j, _k
        one[:] = [&self.f_rank, &self.f_nops, &self.f_native, &self.f_member, &self.f_reads,
                  &self.f_writes, &self.f_out, &self.f_nout, &self.f_row_dim, &self.f_accum,
                  &self.f_fill, &self.f_nsplit, &self.f_nkernels]
        while self.n_forms < n:
            for k in range(13):
                _push(one[k], -1 if k >= 8 and k <= 10 else 0)
            for _j in range(self.max_rank):
                _push(&self.f_outdims, -1)
                _push(&self.f_split, -1)
            for _j in range(self.max_operands):
                _push(&self.f_move, -1)
                _push(&self.f_oprank, 0)
            for _j in range(self.max_operands * self.max_rank):
                _push(&self.f_opdim, -1)
                _push(&self.f_opsrc, -1)
                _push(&self.f_opconst, 0)
            for _j in range(self.max_kernels):
                _push(&self.f_kunit, 0)
                _push(&self.f_kvrf, 0)
                for _k in range(self.max_operands):
                    _push(&self.f_klev, -1)
                    _push(&self.f_kdt, -1)
            self.n_forms += 1
        return 0

    def add_form(self, int64_t form, *, int64_t rank, bint native, int64_t member,
                 reads, writes, int64_t out, outdims, int64_t row_dim, int64_t accum,
                 int64_t fill, splits, moves, operand_dims, kernels):
        """Define form ``form`` (any index; forms may refer to forms defined later).

        ``operand_dims``: per operand, per operand dim, ``(spec dim or -1, constant)``;
        ``outdims``: per output dim, its Spec dim or -1; ``splits``: reduction Spec dims;
        ``moves``: per operand, the form of its Move; ``kernels``: per kernel, ``(mask
        of Spec dims that must be 1, needs VRF[, per operand the bitmask of the levels it
        may be in (-1: any)])``. Raises ValueError naming the limit a
        form exceeds."""
        cdef int64_t nops = len(operand_dims), op, d, j, base, sd, c
        cdef int64_t MR = self.max_rank, MO = self.max_operands, MK = self.max_kernels
        if form < 0:
            raise ValueError(f"form {form} < 0")
        if not 1 <= rank <= MR:
            raise ValueError(f"a form of rank {rank} exceeds max_rank {MR}")
        if nops > MO:
            raise ValueError(f"a form with {nops} operands exceeds max_operands {MO}")
        # A point's coordinates: a form's own (the widest rank and the most operands need
        # not meet in one form: conv's rank 7 has 3 operands, a chain's 5 have rank 5).
        if 1 + rank + 4 * nops + 1 + self.n_levels > HARD_MAX_POINT:
            raise ValueError(f"points of rank {rank} with {nops} operands "
                             f"exceed {HARD_MAX_POINT} coordinates (HARD_MAX_POINT)")
        if len(kernels) > MK:
            raise ValueError(f"a kind with {len(kernels)} kernels exceeds max_kernels {MK}")
        if len(outdims) > MR or len(splits) > MR or len(moves) != nops or not 0 <= out < nops:
            raise ValueError("malformed form tables")
        for op in range(nops):
            if len(operand_dims[op]) > MR:
                raise ValueError(f"operand {op} of rank {len(operand_dims[op])} exceeds "
                                 f"max_rank {MR}")
            for d in range(len(operand_dims[op])):
                if not -1 <= operand_dims[op][d][0] < rank:
                    raise ValueError(f"operand {op} dim {d} names Spec dim "
                                     f"{operand_dims[op][d][0]} outside rank {rank}")
        self._ensure_forms(form + 1)
        self.f_rank.data[form] = rank
        self.f_nops.data[form] = nops
        self.f_native.data[form] = native
        self.f_member.data[form] = member
        self.f_reads.data[form] = sum(1 << o for o in reads)
        self.f_writes.data[form] = sum(1 << o for o in writes)
        self.f_out.data[form] = out
        self.f_nout.data[form] = len(outdims)
        self.f_row_dim.data[form] = row_dim
        self.f_accum.data[form] = accum
        self.f_fill.data[form] = fill
        self.f_nsplit.data[form] = len(splits)
        self.f_nkernels.data[form] = len(kernels)
        for j in range(MR):
            self.f_outdims.data[form * MR + j] = outdims[j] if j < len(outdims) else -1
            self.f_split.data[form * MR + j] = splits[j] if j < len(splits) else -1
        for op in range(MO):
            self.f_move.data[form * MO + op] = moves[op] if op < nops else -1
            self.f_oprank.data[form * MO + op] = len(operand_dims[op]) if op < nops else 0
            base = (form * MO + op) * MR
            for j in range(MR):
                self.f_opdim.data[base + j] = -1
                self.f_opsrc.data[base + j] = -1
                self.f_opconst.data[base + j] = 0
            if op >= nops:
                continue
            for d in range(len(operand_dims[op])):
                sd, c = operand_dims[op][d]
                self.f_opsrc.data[base + d] = sd
                self.f_opconst.data[base + d] = c
                if sd >= 0:
                    self.f_opdim.data[base + sd] = d
        for j in range(MK):
            self.f_kunit.data[form * MK + j] = kernels[j][0] if j < len(kernels) else 0
            self.f_kvrf.data[form * MK + j] = kernels[j][1] if j < len(kernels) else 0
            for op in range(MO):
                self.f_klev.data[(form * MK + j) * MO + op] = (
                    kernels[j][2][op] if j < len(kernels) and len(kernels[j]) > 2
                    and op < len(kernels[j][2]) else -1)
                self.f_kdt.data[(form * MK + j) * MO + op] = (
                    kernels[j][3][op] if j < len(kernels) and len(kernels[j]) > 3
                    and op < len(kernels[j][3]) else -1)

    def form_of(self, int64_t i):
        return self.records.data[i * self.width]

    # ---- tensors --------------------------------------------------------------------

    def set_tensor(self, int64_t tid, bint parallel_ok, bint vrf, int64_t stream_dim,
                   int64_t blocks, int64_t dtype, coords, int64_t level=-1,
                   int64_t run_bytes=0):
        """Attributes of tensor ``tid`` (ids are dense: 0, 1, ...); ``level``: its level's
        int (-1: unknown, which no kernel's level hint excludes); ``run_bytes``: the
        length of each of its contiguous runs in main memory."""
        cdef int64_t _j
        if not -1 <= level < 63:
            raise ValueError(f"level {level} out of range")
        while self.t_par.n <= tid:
            _push(&self.t_par, 0)
            _push(&self.t_vrf, 0)
            _push(&self.t_level, -1)
            _push(&self.t_stream, -1)
            _push(&self.t_blocks, 0)
            _push(&self.t_run, 0)
            _push(&self.t_dtype, -1)
            for _j in range(4):
                _push(&self.t_coord, 0)
        self.t_par.data[tid] = parallel_ok
        self.t_vrf.data[tid] = vrf
        self.t_level.data[tid] = level
        self.t_stream.data[tid] = stream_dim
        self.t_blocks.data[tid] = blocks
        self.t_run.data[tid] = run_bytes
        self.t_dtype.data[tid] = dtype
        for j in range(4):
            self.t_coord.data[tid * 4 + j] = coords[j]

    # ---- records --------------------------------------------------------------------

    def intern_spec(self, int64_t form, shape, tids, bint serial):
        """Logical id of the record of a Spec of ``form`` (checked against the limits)."""
        cdef int64_t rec[2 + HARD_MAX_RANK + HARD_MAX_OPERANDS]
        cdef int64_t j, MR = self.max_rank
        if not 0 <= form < self.n_forms:
            raise ValueError(f"unknown form {form}")
        if len(shape) != self.f_rank.data[form]:
            raise ValueError(f"form {form} has rank {self.f_rank.data[form]}, "
                             f"got shape {tuple(shape)}")
        if len(tids) != self.f_nops.data[form]:
            raise ValueError(f"form {form} has {self.f_nops.data[form]} operands, "
                             f"got {len(tids)}")
        rec[0] = form
        for j in range(MR):
            rec[1 + j] = shape[j] if j < len(shape) else 0
        for j in range(self.max_operands):
            rec[1 + MR + j] = tids[j] if j < len(tids) else -1
            if j < len(tids) and not 0 <= tids[j] < self.t_par.n:
                raise ValueError(f"unknown tensor id {tids[j]}")
        rec[self.width - 1] = serial
        return self.intern(rec)

    def record(self, int64_t i):
        """``(form, shape, tensor ids, serial)`` of logical id ``i``."""
        if not 0 <= i < self.n_ids:
            raise IndexError(f"no logical id {i}")
        cdef const int64_t* r = self.records.data + i * self.width
        cdef int64_t form = r[0], MR = self.max_rank
        return (form, tuple([r[1 + j] for j in range(self.f_rank.data[form])]),
                tuple([r[1 + MR + j] for j in range(self.f_nops.data[form])]),
                bool(r[self.width - 1]))

    @property
    def n_ids(self):
        return self.records.n // self.width

    cdef int64_t intern(self, const int64_t* rec) except -2:
        """The logical id of record ``rec``, added if new.

        The index keeps each record packed (two 32-bit fields a word) beside its id in
        open-addressed slots, so a lookup that finds its record touches one slot, not a
        slot and then a record elsewhere: interning is the search's hottest step, and
        was half its time in those two cache misses (a 64^3 search). Records with a
        field beyond 32 bits (sizes up to 2^50 are allowed) go to a plain map."""
        cdef int64_t key[2 + HARD_MAX_RANK + HARD_MAX_OPERANDS]  # pw used
        cdef int64_t copy[2 + HARD_MAX_RANK + HARD_MAX_OPERANDS]
        cdef int64_t pw = self.pw, stride = self.pw + 1, mask, pos, i
        cdef int64_t* slot
        cdef uint64_t h = 0
        if not self._pack(rec, key):
            return self._intern_wide(rec)
        h = _hash_key(key, pw)
        if self.icap:
            mask = self.icap - 1
            pos = <int64_t>(h & <uint64_t>mask)
            while True:
                slot = self.islots + pos * stride
                if slot[pw] == 0:
                    break
                if _same_row(slot, key, pw):
                    return slot[pw] - 1
                pos = (pos + 1) & mask
        memcpy(copy, rec, self.width * sizeof(int64_t))  # rec may point into records
        i = self.records.n // self.width
        if 4 * (i + 1) > 3 * self.icap:  # at most 3/4 full
            self._index_grow()
        mask = self.icap - 1
        pos = <int64_t>(h & <uint64_t>mask)
        while self.islots[pos * stride + pw] != 0:
            pos = (pos + 1) & mask
        slot = self.islots + pos * stride
        memcpy(slot, key, pw * sizeof(int64_t))
        slot[pw] = i + 1
        self._add_record(copy)
        return i

    cdef int _add_record(self, const int64_t* rec) except -1:
        """Append ``rec`` (not in ``records``) as the next id, with its table."""
        cdef int64_t tkey[1 + HARD_MAX_OPERANDS]
        cdef int64_t j, t, form = rec[0]
        for j in range(self.width):
            _push(&self.records, rec[j])
        # The persistent table: per form and operand dtypes.
        tkey[0] = form
        for j in range(self.max_operands):
            tkey[1 + j] = -1
            if j < self.f_nops.data[form]:
                tkey[1 + j] = self.t_dtype.data[rec[1 + self.max_rank + j]]
        t = _map_get(&self.table_index, tkey)
        if t == -1 and self.table_cb is not None:
            t = self._table_of(tkey, self.f_nops.data[form])
        elif t >= 0:
            t -= 2  # stored as table + 2 so that -1 (none) differs from a miss
        _push(&self.id_table, t)
        return 0

    cdef bint _pack(self, const int64_t* rec, int64_t* key) noexcept nogil:
        """``key``: the record's fields two to a word; False if one does not fit 32
        bits."""
        cdef int64_t j, v
        cdef uint64_t w
        for j in range(self.pw):
            key[j] = 0
        for j in range(self.width):
            v = rec[j]
            if v < INT32_MIN or v > INT32_MAX:
                return False
            w = <uint64_t><uint32_t>v
            key[j >> 1] = <int64_t>(<uint64_t>key[j >> 1] | (w << (32 * (j & 1))))
        return True

    cdef int64_t _intern_wide(self, const int64_t* rec) except -2:
        """``intern`` of a record with a field beyond 32 bits."""
        cdef int64_t copy[2 + HARD_MAX_RANK + HARD_MAX_OPERANDS]
        cdef int64_t i = _map_get(&self.wide, rec)
        if i >= 0:
            return i
        memcpy(copy, rec, self.width * sizeof(int64_t))  # rec may point into records
        i = self.records.n // self.width
        _map_put(&self.wide, copy, i)
        self._add_record(copy)
        return i

    cdef int _index_grow(self) except -1:
        """Double the index's slots (at least 1024) and put every key in again."""
        cdef int64_t cap = max(<int64_t>1024, 2 * self.icap), stride = self.pw + 1
        cdef int64_t pw = self.pw, mask = cap - 1, pos, s
        cdef int64_t* old = self.islots
        cdef int64_t* new = <int64_t*>calloc(cap * stride, sizeof(int64_t))
        if new == NULL:
            raise MemoryError(f"could not allocate {cap * stride * 8} bytes")
        for s in range(self.icap):
            if old[s * stride + pw] == 0:
                continue
            pos = <int64_t>(_hash_key(old + s * stride, pw) & <uint64_t>mask)
            while new[pos * stride + pw] != 0:
                pos = (pos + 1) & mask
            memcpy(new + pos * stride, old + s * stride, stride * sizeof(int64_t))
        self.islots = new
        self.icap = cap
        free(old)
        return 0

    cdef int64_t _table_of(self, int64_t* key, int64_t nops) except -2:
        """Ask ``table_cb`` for the table of ``key`` (form, dtype codes) and cache it."""
        codes = []
        for j in range(nops):
            codes.append(key[1 + j])
        t = self.table_cb(key[0], tuple(codes))
        _map_put(&self.table_index, key, t + 2)
        return t

    cdef void operand_shape(self, const int64_t* rec, int64_t op,
                            int64_t* out) noexcept nogil:
        cdef int64_t form = rec[0], MR = self.max_rank, d, sd
        cdef int64_t base = (form * self.max_operands + op) * MR
        for d in range(self.f_oprank.data[form * self.max_operands + op]):
            sd = self.f_opsrc.data[base + d]
            out[d] = (rec[1 + sd] if sd >= 0 else 0) + self.f_opconst.data[base + d]

    cdef int64_t volume(self, int64_t i) noexcept nogil:
        cdef const int64_t* r = self.records.data + i * self.width
        cdef int64_t v = 1, j
        for j in range(self.f_rank.data[r[0]]):
            v *= r[1 + j]
        return v

    # ---- coordinates ----------------------------------------------------------------

    cdef int64_t point_len(self, int64_t i) noexcept nogil:
        cdef int64_t form = self.records.data[i * self.width]
        return ((1 if self.f_member.data[form] >= 0 else 0) + self.f_rank.data[form]
                + 4 * self.f_nops.data[form] + 1 + self.n_levels)

    cdef int64_t point(self, int64_t i, const int64_t* limits,
                       int64_t* out) noexcept nogil:
        """The coordinates of (id, limits) in its table (``morello.coords.spec_point``);
        returns the table, or -1 if it has none."""
        cdef const int64_t* r = self.records.data + i * self.width
        cdef int64_t form = r[0], n = 0, op, j, tid
        if self.f_member.data[form] >= 0:
            out[n] = self.f_member.data[form]
            n += 1
        for j in range(self.f_rank.data[form]):
            out[n] = r[1 + j] - 1
            n += 1
        for op in range(self.f_nops.data[form]):
            tid = r[1 + self.max_rank + op]
            for j in range(4):
                out[n] = self.t_coord.data[tid * 4 + j]
                n += 1
        out[n] = 0 if r[self.width - 1] else 1
        self.limit_point(limits, out + n + 1)
        return self.id_table.data[i]

    cdef void limit_point(self, const int64_t* limits, int64_t* out) noexcept nogil:
        """The last ``n_levels`` coordinates of a point: its memory limits (a register
        count as it is, bytes by bit length)."""
        cdef int64_t l, v
        for l in range(self.n_levels):
            v = limits[l]
            if not self.reg[l]:
                v = 64 - __builtin_clzll(<unsigned long long>v) if v > 0 else 0  # bit length
            out[l] = v

    def point_of(self, int64_t i, limits):
        """``(table, coordinates)`` of id ``i`` at ``limits`` (table -1: none)."""
        cdef int64_t pt[HARD_MAX_POINT]
        cdef int64_t lim[HARD_MAX_LEVELS]
        cdef int64_t l
        if not 0 <= i < self.n_ids:
            raise IndexError(f"no logical id {i}")
        for l in range(self.n_levels):
            lim[l] = limits[l]
        t = self.point(i, lim, pt)
        return t, tuple(pt[j] for j in range(self.point_len(i)))
