"""The DP recurrence: a memoized top-down search over integer Spec ids and limits.

Why this shape (measured on the 2-core development machine, f32 matmul, AVX2):

1. *Limits never reach Python.* Rewrites are compiled per *logical* Spec (a Spec without
   its memory limits) into integer template rows (``morello._expand``): action index,
   constant main cost, units allocated per level, children's logical ids with integer
   coefficients (the affine rule of ``morello.cost``). The core applies one rule to every
   row -- it fits iff ``own <= limits``, children get ``limits - own`` (cache levels
   snapped down to powers of two), cost ``const + sum(coef * child main)``, peaks
   ``snap_up(own + max child peaks)``, depth ``1 + max child depth`` -- and keeps the
   least ``(main, peaks, depth, action)``. Expanding every (Spec, limits) pair in Python
   instead met many times more pairs than logical Specs, each far slower.
2. *Nothing here knows a kind.* Logical Specs are records of a ``SpecGraph``
   (``morello._graph``), whose forms carry every per-kind fact as integer tables; the
   ``Expander`` turns a record into rows from those tables.

The search is an explicit-stack DFS (no recursion). Each solved (id, limits) is stored as a
box of limits ``[peaks, limits]``: the solution is optimal for every limit in the box, and an
unsatisfiable result at ``limits`` covers ``[0, limits]``. The per-id boxes are the working
cache; misses fall through to the persistent compressed tables (``morello._memo``), and
``morello._persist`` writes new results there.
"""
cimport cython
from libc.stdint cimport int64_t
from libc.stdlib cimport free, realloc

from morello._expand cimport Expander, rows_free
from morello._graph cimport HARD_MAX_LEVELS, HARD_MAX_POINT, SpecGraph
from morello._memo cimport MAX_NVALUES
from morello._pages cimport PageCache
from morello._vec cimport _push, _vec_free, vec_t

from morello.errors import DatabaseError

cdef int64_t MAX_COST = (<int64_t>1) << 62


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


cdef inline int64_t _decode_limit(bint reg, int64_t c) noexcept nogil:
    """A limit coordinate back to units (``morello.coords._limit_from_coord``)."""
    if reg:
        return c
    return 0 if c == 0 else (<int64_t>1) << (c - 1)


@cython.final
cdef class Solver:
    """Memoized DP over the logical ids of ``graph``, with rows from ``expander``."""

    def __cinit__(self, SpecGraph graph, Expander expander):
        cdef int64_t l
        self.graph = graph
        self.expander = expander
        self.L = graph.n_levels
        for l in range(self.L):
            self.reg[l] = graph.reg[l]
        self.rows.L = self.L
        self.pages = None

    def __dealloc__(self):
        cdef vec_t* vs[11]
        vs[:] = [&self.row_start, &self.row_count, &self.memo_head, &self.m_lo, &self.m_hi,
                 &self.m_main, &self.m_peaks, &self.m_depth, &self.m_action, &self.m_next,
                 &self.m_persist]
        cdef int k
        for k in range(11):
            _vec_free(vs[k])
        rows_free(&self.rows)

    cdef int _ensure_ids(self) except -1:
        cdef int64_t n = self.graph.records.n // self.graph.width
        while self.row_start.n < n:
            _push(&self.row_start, -1)
            _push(&self.row_count, 0)
            _push(&self.memo_head, -1)
        return 0

    # ---- the working memo -----------------------------------------------------------

    cdef int64_t _lookup(self, int64_t i, const int64_t* limits) except -2:
        """Memo entry of id ``i`` whose box contains ``limits``, or -1.

        Misses fall through to the persistent tables (see ``_from_table``)."""
        cdef int64_t m = self._lookup_local(i, limits)
        if m >= 0 or self.pages is None:
            return m
        return self._from_table(i, limits)

    cdef int64_t _lookup_local(self, int64_t i, const int64_t* limits) noexcept nogil:
        cdef int64_t m, l
        cdef bint inside
        if i >= self.memo_head.n:
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

    cdef int _store(self, frame_t* f) except -1 nogil:
        cdef int64_t l, m = self.m_main.n
        for l in range(self.L):
            _push(&self.m_lo, f.best_peaks[l] if f.best_action >= 0 else 0)
            _push(&self.m_hi, f.limits[l])
            _push(&self.m_peaks, f.best_peaks[l] if f.best_action >= 0 else 0)
        _push(&self.m_main, f.best_main if f.best_action >= 0 else 0)
        _push(&self.m_depth, f.best_depth if f.best_action >= 0 else 0)
        _push(&self.m_action, f.best_action)
        _push(&self.m_next, self.memo_head.data[f.id])
        _push(&self.m_persist, 1)
        self.memo_head.data[f.id] = m
        self.specs_solved += 1
        return 0

    def put(self, int64_t i, lo, hi, int64_t main, peaks, int64_t depth, int64_t action):
        """Preload a known result (from the database) for id ``i`` over the box [lo, hi]."""
        cdef frame_t f
        cdef int64_t l
        self._ensure_ids()
        f.id = i
        for l in range(self.L):
            f.limits[l] = hi[l]
            f.best_peaks[l] = peaks[l]
        f.best_main = main
        f.best_depth = depth
        f.best_action = action
        self._store(&f)
        for l in range(self.L):
            self.m_lo.data[self.m_lo.n - self.L + l] = lo[l]
        self.m_persist.data[self.m_persist.n - 1] = 0
        self.specs_solved -= 1

    def lookup(self, int64_t i, limits):
        """``(main, peaks, depth, action)`` for id ``i`` at ``limits``; action -1 = unsat;
        None if not solved."""
        cdef int64_t lim[HARD_MAX_LEVELS]
        cdef int64_t l, m
        if len(limits) != self.L:
            raise ValueError(f"expected {self.L} limits, got {len(limits)}")
        self._ensure_ids()
        for l in range(self.L):
            lim[l] = limits[l]
        m = self._lookup(i, lim)
        if m < 0:
            return None
        return (self.m_main.data[m],
                tuple(self.m_peaks.data[m * self.L + l] for l in range(self.L)),
                self.m_depth.data[m], self.m_action.data[m])

    # ---- the DP recurrence ----------------------------------------------------------

    cdef int _compile_rows(self, int64_t i) except -1:
        self.row_start.data[i] = self.rows.index.n
        self.expander.compile(i, &self.rows)
        self._ensure_ids()
        self.row_count.data[i] = self.rows.index.n - self.row_start.data[i]
        return 0

    def solve(self, int64_t root, limits):
        """Solve ``root`` at ``limits``; return like ``lookup``."""
        cdef Py_ssize_t cap = 256, sp = 0
        cdef frame_t* stack
        cdef frame_t* f
        cdef frame_t* g
        cdef int64_t r, c, m, own, lim, cm, l, L = self.L
        cdef bint fits, better, pushed
        if len(limits) != L:
            raise ValueError(f"expected {L} limits, got {len(limits)}")
        if not 0 <= root < self.graph.n_ids:
            raise ValueError(f"no logical id {root}")
        stack = <frame_t*>realloc(NULL, cap * sizeof(frame_t))
        if stack == NULL:
            raise MemoryError()
        try:
            self._ensure_ids()
            f = &stack[0]
            f.id = root
            for l in range(L):
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
                        f.arena_rows = self.rows.index.n
                        f.arena_edges = self.rows.child.n
                        self._compile_rows(f.id)
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
                        for l in range(L):
                            own = self.rows.own.data[r * L + l]
                            if own > f.limits[l]:
                                fits = False
                                break
                            lim = f.limits[l] - own
                            f.child_limits[l] = lim if self.reg[l] else pow2_floor(lim)
                            f.acc_peaks[l] = 0
                        if not fits:
                            f.row += 1
                            continue
                        f.child = self.rows.child_start.data[r]
                        f.acc_main = self.rows.cost.data[r]
                        f.acc_depth = 0
                        self.rows_evaluated += 1
                    fits = True
                    while f.child < self.rows.child_start.data[r] + self.rows.child_count.data[r]:
                        c = self.rows.child.data[f.child]
                        m = self._lookup(c, f.child_limits)
                        if m < 0:
                            if sp == cap:
                                cap *= 2
                                stack = <frame_t*>realloc(stack, cap * sizeof(frame_t))
                                if stack == NULL:
                                    raise MemoryError()
                                f = &stack[sp - 1]
                            g = &stack[sp]
                            g.id = c
                            for l in range(L):
                                g.limits[l] = f.child_limits[l]
                            g.row = -1
                            sp += 1
                            pushed = True
                            break
                        if self.m_action.data[m] < 0:
                            fits = False
                            break
                        f.acc_main = sat_add(
                            f.acc_main, sat_mul(self.rows.coef.data[f.child], self.m_main.data[m]))
                        if self.m_depth.data[m] > f.acc_depth:
                            f.acc_depth = self.m_depth.data[m]
                        for l in range(L):
                            cm = self.m_peaks.data[m * L + l]
                            if cm > f.acc_peaks[l]:
                                f.acc_peaks[l] = cm
                        f.child += 1
                    if pushed:
                        break
                    if fits:
                        f.acc_depth += 1
                        for l in range(L):
                            f.acc_peaks[l] += self.rows.own.data[r * L + l]
                            if not self.reg[l]:
                                f.acc_peaks[l] = pow2_ceil(f.acc_peaks[l])
                        if f.best_action < 0:
                            better = True
                        elif f.acc_main != f.best_main:
                            better = f.acc_main < f.best_main
                        else:
                            better = False
                            for l in range(L):
                                if f.acc_peaks[l] != f.best_peaks[l]:
                                    better = f.acc_peaks[l] < f.best_peaks[l]
                                    break
                            else:
                                if f.acc_depth != f.best_depth:
                                    better = f.acc_depth < f.best_depth
                                else:
                                    better = self.rows.index.data[r] < f.best_action
                        if better:
                            f.best_action = self.rows.index.data[r]
                            f.best_main = f.acc_main
                            f.best_depth = f.acc_depth
                            for l in range(L):
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
                    self.rows.index.n = self.rows.cost.n = f.arena_rows
                    self.rows.child_start.n = self.rows.child_count.n = f.arena_rows
                    self.rows.own.n = f.arena_rows * L
                    self.rows.child.n = self.rows.coef.n = f.arena_edges
                    self.row_start.data[f.id] = -1
                sp -= 1
        finally:
            free(stack)
        return self.lookup(root, limits)

    def rows_of(self, int64_t i):
        """Compile ``i`` if needed; its rows as (index, const, own, children, coefs)."""
        cdef int64_t r, e, L = self.L
        if not 0 <= i < self.graph.n_ids:
            raise ValueError(f"no logical id {i}")
        self._ensure_ids()
        if self.row_start.data[i] < 0:
            self._compile_rows(i)
        out = []
        for r in range(self.row_start.data[i], self.row_start.data[i] + self.row_count.data[i]):
            cs = self.rows.child_start.data[r]
            cn = self.rows.child_count.data[r]
            out.append((self.rows.index.data[r], self.rows.cost.data[r],
                        tuple(self.rows.own.data[r * L + l] for l in range(L)),
                        tuple(self.rows.child.data[e] for e in range(cs, cs + cn)),
                        tuple(self.rows.coef.data[e] for e in range(cs, cs + cn))))
        return out

    def sizes(self):
        """Sizes of the core's arrays (for memory tuning)."""
        return {"specs": self.graph.n_ids, "rows": self.rows.index.n,
                "edges": self.rows.child.n, "memo_entries": self.m_main.n}

    # ---- the persistent layer ------------------------------------------------------
    # Results live in compressed MemoTables over the coordinates of ``morello.coords``:
    # the Spec's point, with the memory coordinates spanning [encoded peaks, encoded
    # limits], split into pages (``morello._pages``) that are loaded when a lookup first
    # touches them. Values are exact: the main cost per unit of volume as a reduced
    # fraction, then peaks, depth and action index, so identical decisions of neighbouring
    # Specs merge into one box. The per-id lists above are the search's working cache;
    # ``morello._persist`` writes what the search found into the pages.

    def attach_pages(self, PageCache pages):
        """Use ``pages`` as the persistent layer (None: none). A lookup that misses the
        working memo asks the pages, which answer at once for tables without pages."""
        self.pages = pages

    @property
    def table_hits(self):
        return self.table_hits

    cdef int64_t _from_table(self, int64_t i, const int64_t* limits) except -2:
        cdef int64_t pt[HARD_MAX_POINT]
        cdef int64_t lo[HARD_MAX_POINT]
        cdef int64_t hi[HARD_MAX_POINT]
        cdef int64_t val[MAX_NVALUES]
        cdef int64_t fam = self.graph.id_table.data[i]
        cdef int64_t num, den, nd, l, vol, L = self.L, n
        cdef frame_t f
        if not self.pages.has_pages(fam):
            return -1
        n = self.graph.point_len(i)
        if self.pages.g_ndim.data[fam] != n:
            raise ValueError(f"table {fam} has points of {self.pages.g_ndim.data[fam]} "
                             f"coordinates, id {i} has {n}")
        self.graph.point(i, limits, pt)
        if not self.pages.lookup(fam, pt, val, lo, hi):
            return -1
        num = val[0]
        den = val[1]
        f.id = i
        nd = n - L
        for l in range(L):
            f.best_peaks[l] = val[2 + l]
            # the box's memory range, decoded back to units
            f.limits[l] = _decode_limit(self.reg[l], hi[nd + l])
        # den divides the volume (the fraction was reduced from main / volume); pages are
        # validated when loaded, but a value that does not fit this Spec is refused here.
        vol = self.graph.volume(i)
        if den < 1 or num < 0 or vol % den != 0:
            raise DatabaseError(f"a stored cost ({num}/{den}) does not fit a Spec of volume "
                                f"{vol}: the database is corrupt; delete it or pass another "
                                "--db")
        f.best_main = sat_mul(num, vol // den)
        f.best_depth = val[2 + L]
        f.best_action = val[3 + L]
        self._store(&f)
        for l in range(L):
            self.m_lo.data[self.m_lo.n - L + l] = _decode_limit(self.reg[l], lo[nd + l])
        self.m_persist.data[self.m_persist.n - 1] = 0
        self.specs_solved -= 1
        self.table_hits += 1
        return self.m_main.n - 1
