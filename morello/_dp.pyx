"""The DP recurrence: a memoized top-down search over integer Spec ids and limits.

Why this shape. The rewrites stay in Python, but they are *compiled once per logical Spec*
(a Spec without its memory limits) into integer template rows: the action index, a constant
main cost, the units allocated per level, and the children's logical ids with integer
coefficients (the affine rule of ``morello.cost``). Memory limits never reach Python: the
core applies one rule for every row -- the row fits iff ``own <= limits``, children get
``limits - own`` (cache levels snapped down to powers of two), the row's cost is
``const + sum(coef * child main)``, peaks ``snap_up(own + max child peaks)``, depth
``1 + max child depth`` -- and keeps the least ``(main, peaks, depth, action index)``.
So Python runs once per logical Spec (a callback when the search first reaches it), never
per (Spec, limits) or per (Spec, action) evaluation. We measured the alternative of expanding
every (Spec, limits) pair in Python: it spent ~0.4 ms per pair and saw 7x more pairs than
logical Specs.

The search is an explicit-stack DFS (no recursion). Each solved (id, limits) is stored as a
box of limits ``[peaks, limits]``: the solution is optimal for every limit in the box, and an
unsatisfiable result at ``limits`` covers ``[0, limits]``. Lookups scan the boxes of one id.
"""
# cython: language_level=3
cimport cython
from libc.stdint cimport int64_t
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


cdef object _arr(Vec *v):
    out = np.empty(v.size, np.int64)
    cdef int64_t[::1] o = out
    cdef Py_ssize_t k
    for k in range(v.size):
        o[k] = v.data[k]
    return out


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

    cdef int _ensure_id(self, int64_t i) except -1:
        while self.row_start.size <= i:
            vec_push(&self.row_start, -1)
            vec_push(&self.row_count, 0)
            vec_push(&self.memo_head, -1)
        return 0

    cdef int _compile(self, int64_t i) except -1:
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

    cdef int64_t _lookup(self, int64_t i, const int64_t *limits) noexcept nogil:
        """Memo entry of id ``i`` whose box contains ``limits``, or -1."""
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

    def entries(self):
        """All memo boxes as arrays: ids, lo, hi, main, peaks, depth, action."""
        n = self.m_main.size
        ids = np.empty(n, np.int64)
        cdef Py_ssize_t i, m
        for i in range(self.memo_head.size):
            m = self.memo_head.data[i]
            while m >= 0:
                ids[m] = i
                m = self.m_next.data[m]
        L = self.L
        return (ids, _arr(&self.m_lo).reshape(n, L), _arr(&self.m_hi).reshape(n, L),
                _arr(&self.m_main), _arr(&self.m_peaks).reshape(n, L),
                _arr(&self.m_depth), _arr(&self.m_action))

    @property
    def compiled_ids(self):
        cdef Py_ssize_t i, c = 0
        for i in range(self.row_start.size):
            if self.row_start.data[i] >= 0:
                c += 1
        return c

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
                    if self.row_start.data[f.id] < 0:
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
                sp -= 1
        finally:
            free(stack)
        return self.lookup(root, limits)
