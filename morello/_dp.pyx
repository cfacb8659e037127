"""The DP recurrence: a memoized top-down search over integer Spec ids and limits.

Why this shape (measured on this 2-core machine, f32 matmul, AVX2):

1. *Limits never reach Python.* Rewrites are compiled per *logical* Spec (a Spec without
   its memory limits) into integer template rows: action index, constant main cost, units
   allocated per level, children's logical ids with integer coefficients (the affine rule of
   ``morello.cost``). The core applies one rule to every row -- it fits iff
   ``own <= limits``, children get ``limits - own`` (cache levels snapped down to powers of
   two), cost ``const + sum(coef * child main)``, peaks ``snap_up(own + max child peaks)``,
   depth ``1 + max child depth`` -- and keeps the least ``(main, peaks, depth, action)``.
   Expanding every (Spec, limits) pair in Python instead cost ~0.4 ms per pair and met 7x
   more pairs than logical Specs.
2. *Actions are enumerated here, from per-operand transform tables.* A Spec record is
   ``(kind, rank, shape[4], tensor ids[3], serial)``; TileOut/Split/ToAccum/Move rows are
   built from two lazily filled, cached tables that Python computes once per operand --
   "tile tensor t to shape s" and "the moves of tensor t" -- so Python runs per distinct
   operand tile, not per Spec or per row. Kernels are asked for (a Python call per Spec)
   only when a kernel's declared necessary conditions hold. Expanding each logical Spec in
   Python took 12.4 s for a 16^3 matmul; this takes 0.23 s and yields identical rows
   (``tests/test_engine.py``). The row order is ``morello.rewrites.actions``' order, so
   Impls are rebuilt in Python by replaying action indices.

The search is an explicit-stack DFS (no recursion). Each solved (id, limits) is stored as a
box of limits ``[peaks, limits]``: the solution is optimal for every limit in the box, and an
unsatisfiable result at ``limits`` covers ``[0, limits]``. The per-id boxes are the working
cache; misses fall through to the persistent compressed tables (``morello._memo``), and
``persist`` writes new results there.
"""
# cython: language_level=3
cimport cython
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp, memcpy, memset
from libc.stdlib cimport free, realloc

import numpy as np

cdef int64_t MAX_COST = (<int64_t>1) << 62


cdef int vec_push(Vec *v, int64_t x) except -1 nogil:
    cdef int64_t *p
    if v.size == v.cap:
        v.cap = 16 if v.cap == 0 else v.cap * 2
        p = <int64_t *>realloc(v.data, v.cap * sizeof(int64_t))
        if p == NULL:
            with gil:
                raise MemoryError()
        v.data = p
    v.data[v.size] = x
    v.size += 1
    return 0


cdef int vec_zeros(Vec *v, Py_ssize_t n) except -1 nogil:
    """Make ``v`` hold ``n`` zeros."""
    cdef int64_t *p = <int64_t *>realloc(v.data, max(n, 1) * sizeof(int64_t))
    if p == NULL:
        with gil:
            raise MemoryError()
    v.data = p
    v.cap = max(n, 1)
    v.size = n
    memset(v.data, 0, n * sizeof(int64_t))
    return 0


cdef inline uint64_t hash_key(const int64_t *k, Py_ssize_t w) noexcept nogil:
    cdef uint64_t h = 1469598103934665603ULL
    cdef Py_ssize_t i
    for i in range(w):
        h = (h ^ <uint64_t>k[i]) * 1099511628211ULL
        h ^= h >> 32
    return h


cdef inline bint _same(const int64_t *a, const int64_t *b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


cdef int64_t map_get(IntMap *m, const int64_t *key) noexcept nogil:
    cdef Py_ssize_t mask, pos, e
    if m.slots.size == 0:
        return -1
    mask = m.slots.size - 1
    pos = hash_key(key, m.width) & mask
    while True:
        e = m.slots.data[pos]
        if e == 0:
            return -1
        e -= 1
        if _same(m.keys.data + e * m.width, key, m.width):
            return m.vals.data[e]
        pos = (pos + 1) & mask


cdef int _slot_insert(IntMap *m, Py_ssize_t e) except -1 nogil:
    cdef Py_ssize_t mask = m.slots.size - 1
    cdef Py_ssize_t pos = hash_key(m.keys.data + e * m.width, m.width) & mask
    while m.slots.data[pos] != 0:
        pos = (pos + 1) & mask
    m.slots.data[pos] = e + 1
    return 0


cdef int map_put(IntMap *m, const int64_t *key, int64_t val) except -1 nogil:
    """Insert a key known to be absent. ``key`` must not point into ``m``."""
    cdef Py_ssize_t i, n = m.vals.size, e
    if (n + 1) * 2 > m.slots.size:
        vec_zeros(&m.slots, max(<Py_ssize_t>1024, m.slots.size * 2))
        for e in range(n):
            _slot_insert(m, e)
    for i in range(m.width):
        vec_push(&m.keys, key[i])
    vec_push(&m.vals, val)
    _slot_insert(m, n)
    return 0


cdef void map_free(IntMap *m) noexcept nogil:
    free(m.keys.data)
    free(m.vals.data)
    free(m.slots.data)
    m.keys.data = m.vals.data = m.slots.data = NULL


# Spec-shape dim -> operand dim, per kind and operand (-1: the operand lacks it).
# Kinds: 0 Matmul, 1 MatmulAccum ([b,m,k,n]); 2 Move, 3 Zero (operand shape).
cdef int64_t OPDIM[4][3][4]
OPDIM[0][0][:] = [0, 1, 2, -1]
OPDIM[0][1][:] = [0, -1, 1, 2]
OPDIM[0][2][:] = [0, 1, -1, 2]
OPDIM[1][0][:] = [0, 1, 2, -1]
OPDIM[1][1][:] = [0, -1, 1, 2]
OPDIM[1][2][:] = [0, 1, -1, 2]
for _k in (2, 3):
    for _o in range(3):
        OPDIM[_k][_o][:] = [0, 1, 2, -1]


cdef inline void operand_shape(const int64_t *rec, int64_t op, int64_t *out) noexcept nogil:
    cdef int64_t kind = rec[0]
    cdef int d
    for d in range(4):
        if OPDIM[kind][op][d] >= 0:
            out[OPDIM[kind][op][d]] = rec[2 + d]


cdef inline int64_t sat_add(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t s = a + b
    return s if s < MAX_COST else MAX_COST


cdef inline int64_t sat_mul(int64_t a, int64_t b) noexcept nogil:
    if a == 0 or b == 0:
        return 0
    if a >= MAX_COST // b:
        return MAX_COST
    return a * b


cdef inline int64_t pow2_ceil(int64_t x) noexcept nogil:
    cdef int64_t p = 1
    if x <= 0:
        return 0
    while p < x:
        p <<= 1
    return p


cdef inline int64_t pow2_floor(int64_t x) noexcept nogil:
    cdef int64_t p = 1
    if x <= 0:
        return 0
    while p <= x // 2:
        p <<= 1
    return p


@cython.final
cdef class Solver:
    """Memoized DP over logical Spec ids.

    ``compile_cb(id)`` must return the template rows of ``id`` as one flat list of ints:
    ``[n_rows, (index, const, own[0..L), n_children, (child id, coef) * n_children) ...]``.
    It may register new ids (they are compiled when reached).
    """

    def __cinit__(self, compile_cb, register_levels):
        cdef Py_ssize_t l
        self.compile_cb = compile_cb
        self.L = len(register_levels)
        if self.L > MAXL:
            raise ValueError(f"at most {MAXL} memory levels")
        for l in range(self.L):
            self.reg[l] = 1 if register_levels[l] else 0
        self.native = None
        self.spec_index.width = REC
        self.tile_cache.width = 4
        self.move_cache.width = 3

    def __dealloc__(self):
        cdef Vec *vs[18]
        vs[:] = [&self.row_start, &self.row_count, &self.memo_head, &self.r_index,
                 &self.r_const, &self.r_own, &self.r_child_start, &self.r_child_count,
                 &self.e_child, &self.e_coef, &self.m_lo, &self.m_hi, &self.m_main,
                 &self.m_peaks, &self.m_depth, &self.m_action, &self.m_next,
                 &self.row_start]
        cdef int i
        for i in range(17):
            free(vs[i].data)
            vs[i].data = NULL
        map_free(&self.spec_index)
        map_free(&self.tile_cache)
        map_free(&self.move_cache)
        free(self.records.data)
        free(self.t_par.data)
        free(self.t_vrf.data)
        free(self.t_stream.data)
        free(self.t_blocks.data)
        self.t_stream.data = self.t_blocks.data = NULL
        free(self.moves.data)
        free(self.tile_sizes.data)
        self.tile_sizes.data = NULL
        free(self.tile_rows_only.data)
        self.tile_rows_only.data = NULL
        self.records.data = self.t_par.data = self.t_vrf.data = self.moves.data = NULL

    cdef int _ensure_id(self, int64_t i) except -1:
        while self.row_start.size <= i:
            vec_push(&self.row_start, -1)
            vec_push(&self.row_count, 0)
            vec_push(&self.memo_head, -1)
        return 0

    cdef int _compile(self, int64_t i) except -1:
        # The native tables cover the operand ranks of matmul programs (rank-4 Matmul
        # Specs over rank-3 operands); any other rank is expanded by the Python rewrites.
        if self.native is not None and self.records.data[i * REC + 1] == (
                4 if self.records.data[i * REC] <= 1 else 3):
            return self._compile_native(i)
        cdef list flat = self.compile_cb(i)
        cdef Py_ssize_t pos = 1, r, l, c, n_rows = flat[0], nc
        cdef int64_t e, child
        self._ensure_id(i)
        self.row_start.data[i] = self.r_index.size
        self.row_count.data[i] = n_rows
        for r in range(n_rows):
            vec_push(&self.r_index, flat[pos])
            vec_push(&self.r_const, flat[pos + 1])
            pos += 2
            for l in range(self.L):
                vec_push(&self.r_own, flat[pos])
                pos += 1
            nc = flat[pos]
            pos += 1
            vec_push(&self.r_child_start, self.e_child.size)
            vec_push(&self.r_child_count, nc)
            for c in range(nc):
                child = flat[pos]
                self._ensure_id(child)
                vec_push(&self.e_child, child)
                vec_push(&self.e_coef, flat[pos + 1])
                pos += 2
        return 0

    cdef int64_t _lookup(self, int64_t i, const int64_t *limits) except -2:
        """Memo entry of id ``i`` whose box contains ``limits``, or -1.

        Misses fall through to the persistent tables (see ``_from_table``)."""
        cdef int64_t m = self._lookup_local(i, limits)
        if m >= 0 or not self.consult_tables:
            return m
        return self._from_table(i, limits)

    cdef int64_t _lookup_local(self, int64_t i, const int64_t *limits) noexcept nogil:
        cdef int64_t m
        cdef Py_ssize_t l
        cdef bint inside
        if i >= self.memo_head.size:
            return -1
        m = self.memo_head.data[i]
        while m >= 0:
            inside = True
            for l in range(self.L):
                if not (self.m_lo.data[m * self.L + l] <= limits[l]
                        <= self.m_hi.data[m * self.L + l]):
                    inside = False
                    break
            if inside:
                return m
            m = self.m_next.data[m]
        return -1

    cdef int _store(self, Frame *f) except -1 nogil:
        cdef Py_ssize_t l
        cdef int64_t m = self.m_main.size
        for l in range(self.L):
            vec_push(&self.m_lo, f.best_peaks[l] if f.best_action >= 0 else 0)
            vec_push(&self.m_hi, f.limits[l])
            vec_push(&self.m_peaks, f.best_peaks[l] if f.best_action >= 0 else 0)
        vec_push(&self.m_main, f.best_main if f.best_action >= 0 else 0)
        vec_push(&self.m_depth, f.best_depth if f.best_action >= 0 else 0)
        vec_push(&self.m_action, f.best_action)
        vec_push(&self.m_next, self.memo_head.data[f.id])
        vec_push(&self.m_persist, 1)
        self.memo_head.data[f.id] = m
        self.specs_solved += 1
        return 0

    def put(self, int64_t i, lo, hi, int64_t main, peaks, int64_t depth, int64_t action):
        """Preload a known result (from the database) for id ``i`` over the box [lo, hi]."""
        cdef Frame f
        cdef Py_ssize_t l
        self._ensure_id(i)
        f.id = i
        for l in range(self.L):
            f.limits[l] = hi[l]
            f.best_peaks[l] = peaks[l]
        f.best_main = main
        f.best_depth = depth
        f.best_action = action
        self._store(&f)
        for l in range(self.L):
            self.m_lo.data[self.m_lo.size - self.L + l] = lo[l]
        self.m_persist.data[self.m_persist.size - 1] = 0
        self.specs_solved -= 1

    def lookup(self, int64_t i, limits):
        """``(main, peaks, depth, action)`` for id ``i`` at ``limits``; action -1 = unsat;
        None if not solved."""
        cdef int64_t lim[MAXL]
        cdef Py_ssize_t l
        for l in range(self.L):
            lim[l] = limits[l]
        cdef int64_t m = self._lookup(i, lim)
        if m < 0:
            return None
        return (self.m_main.data[m],
                tuple(self.m_peaks.data[m * self.L + l] for l in range(self.L)),
                self.m_depth.data[m], self.m_action.data[m])

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def solve(self, int64_t root, limits):
        """Solve ``root`` at ``limits``; return like ``lookup``."""
        cdef Py_ssize_t cap = 256, sp = 0, l
        cdef Frame *stack = <Frame *>realloc(NULL, cap * sizeof(Frame))
        cdef Frame *f
        cdef Frame *g
        cdef int64_t r, e, c, m, own, lim, cm
        cdef bint fits, better, pushed
        if stack == NULL:
            raise MemoryError()
        try:
            self._ensure_id(root)
            f = &stack[0]
            f.id = root
            for l in range(self.L):
                f.limits[l] = limits[l]
            f.row = -1
            sp = 1
            while sp > 0:
                f = &stack[sp - 1]
                if f.row < 0:
                    if self._lookup(f.id, f.limits) >= 0:
                        sp -= 1
                        continue
                    f.owns_rows = self.row_start.data[f.id] < 0
                    if f.owns_rows:
                        f.arena_rows = self.r_index.size
                        f.arena_edges = self.e_child.size
                        self._compile(f.id)
                    f.row = self.row_start.data[f.id]
                    f.row_end = f.row + self.row_count.data[f.id]
                    f.best_action = -1
                    f.child = -1
                pushed = False
                while f.row < f.row_end:
                    r = f.row
                    if f.child < 0:
                        # Start a row: does it fit, and what do its children get?
                        fits = True
                        for l in range(self.L):
                            own = self.r_own.data[r * self.L + l]
                            if own > f.limits[l]:
                                fits = False
                                break
                            lim = f.limits[l] - own
                            f.child_limits[l] = lim if self.reg[l] else pow2_floor(lim)
                            f.acc_peaks[l] = 0
                        if not fits:
                            f.row += 1
                            continue
                        f.child = self.r_child_start.data[r]
                        f.acc_main = self.r_const.data[r]
                        f.acc_depth = 0
                        self.rows_evaluated += 1
                    fits = True
                    while f.child < self.r_child_start.data[r] + self.r_child_count.data[r]:
                        c = self.e_child.data[f.child]
                        m = self._lookup(c, f.child_limits)
                        if m < 0:
                            if sp == cap:
                                cap *= 2
                                stack = <Frame *>realloc(stack, cap * sizeof(Frame))
                                if stack == NULL:
                                    raise MemoryError()
                                f = &stack[sp - 1]
                            g = &stack[sp]
                            g.id = c
                            for l in range(self.L):
                                g.limits[l] = f.child_limits[l]
                            g.row = -1
                            sp += 1
                            pushed = True
                            break
                        if self.m_action.data[m] < 0:
                            fits = False
                            break
                        f.acc_main = sat_add(
                            f.acc_main, sat_mul(self.e_coef.data[f.child], self.m_main.data[m]))
                        if self.m_depth.data[m] > f.acc_depth:
                            f.acc_depth = self.m_depth.data[m]
                        for l in range(self.L):
                            cm = self.m_peaks.data[m * self.L + l]
                            if cm > f.acc_peaks[l]:
                                f.acc_peaks[l] = cm
                        f.child += 1
                    if pushed:
                        break
                    if fits:
                        f.acc_depth += 1
                        for l in range(self.L):
                            f.acc_peaks[l] += self.r_own.data[r * self.L + l]
                            if not self.reg[l]:
                                f.acc_peaks[l] = pow2_ceil(f.acc_peaks[l])
                        if f.best_action < 0:
                            better = True
                        elif f.acc_main != f.best_main:
                            better = f.acc_main < f.best_main
                        else:
                            better = False
                            for l in range(self.L):
                                if f.acc_peaks[l] != f.best_peaks[l]:
                                    better = f.acc_peaks[l] < f.best_peaks[l]
                                    break
                            else:
                                if f.acc_depth != f.best_depth:
                                    better = f.acc_depth < f.best_depth
                                else:
                                    better = self.r_index.data[r] < f.best_action
                        if better:
                            f.best_action = self.r_index.data[r]
                            f.best_main = f.acc_main
                            f.best_depth = f.acc_depth
                            for l in range(self.L):
                                f.best_peaks[l] = f.acc_peaks[l]
                    f.row += 1
                    f.child = -1
                if pushed:
                    continue
                self._store(f)
                if f.owns_rows:
                    # Rows live on an arena: a Spec's rows are needed only while its frame
                    # is on the stack (most Specs are solved at one limit vector), so they
                    # are dropped with it and recompiled on the rare later use.
                    self.r_index.size = self.r_const.size = f.arena_rows
                    self.r_child_start.size = self.r_child_count.size = f.arena_rows
                    self.r_own.size = f.arena_rows * self.L
                    self.e_child.size = self.e_coef.size = f.arena_edges
                    self.row_start.data[f.id] = -1
                sp -= 1
        finally:
            free(stack)
        return self.lookup(root, limits)

    # ---- native expansion -----------------------------------------------------------
    # The Python rewrites are compiled into per-operand transform tables (tile an operand
    # to a shape; the moves of an operand), filled lazily through ``native`` callbacks and
    # cached here. Enumerating a Spec's actions then needs Python only for kernel
    # applicability, and only when a kernel's cheap necessary conditions hold. The order of
    # rows is exactly ``morello.rewrites.actions``' order (tested for parity).

    def configure(self, native, nops, reads, writes, kernel_units, kernel_vrf,
                  int64_t processors, int64_t par_setup, int64_t par_iter, tile_sizes,
                  int64_t gl_run, int64_t streams):
        """Switch to native expansion. Per kind: operand count, read/written operand
        bitmasks, and per kernel the bitmask of dims that must be 1 and the VRF flag."""
        cdef Py_ssize_t k, j
        self.native = native
        for k in range(len(nops)):
            self.nops[k] = nops[k]
            self.reads[k] = reads[k]
            self.writes[k] = writes[k]
            self.nkernels[k] = len(kernel_units[k])
            for j in range(len(kernel_units[k])):
                self.kunit[k][j] = kernel_units[k][j]
                self.kvrf[k][j] = kernel_vrf[k][j]
        self.tile_sizes.size = 0
        self.tile_rows_only.size = 0
        for k in range(len(tile_sizes)):
            vec_push(&self.tile_sizes, tile_sizes[k][0])
            vec_push(&self.tile_rows_only, 1 if tile_sizes[k][1] else 0)
        self.gl_run = gl_run
        self.streams = streams
        self.processors = processors
        self.par_setup = par_setup
        self.par_iter = par_iter

    def set_tensor(self, int64_t tid, bint parallel_ok, bint vrf, int64_t stream_dim,
                   int64_t blocks):
        while self.t_par.size <= tid:
            vec_push(&self.t_par, 0)
            vec_push(&self.t_vrf, 0)
            vec_push(&self.t_stream, -1)
            vec_push(&self.t_blocks, 0)
        self.t_par.data[tid] = parallel_ok
        self.t_vrf.data[tid] = vrf
        self.t_stream.data[tid] = stream_dim
        self.t_blocks.data[tid] = blocks

    def intern(self, rec):
        """Logical id of a Spec record ``(kind, rank, shape[4], tensor ids[3], serial)``."""
        cdef int64_t r[REC]
        cdef Py_ssize_t j
        for j in range(REC):
            r[j] = rec[j]
        return self._intern(r)

    def record(self, int64_t i):
        return tuple(self.records.data[i * REC + j] for j in range(REC))

    @property
    def n_specs(self):
        return self.records.size // REC

    def rows_of(self, int64_t i):
        """Compile ``i`` if needed; its rows as (index, const, own, children, coefs)."""
        cdef Py_ssize_t r, e
        self._ensure_id(i)
        if self.row_start.data[i] < 0:
            self._compile(i)
        out = []
        for r in range(self.row_start.data[i], self.row_start.data[i] + self.row_count.data[i]):
            cs = self.r_child_start.data[r]
            cn = self.r_child_count.data[r]
            out.append((self.r_index.data[r], self.r_const.data[r],
                        tuple(self.r_own.data[r * self.L + l] for l in range(self.L)),
                        tuple(self.e_child.data[e] for e in range(cs, cs + cn)),
                        tuple(self.e_coef.data[e] for e in range(cs, cs + cn))))
        return out

    cdef int64_t _intern(self, const int64_t *rec) except -2:
        cdef int64_t i = map_get(&self.spec_index, rec)
        cdef Py_ssize_t j
        cdef int64_t copy[REC]
        if i >= 0:
            return i
        memcpy(copy, rec, REC * sizeof(int64_t))
        i = self.records.size // REC
        for j in range(REC):
            vec_push(&self.records, copy[j])
        map_put(&self.spec_index, copy, i)
        self._ensure_id(i)
        return i

    cdef int64_t _tile(self, int64_t tid, const int64_t *shape) except -2:
        cdef int64_t key[4]
        key[0] = tid
        key[1] = shape[0]
        key[2] = shape[1]
        key[3] = shape[2]
        # Stored as tid + 1, so that 0 (an invalid tile) differs from a miss (-1).
        cdef int64_t r = map_get(&self.tile_cache, key)
        if r >= 0:
            return r - 1
        r = self.native.tile(tid, (shape[0], shape[1], shape[2]))
        map_put(&self.tile_cache, key, r + 1)
        return r

    cdef int64_t _moves(self, int64_t kind, int64_t op, int64_t tid) except -2:
        cdef int64_t key[3]
        key[0] = kind
        key[1] = op
        key[2] = tid
        cdef int64_t start = map_get(&self.move_cache, key)
        cdef Py_ssize_t j
        if start >= 0:
            return start
        flat = self.native.moves(kind, op, tid)
        start = self.moves.size
        for j in range(len(flat)):
            vec_push(&self.moves, flat[j])
        map_put(&self.move_cache, key, start)
        return start

    cdef int _push_row(self, int64_t idx, int64_t const, int64_t level, int64_t units,
                       int64_t nchildren, const int64_t *children,
                       const int64_t *coefs) except -1:
        cdef Py_ssize_t l, c
        vec_push(&self.r_index, idx)
        vec_push(&self.r_const, const)
        for l in range(self.L):
            vec_push(&self.r_own, units if l == level else 0)
        vec_push(&self.r_child_start, self.e_child.size)
        vec_push(&self.r_child_count, nchildren)
        for c in range(nchildren):
            vec_push(&self.e_child, children[c])
            vec_push(&self.e_coef, coefs[c])
        return 0

    cdef int64_t _tiled(self, const int64_t *rec, int64_t sdim, int64_t size,
                        bint serial) except -2:
        cdef int64_t t[REC]
        cdef int64_t shp[3]
        cdef int64_t op, d, tid
        memcpy(t, rec, REC * sizeof(int64_t))
        t[2 + sdim] = size
        t[9] = serial
        for op in range(self.nops[rec[0]]):
            d = OPDIM[rec[0]][op][sdim]
            if d < 0:
                continue
            operand_shape(t, op, shp)
            tid = self._tile(rec[6 + op], shp)
            if tid < 0:
                return -1
            t[6 + op] = tid
        return self._intern(t)

    cdef int _loop_row(self, const int64_t *rec, int64_t idx, int64_t sdim, int64_t size,
                       bint par) except -1:
        cdef int64_t extent = rec[2 + sdim], full, rem, op, body, bnd, nch = 1, disc, od, tile
        cdef int64_t children[2]
        cdef int64_t coefs[2]
        cdef bint serial = rec[9] != 0
        if size < 1 or size >= extent:
            return 0
        if par:
            if serial:
                return 0
            for op in range(self.nops[rec[0]]):
                if not self.t_par.data[rec[6 + op]]:
                    return 0
        full = extent // size
        rem = extent % size
        body = self._tiled(rec, sdim, size, serial or par)
        if body < 0:
            return 0
        children[0] = body
        coefs[0] = (full + self.processors - 1) // self.processors if par else full
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
            for op in range(self.nops[rec[0]]):
                od = OPDIM[rec[0]][op][sdim]
                tile = self.records.data[body * REC + 6 + op]
                if od >= 0 and self.t_stream.data[rec[6 + op]] == od \
                        and self.t_blocks.data[tile] <= self.streams:
                    disc += self.gl_run * self.t_blocks.data[tile]
        self._push_row(idx, self.par_setup + self.par_iter * coefs[0] if par
                       else -(full - 1) * disc, 0, 0, nch, children, coefs)
        return 0

    cdef int _compile_native(self, int64_t i) except -1:
        cdef int64_t rec[REC]
        cdef int64_t t[REC]
        cdef int64_t shp[3]
        cdef int64_t children[3]
        cdef int64_t ones[3]
        cdef int64_t kind, op, j, n, start, base, dest, nch, idx = 0, top, d, size, par
        cdef int64_t outdims[3]
        cdef Py_ssize_t k
        cdef bint any_kernel, ok, view
        memcpy(rec, self.records.data + i * REC, REC * sizeof(int64_t))
        ones[0] = ones[1] = ones[2] = 1
        kind = rec[0]
        self._ensure_id(i)
        self.row_start.data[i] = self.r_index.size
        # 1. moves, operand by operand
        for op in range(self.nops[kind]):
            start = self._moves(kind, op, rec[6 + op])
            n = self.moves.data[start]
            for j in range(n):
                base = start + 1 + 6 * j
                if self.moves.data[base]:
                    dest = self.moves.data[base + 1]
                    nch = 0
                    operand_shape(rec, op, shp)
                    view = self.moves.data[base + 5] != 0
                    if not view and (self.reads[kind] >> op) & 1:
                        t[0] = 2; t[1] = 3; t[2] = shp[0]; t[3] = shp[1]; t[4] = shp[2]
                        t[5] = 0; t[6] = rec[6 + op]; t[7] = dest; t[8] = -1; t[9] = rec[9]
                        children[nch] = self._intern(t)
                        nch += 1
                    memcpy(t, rec, REC * sizeof(int64_t))
                    t[6 + op] = dest
                    children[nch] = self._intern(t)
                    nch += 1
                    if not view and (self.writes[kind] >> op) & 1:
                        t[0] = 2; t[1] = 3; t[2] = shp[0]; t[3] = shp[1]; t[4] = shp[2]
                        t[5] = 0; t[6] = dest; t[7] = rec[6 + op]; t[8] = -1; t[9] = rec[9]
                        children[nch] = self._intern(t)
                        nch += 1
                    base = start + 1 + 6 * j  # the move table may have grown
                    self._push_row(idx, self.moves.data[base + 4], self.moves.data[base + 2],
                                   self.moves.data[base + 3], nch, children, ones)
                idx += 1
        # 2. tiles of the output, serial then parallel
        if kind <= 1:
            outdims[0] = 0; outdims[1] = 1; outdims[2] = 3
        else:
            outdims[0] = 0; outdims[1] = 1; outdims[2] = 2
        top = max(rec[2 + outdims[0]], rec[2 + outdims[1]], rec[2 + outdims[2]])
        for par in range(1 if rec[9] else 2):
            for d in range(3):
                for j in range(self.tile_sizes.size):
                    size = self.tile_sizes.data[j]
                    if size >= top:
                        break
                    if self.tile_rows_only.data[j] and (kind > 1 or d != 1):
                        continue
                    self._loop_row(rec, idx, outdims[d], size, par == 1)
                    idx += 1
        # 3. kernels, asking Python only when a kernel's necessary conditions hold
        any_kernel = False
        for k in range(self.nkernels[kind]):
            ok = True
            for d in range(4):
                if (self.kunit[kind][k] >> d) & 1 and rec[2 + d] != 1:
                    ok = False
            if ok and self.kvrf[kind][k]:
                ok = False
                for op in range(self.nops[kind]):
                    if self.t_vrf.data[rec[6 + op]]:
                        ok = True
            if ok:
                any_kernel = True
                break
        if any_kernel:
            flat = self.native.select(i)
            for k in range(0, len(flat), 3):
                self._push_row(idx + flat[k], flat[k + 1], 1, flat[k + 2], 0, children, ones)
        idx += self.nkernels[kind]
        # 4. ToAccum (Matmul) or reduction splits (MatmulAccum)
        if kind == 0:
            operand_shape(rec, 2, shp)
            t[0] = 3; t[1] = 3; t[2] = shp[0]; t[3] = shp[1]; t[4] = shp[2]
            t[5] = 0; t[6] = rec[8]; t[7] = -1; t[8] = -1; t[9] = rec[9]
            children[0] = self._intern(t)
            memcpy(t, rec, REC * sizeof(int64_t))
            t[0] = 1
            children[1] = self._intern(t)
            self._push_row(idx, 0, 0, 0, 2, children, ones)
            idx += 1
        elif kind == 1:
            for j in range(self.tile_sizes.size):
                size = self.tile_sizes.data[j]
                if size >= rec[4]:
                    break
                if self.tile_rows_only.data[j]:
                    continue
                self._loop_row(rec, idx, 2, size, False)
                idx += 1
        self.row_count.data[i] = self.r_index.size - self.row_start.data[i]
        return 0


    # ---- the persistent layer ------------------------------------------------------
    # Results live in one compressed MemoTable per table (Matmul family, Move, Zero) over
    # the coordinates of ``morello.coords``: the Spec's point, with the memory coordinates
    # spanning [encoded peaks, encoded limits]. Values are exact: the main cost per unit
    # of volume as a reduced fraction, then peaks, depth and action index. So identical
    # decisions of neighbouring Specs merge into one box. The per-id lists above are the
    # search's working cache; ``persist`` writes what the search found into the tables.

    def attach_tables(self, tables, bint consult=True):
        """Use ``tables`` ([Matmul, Move, Zero] MemoTables) as the persistent layer.

        ``consult``: look results up there on a miss. Only results loaded from disk can be
        found there and not in the working cache (``persist`` copies the latter into the
        tables), so an engine that started empty skips the lookups: they cost ~30% of a
        cold search."""
        self.tables = list(tables)
        self.consult_tables = consult

    def set_tensor_coords(self, int64_t tid, coords):
        cdef Py_ssize_t j
        while self.t_coord.size < (tid + 1) * 4:
            vec_push(&self.t_coord, 0)
        for j in range(4):
            self.t_coord.data[tid * 4 + j] = coords[j]

    def sizes(self):
        """Sizes of the core's arrays (for memory tuning)."""
        return {"specs": self.records.size // REC, "rows": self.r_index.size,
                "edges": self.e_child.size, "memo_entries": self.m_main.size,
                "tensors": self.t_par.size, "tile_cache": self.tile_cache.vals.size,
                "move_cache_ints": self.moves.size}

    @property
    def table_hits(self):
        return self.table_hits

    def point(self, int64_t i, limits):
        """(family, coordinates) of id ``i`` at ``limits``, as the tables see them."""
        cdef int64_t pt[64]
        cdef int64_t lim[MAXL]
        cdef Py_ssize_t l
        for l in range(self.L):
            lim[l] = limits[l]
        fam = self._point(i, lim, pt)
        if fam < 0:
            return None
        n = (1 if self.records.data[i * REC] <= 1 else 0) + self.records.data[i * REC + 1] \
            + 4 * self.nops[self.records.data[i * REC]] + 1 + self.L
        return fam, tuple(pt[j] for j in range(n))

    cdef int _point(self, int64_t i, const int64_t *limits, int64_t *out) noexcept nogil:
        """The coordinates of (id, limits); returns the table family or -1."""
        cdef const int64_t *rec = self.records.data + i * REC
        cdef int64_t kind = rec[0], rank = rec[1], n = 0, op, j, l, v
        if rank != (4 if kind <= 1 else 3):
            return -1
        if kind <= 1:
            out[n] = 1 if kind == 0 else 0
            n += 1
        for j in range(rank):
            out[n] = rec[2 + j] - 1
            n += 1
        for op in range(self.nops[kind]):
            for j in range(4):
                out[n] = self.t_coord.data[rec[6 + op] * 4 + j]
                n += 1
        out[n] = 0 if rec[9] else 1
        n += 1
        for l in range(self.L):
            v = limits[l]
            if not self.reg[l]:
                j = 0
                while v > 0:
                    v >>= 1
                    j += 1
                v = j
            out[n + l] = v
        return 0 if kind <= 1 else kind - 1

    cdef int64_t _from_table(self, int64_t i, const int64_t *limits) except -2:
        cdef int64_t pt[64]
        cdef int fam = self._point(i, limits, pt)
        cdef MemoTable t
        cdef int64_t box, vol = 1, j, num, den, nd
        cdef Frame f
        cdef Py_ssize_t l
        if fam < 0:
            return -1
        t = self.tables[fam]
        box = t._locate(pt)
        if box < 0:
            return -1
        for j in range(self.records.data[i * REC + 1]):
            vol *= self.records.data[i * REC + 2 + j]
        num = t._val[box * t.nvalues]
        den = t._val[box * t.nvalues + 1]
        f.id = i
        nd = t.ndim - self.L
        for l in range(self.L):
            f.best_peaks[l] = t._val[box * t.nvalues + 2 + l]
            # the box's memory range, decoded back to units
            f.limits[l] = t._hi[box * t.ndim + nd + l]
            if not self.reg[l]:
                f.limits[l] = 0 if f.limits[l] == 0 else (<int64_t>1) << (f.limits[l] - 1)
        f.best_main = num * vol // den
        f.best_depth = t._val[box * t.nvalues + 2 + self.L]
        f.best_action = t._val[box * t.nvalues + 3 + self.L]
        self._store(&f)
        for l in range(self.L):
            j = t._lo[box * t.ndim + nd + l]
            if not self.reg[l]:
                j = 0 if j == 0 else (<int64_t>1) << (j - 1)
            self.m_lo.data[self.m_lo.size - self.L + l] = j
        self.m_persist.data[self.m_persist.size - 1] = 0
        self.specs_solved -= 1
        self.table_hits += 1
        return self.m_main.size - 1

    def persist(self):
        """Write every entry the search found (not yet written) into the tables."""
        cdef int64_t lo[64]
        cdef int64_t hi[64]
        cdef int64_t val[16]
        cdef int64_t ids_ = 0, m, i, vol, g, a, b, j, n = 0
        cdef int fam
        cdef Py_ssize_t l
        cdef MemoTable t
        if self.tables is None:
            return 0
        for i in range(self.memo_head.size):
            m = self.memo_head.data[i]
            while m >= 0:
                if self.m_persist.data[m]:
                    self.m_persist.data[m] = 0
                    fam = self._point(i, self.m_hi.data + m * self.L, hi)
                    if fam >= 0:
                        t = self.tables[fam]
                        self._point(i, self.m_lo.data + m * self.L, lo)
                        vol = 1
                        for j in range(self.records.data[i * REC + 1]):
                            vol *= self.records.data[i * REC + 2 + j]
                        a = self.m_main.data[m]
                        b = vol
                        g = _gcd(a, b) if a else b
                        val[0] = a // g
                        val[1] = b // g
                        for l in range(self.L):
                            val[2 + l] = self.m_peaks.data[m * self.L + l]
                        val[2 + self.L] = self.m_depth.data[m]
                        val[3 + self.L] = self.m_action.data[m]
                        t._put(lo, hi, val)
                        n += 1
                m = self.m_next.data[m]
        return n


cdef int64_t _gcd(int64_t a, int64_t b) noexcept nogil:
    while b:
        a, b = b, a % b
    return a
