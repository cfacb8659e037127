"""The native expander: a logical Spec's actions as integer template rows.

It mirrors ``morello.rewrites`` family by family, in the same order (which is what makes
an action's position its identity): Move (``rewrites/move.py``), TileOut serial then
parallel (``rewrites/tile.py``), Select (``rewrites/select.py``), ToAccum
(``rewrites/accum.py``), Split (``rewrites/tile.py``). Every kind-specific fact comes
from the form tables of the ``SpecGraph``; every tensor-specific one from two lazily
filled caches that Python computes once per operand -- "tile tensor t to shape s" and
"the Moves of tensor t as operand o of a form" -- so Python runs per distinct operand
tile, not per Spec or per row. Kernels are asked for (a Python call per Spec) only when
a kernel's declared necessary conditions hold. Forms marked non-native (operand dims that
sum several Spec dims, such as conv's) are expanded by the Python rewrites
(``Bridge.compile``). ``tests/test_engine.py`` checks that both give the same rows. What
Python answers comes as the typed records of ``morello.bridge``, whose fields the structs
of ``_expand.pxd`` repeat (checked when an Expander is made).

A row is ``(action index, constant cost, units allocated per level, children with
coefficients)``: the affine rule of ``morello.cost``.
"""
cimport cython
from libc.stdint cimport int64_t
from libc.string cimport memcpy

from morello._graph cimport HARD_MAX_OPERANDS, HARD_MAX_RANK, SpecGraph
from morello._vec cimport _map_free, _map_get, _map_put, _push, _vec_free

import dataclasses

# The fields of the records of ``morello.bridge`` as the structs above read them.
MOVE_FIELDS = ("dest", "level", "units", "cost", "view")
KERNEL_FIELDS = ("position", "cost", "vrf_regs")
ROW_FIELDS = ("action", "const", "own", "children")


cdef int push_row(rows_t* rows, int64_t idx, int64_t cost, int64_t level, int64_t units,
                  int64_t nchildren, const int64_t* children,
                  const int64_t* coefs) except -1 nogil:
    """Append a row that allocates ``units`` at ``level`` (none if ``units`` is 0)."""
    cdef int64_t l, c
    _push(&rows.index, idx)
    _push(&rows.cost, cost)
    for l in range(rows.L):
        _push(&rows.own, units if l == level else 0)
    _push(&rows.child_start, rows.child.n)
    _push(&rows.child_count, nchildren)
    for c in range(nchildren):
        _push(&rows.child, children[c])
        _push(&rows.coef, coefs[c])
    return 0


cdef void rows_free(rows_t* rows) noexcept nogil:
    _vec_free(&rows.index)
    _vec_free(&rows.cost)
    _vec_free(&rows.own)
    _vec_free(&rows.child_start)
    _vec_free(&rows.child_count)
    _vec_free(&rows.child)
    _vec_free(&rows.coef)


@cython.final
cdef class Expander:
    """Template rows of logical Specs of ``graph`` (see the module docstring).

    ``bridge`` (a ``morello.bridge.Bridge``) answers ``tile(tid, shape) -> tid or -1``,
    ``moves(form, op, tid) -> [MoveRecord]``, ``select(id, positions) -> [KernelRecord]``
    and ``compile(id) -> [TemplateRow]`` (the rows of a form not expanded here, or of
    every form if not ``native``)."""

    def __cinit__(self, SpecGraph graph, bridge, bint native, costs, tile_sizes):
        cdef Py_ssize_t k
        self.g = graph
        self.bridge = bridge
        self.native = native
        move_rec, kernel_rec, row_rec = bridge.records
        for rec, fields in ((move_rec, MOVE_FIELDS), (kernel_rec, KERNEL_FIELDS),
                            (row_rec, ROW_FIELDS)):
            if tuple(rec._fields) != fields:
                raise TypeError(f"{rec.__name__} has fields {rec._fields}, the core reads "
                                f"{fields}")
        # By name: a field of CostParams missing from cost_params_t, or the reverse, fails.
        fields = dataclasses.asdict(costs)
        self.c = fields
        if len(fields) != sizeof(cost_params_t) // sizeof(int64_t):
            raise TypeError(f"CostParams has {len(fields)} fields, cost_params_t "
                            f"{sizeof(cost_params_t) // sizeof(int64_t)}")
        for k in range(len(tile_sizes)):
            _push(&self.tile_sizes, tile_sizes[k][0])
            _push(&self.tile_rows_only, 1 if tile_sizes[k][1] else 0)
        self.tile_cache.width = 1 + graph.max_rank
        self.move_cache.width = 3

    def __dealloc__(self):
        _vec_free(&self.tile_sizes)
        _vec_free(&self.tile_rows_only)
        _vec_free(&self.moves)
        _map_free(&self.tile_cache)
        _map_free(&self.move_cache)

    cdef int compile(self, int64_t i, rows_t* rows) except -1:
        """Append the rows of logical id ``i`` to ``rows``."""
        cdef int64_t form = self.g.records.data[i * self.g.width]
        if self.native and self.g.f_native.data[form]:
            return self._compile_native(i, rows)
        return self._compile_flat(i, rows)

    cdef int _compile_flat(self, int64_t i, rows_t* rows) except -1:
        cdef Py_ssize_t _l
        for action, const, own, children in self.bridge.compile(i):  # TemplateRow
            if len(own) != rows.L:
                raise ValueError(f"a row allocates at {len(own)} levels, not {rows.L}")
            _push(&rows.index, action)
            _push(&rows.cost, const)
            for _l in range(rows.L):
                _push(&rows.own, own[_l])
            _push(&rows.child_start, rows.child.n)
            _push(&rows.child_count, len(children))
            for child, coef in children:
                _push(&rows.child, child)
                _push(&rows.coef, coef)
        return 0

    cdef int64_t _tile(self, int64_t tid, const int64_t* shape, int64_t rank) except -2:
        cdef int64_t key[1 + HARD_MAX_RANK]
        cdef int64_t j, r
        key[0] = tid
        for j in range(self.g.max_rank):
            key[1 + j] = shape[j] if j < rank else 0
        # Stored as tid + 1, so that 0 (an invalid tile) differs from a miss (-1).
        r = _map_get(&self.tile_cache, key)
        if r >= 0:
            return r - 1
        r = self.bridge.tile(tid, tuple([shape[j] for j in range(rank)]))
        _map_put(&self.tile_cache, key, r + 1)
        return r

    cdef int64_t _moves(self, int64_t form, int64_t op, int64_t tid) except -2:
        cdef int64_t key[3]
        cdef int64_t start
        key[0] = form
        key[1] = op
        key[2] = tid
        start = _map_get(&self.move_cache, key)
        if start >= 0:
            return start
        recs = self.bridge.moves(form, op, tid)
        start = self.moves.n
        _push(&self.moves, len(recs))
        for dest, level, units, cost, view in recs:  # MoveRecord, as move_t
            _push(&self.moves, dest)
            _push(&self.moves, level)
            _push(&self.moves, units)
            _push(&self.moves, cost)
            _push(&self.moves, view)
        _map_put(&self.move_cache, key, start)
        return start

    cdef move_t* _move(self, int64_t start, int64_t j) noexcept nogil:
        """Move ``j`` of the list at ``start`` (valid until the arena grows)."""
        return <move_t*>&self.moves.data[start + 1 + j * (sizeof(move_t) // sizeof(int64_t))]

    cdef int64_t _tiled(self, const int64_t* rec, int64_t sdim, int64_t size,
                        bint serial) except -2:
        """The record with Spec dim ``sdim`` cut to ``size``, or -1 if some operand
        cannot be tiled so."""
        cdef SpecGraph g = self.g
        cdef int64_t t[2 + HARD_MAX_RANK + HARD_MAX_OPERANDS]
        cdef int64_t shp[HARD_MAX_RANK]
        cdef int64_t form = rec[0], op, tid, MO = g.max_operands, MR = g.max_rank
        memcpy(t, rec, g.width * sizeof(int64_t))
        t[1 + sdim] = size
        t[g.width - 1] = serial
        for op in range(g.f_nops.data[form]):
            if g.f_opdim.data[(form * MO + op) * MR + sdim] < 0:
                continue
            g.operand_shape(t, op, shp)
            tid = self._tile(rec[1 + MR + op], shp, g.f_oprank.data[form * MO + op])
            if tid < 0:
                return -1
            t[1 + MR + op] = tid
        return g.intern(t)

    cdef int _loop_row(self, rows_t* rows, const int64_t* rec, int64_t idx, int64_t sdim,
                       int64_t size, bint par) except -1:
        """The row of a loop over Spec dim ``sdim`` in tiles of ``size`` (mirrors
        ``morello.rewrites.tile.loop_expansion``); nothing if it does not apply."""
        cdef SpecGraph g = self.g
        cdef int64_t MO = g.max_operands, MR = g.max_rank, form = rec[0]
        cdef int64_t extent = rec[1 + sdim], full, rem, op, body, bnd, nch = 1, disc, od
        cdef int64_t tile, tid, run, start, longer
        cdef int64_t children[2]
        cdef int64_t coefs[2]
        cdef bint serial = rec[g.width - 1] != 0
        if size < 1 or size >= extent:
            return 0
        if par:
            if serial:
                return 0
            for op in range(g.f_nops.data[form]):
                if not g.t_par.data[rec[1 + MR + op]]:
                    return 0
        full = extent // size
        rem = extent % size
        body = self._tiled(rec, sdim, size, serial or par)
        if body < 0:
            return 0
        children[0] = body
        coefs[0] = (full + self.c.processors - 1) // self.c.processors if par else full
        if rem:
            bnd = self._tiled(rec, sdim, rem, serial or par)
            if bnd < 0:
                return 0
            children[1] = bnd
            coefs[1] = 1
            nch = 2
        # Run starts a serial loop's later iterations do not pay again (see
        # morello.rewrites.tile.stream_discount).
        disc = 0
        if not par and full > 1:
            for op in range(g.f_nops.data[form]):
                od = g.f_opdim.data[(form * MO + op) * MR + sdim]
                tid = rec[1 + MR + op]
                tile = g.records.data[body * g.width + 1 + MR + op]
                if od >= 0 and g.t_stream.data[tid] == od \
                        and g.t_blocks.data[tile] <= self.c.streams:
                    run = g.t_run.data[tile]
                    start = self.c.gl_run + self.c.gl_ramp * min(run, self.c.ramp_bytes) \
                        // self.c.ramp_bytes
                    longer = self.c.gl_run + self.c.gl_ramp * min(run * full, self.c.ramp_bytes) \
                        // self.c.ramp_bytes
                    disc += ((full - 1) * start - (longer - start)) * g.t_blocks.data[tile]
                    if g.t_blocks.data[tid] == 1 and 0 <= g.t_dtype.data[tid] < 63 \
                            and (self.c.sweep_dtypes >> g.t_dtype.data[tid]) & 1:
                        disc += self._sweep_saving(run * full, g.t_blocks.data[tile]) \
                            - full * self._sweep_saving(run, g.t_blocks.data[tile])
        push_row(rows, idx, self.c.par_setup + self.c.par_iter * coefs[0] if par
                 else -disc, 0, 0, nch, children, coefs)
        return 0

    cdef int64_t _sweep_saving(self, int64_t run, int64_t blocks) noexcept nogil:
        """morello.cost.sweep_saving."""
        if self.c.sweep_save <= 0 or run < self.c.sweep_bytes or blocks < 2 \
                or blocks > self.c.streams // 2:
            return 0
        return self.c.sweep_save * blocks * (run // self.c.line_bytes)

    cdef int _compile_native(self, int64_t i, rows_t* rows) except -1:
        """The rows of logical id ``i``, family by family in ``rewrites.actions`` order;
        each family returns the next action index."""
        cdef SpecGraph g = self.g
        cdef int64_t rec[2 + HARD_MAX_RANK + HARD_MAX_OPERANDS]
        cdef int64_t idx
        memcpy(rec, g.records.data + i * g.width, g.width * sizeof(int64_t))
        idx = self._move_rows(rows, rec, 0)
        idx = self._tile_rows(rows, rec, idx)
        idx = self._kernel_rows(rows, i, rec, idx)
        idx = self._accum_rows(rows, rec, idx)
        self._split_rows(rows, rec, idx)
        return 0

    cdef int64_t _move_rows(self, rows_t* rows, const int64_t* rec, int64_t idx) except -1:
        """Move (``rewrites/move.py``), operand by operand: prologue (if read), body,
        epilogue (if written)."""
        cdef SpecGraph g = self.g
        cdef int64_t MO = g.max_operands, MR = g.max_rank, W = g.width, form = rec[0]
        cdef int64_t t[2 + HARD_MAX_RANK + HARD_MAX_OPERANDS]
        cdef int64_t children[3]
        cdef int64_t ones[3]
        cdef int64_t op, j, n, start, dest, nch, oprank, mform, tid
        cdef move_t* m
        cdef bint view
        ones[0] = ones[1] = ones[2] = 1
        for op in range(g.f_nops.data[form]):
            tid = rec[1 + MR + op]
            start = self._moves(form, op, tid)
            n = self.moves.data[start]
            for j in range(n):
                m = self._move(start, j)
                if m.dest >= 0:
                    dest = m.dest
                    view = m.view != 0
                    oprank = g.f_oprank.data[form * MO + op]
                    mform = g.f_move.data[form * MO + op]
                    nch = 0
                    if not view and (g.f_reads.data[form] >> op) & 1:
                        children[nch] = self._move_record(rec, op, oprank, mform, tid, dest, t)
                        nch += 1
                    memcpy(t, rec, W * sizeof(int64_t))
                    t[1 + MR + op] = dest
                    children[nch] = g.intern(t)
                    nch += 1
                    if not view and (g.f_writes.data[form] >> op) & 1:
                        children[nch] = self._move_record(rec, op, oprank, mform, dest, tid, t)
                        nch += 1
                    m = self._move(start, j)  # the arena may have grown meanwhile
                    push_row(rows, idx, m.cost, m.level, m.units, nch, children, ones)
                idx += 1
        return idx

    cdef int64_t _tile_rows(self, rows_t* rows, const int64_t* rec, int64_t idx) except -1:
        """TileOut (``rewrites/tile.py``) over the output's dims, serial then parallel."""
        cdef SpecGraph g = self.g
        cdef int64_t MR = g.max_rank, form = rec[0], top = 0, par, d, sd, j, size
        cdef int64_t shp[HARD_MAX_RANK]
        cdef int64_t row_dim = g.f_row_dim.data[form]
        g.operand_shape(rec, g.f_out.data[form], shp)
        for d in range(g.f_nout.data[form]):
            if shp[d] > top:
                top = shp[d]
        for par in range(1 if rec[g.width - 1] else 2):
            for d in range(g.f_nout.data[form]):
                sd = g.f_outdims.data[form * MR + d]
                if sd < 0:
                    continue
                for j in range(self.tile_sizes.n):
                    size = self.tile_sizes.data[j]
                    if size >= top:
                        break
                    if self.tile_rows_only.data[j] and d != row_dim:
                        continue
                    self._loop_row(rows, rec, idx, sd, size, par == 1)
                    idx += 1
        return idx

    cdef int64_t _kernel_rows(self, rows_t* rows, int64_t i, const int64_t* rec,
                              int64_t idx) except -1:
        """Select (``rewrites/select.py``), asking Python only when some kernel's
        necessary conditions hold (unit dims, a VRF operand, its operands' levels and
        dtypes)."""
        cdef SpecGraph g = self.g
        cdef int64_t MR = g.max_rank, MO = g.max_operands, form = rec[0], k, d, op, mask
        cdef int64_t nk = g.f_nkernels.data[form], base = form * g.max_kernels, lev
        cdef bint ok
        cdef int64_t none[1]
        none[0] = 0
        passed = []  # the kernels whose hints hold: the only ones Python checks
        for k in range(nk):
            mask = g.f_kunit.data[base + k]
            ok = True
            for d in range(g.f_rank.data[form]):
                if (mask >> d) & 1 and rec[1 + d] != 1:
                    ok = False
            for op in range(g.f_nops.data[form] if ok else 0):
                mask = g.f_klev.data[(base + k) * MO + op]
                lev = g.t_level.data[rec[1 + MR + op]]
                if mask != -1 and lev >= 0 and not (mask >> lev) & 1:
                    ok = False
                    break
                mask = g.f_kdt.data[(base + k) * MO + op]
                lev = g.t_dtype.data[rec[1 + MR + op]]
                if mask != -1 and lev >= 0 and not (mask >> lev) & 1:
                    ok = False
                    break
            if ok and g.f_kvrf.data[base + k]:
                ok = False
                for op in range(g.f_nops.data[form]):
                    if g.t_vrf.data[rec[1 + MR + op]]:
                        ok = True
            if ok:
                passed.append(k)
        if passed:
            for position, cost, vrf_regs in self.bridge.select(i, passed):  # KernelRecord
                push_row(rows, idx + position, cost, 1, vrf_regs, 0, none, none)
        return idx + nk

    cdef int64_t _accum_rows(self, rows_t* rows, const int64_t* rec, int64_t idx) except -1:
        """ToAccum (``rewrites/accum.py``): fill the output, then the accumulating twin."""
        cdef SpecGraph g = self.g
        cdef int64_t MO = g.max_operands, MR = g.max_rank, W = g.width, form = rec[0], j
        cdef int64_t out = g.f_out.data[form]
        cdef int64_t t[2 + HARD_MAX_RANK + HARD_MAX_OPERANDS]
        cdef int64_t shp[HARD_MAX_RANK]
        cdef int64_t children[2]
        cdef int64_t ones[2]
        if g.f_accum.data[form] < 0:
            return idx
        ones[0] = ones[1] = 1
        g.operand_shape(rec, out, shp)
        t[0] = g.f_fill.data[form]
        for j in range(MR):
            t[1 + j] = shp[j] if j < g.f_oprank.data[form * MO + out] else 0
        for j in range(MO):
            t[1 + MR + j] = rec[1 + MR + out] if j == 0 else -1
        t[W - 1] = rec[W - 1]
        children[0] = g.intern(t)
        memcpy(t, rec, W * sizeof(int64_t))
        t[0] = g.f_accum.data[form]
        children[1] = g.intern(t)
        push_row(rows, idx, 0, 0, 0, 2, children, ones)
        return idx + 1

    cdef int64_t _split_rows(self, rows_t* rows, const int64_t* rec, int64_t idx) except -1:
        """Split (``rewrites/tile.py``) over each reduction dim of an accumulating form."""
        cdef SpecGraph g = self.g
        cdef int64_t form = rec[0], k, j, sd, size
        for k in range(g.f_nsplit.data[form]):
            sd = g.f_split.data[form * g.max_rank + k]
            for j in range(self.tile_sizes.n):
                size = self.tile_sizes.data[j]
                if size >= rec[1 + sd]:
                    break
                if self.tile_rows_only.data[j]:
                    continue
                self._loop_row(rows, rec, idx, sd, size, False)
                idx += 1
        return idx

    cdef int64_t _move_record(self, const int64_t* rec, int64_t op, int64_t oprank,
                              int64_t mform, int64_t src, int64_t dst,
                              int64_t* t) except -2:
        """The logical id of ``Move(src -> dst)`` of operand ``op``'s shape."""
        cdef SpecGraph g = self.g
        cdef int64_t shp[HARD_MAX_RANK]
        cdef int64_t j, MR = g.max_rank
        g.operand_shape(rec, op, shp)
        t[0] = mform
        for j in range(MR):
            t[1 + j] = shp[j] if j < oprank else 0
        for j in range(g.max_operands):
            t[1 + MR + j] = src if j == 0 else dst if j == 1 else -1
        t[g.width - 1] = rec[g.width - 1]
        return g.intern(t)
