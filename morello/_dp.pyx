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
``persist`` writes new results there.
"""
cimport cython
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

from morello._expand cimport Expander, rows_free, rows_t
from morello._graph cimport HARD_MAX_LEVELS, HARD_MAX_POINT, SpecGraph
from morello._memo cimport MAX_NVALUES, MemoTable
from morello._pages cimport KEY_WIDTH, PageCache, prepare_rows
from morello._vec cimport (_fill, _grow, _map_free, _map_get, _map_put, _push, _vec_free,
                           map_t, vec_t)

import os
import threading

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


cdef struct persist_t:        # a memo entry to persist, grouped by its page
    int64_t page                  # dense index of its page key, in order of first sight
    int64_t id
    int64_t entry


cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, const void*)
    int pthread_mutex_destroy(pthread_mutex_t*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)
    int pthread_cond_init(pthread_cond_t*, const void*)
    int pthread_cond_destroy(pthread_cond_t*)
    int pthread_cond_wait(pthread_cond_t*, pthread_mutex_t*)
    int pthread_cond_signal(pthread_cond_t*)


PERSIST_AHEAD = 8   # pages the row-building thread may run ahead (``persist``'s default)


cdef struct job_t:            # persist's pages: rows built by one thread, put by another
    persist_t* todo               # the entries, grouped by page
    vec_t first                   # page p's entries: todo[first[p] .. first[p + 1]]
    vec_t fam                     # per page: its table
    vec_t ndim                    # per page: coordinates of its points
    vec_t exact                   # per page: its table's exact dims (-1: rows not prepared)
    vec_t merge                   # per page: its table's merge dims (``prepare_rows``)
    vec_t count                   # per page: its rows once built (carved and merged)
    vec_t carved                  # per page: groups of overlapping boxes carved
    int64_t n_pages
    int64_t ahead                 # pages the row thread may build before they are taken
    int64_t** rows                # per page: its rows once built, until put (then freed)
    int64_t produced              # pages whose rows are built
    int64_t consumed              # pages taken by the putting thread
    bint sync                     # the two threads share it (mu and cv are live)
    bint stop                     # the putting thread is done (or failed): stop building
    bint failed                   # out of memory building rows
    pthread_mutex_t mu
    pthread_cond_t cv


cdef int64_t _gcd(int64_t a, int64_t b) noexcept nogil:
    while b:
        a, b = b, a % b
    return a


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
    # ``persist`` writes what the search found into the pages.

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

    def persist(self, flush=None, threaded=None, int64_t ahead=PERSIST_AHEAD):
        """Write every entry the search found (not yet written) into the pages; return
        how many. Entries go in page order, a page's entries at once (``put_page``), and
        ``flush()``, if given, is called after each page (the store writes and releases
        it then, so the pages of a large search are never all in memory at once).

        Entries are grouped by a counting sort over dense page indices (an exact map of
        page keys), which keeps each page's entries in id order; a comparison sort of
        the entries was an eighth of the write after a 1024^3 search.

        The rows of the pages (each entry's point and values, gathered from the memo:
        mostly cache misses, then carved and merged: ``prepare_rows``) are built by a
        second thread without the GIL, up to ``ahead`` pages ahead of this one, which
        freezes them into the pages and calls ``flush()`` (encoding, compression and the
        database write) meanwhile. ``threaded``: None (the default) uses the thread when
        the machine has more than one core; False builds each page's rows in turn here.
        ``ahead``: leads of 4 to 64 pages wrote a cold 1024^3 equally fast (0.69-0.73x
        the one-thread time, paired), but a lead of 64 raised the peak memory of a
        medium query's save by 13 MiB more than a lead of 8 (PERSIST_AHEAD)."""
        cdef int64_t hi[HARD_MAX_POINT]
        cdef int64_t key[KEY_WIDTH]
        cdef int64_t m, i, fam, L = self.L, e, count = 0, page, n_pages, n = 0, k, nd, exact
        cdef uint64_t merge
        cdef persist_t* order = NULL
        cdef map_t pages
        cdef vec_t starts
        cdef job_t job
        cdef int64_t* rows
        if self.pages is None:
            return 0
        if 4 + L > MAX_NVALUES or self.pages.nvalues != 4 + L:
            raise ValueError(f"{4 + L} values per box: more than MAX_NVALUES {MAX_NVALUES} "
                             f"or not the pages' {self.pages.nvalues}")
        for i in range(self.memo_head.n):
            m = self.memo_head.data[i]
            while m >= 0:
                count += self.m_persist.data[m] != 0
                m = self.m_next.data[m]
        memset(&pages, 0, sizeof(map_t))
        memset(&starts, 0, sizeof(vec_t))
        memset(&job, 0, sizeof(job_t))
        pages.width = KEY_WIDTH
        worker = None
        try:
            _grow(<void**>&job.todo, count * sizeof(persist_t))
            e = 0
            for i in range(self.memo_head.n):
                m = self.memo_head.data[i]
                while m >= 0:
                    if self.m_persist.data[m]:
                        fam = self.graph.point(i, self.m_hi.data + m * L, hi)
                        if self.pages.declared(fam):
                            self.pages._page_key(fam, hi, key)
                            page = _map_get(&pages, key)
                            if page < 0:
                                page = pages.vals.n
                                _map_put(&pages, key, page)
                                self.pages.page_geometry(fam, &nd, &exact, &merge)
                                _push(&job.fam, fam)
                                _push(&job.ndim, nd)
                                _push(&job.exact, exact)
                                _push(&job.merge, <int64_t>merge)
                            job.todo[e].page = page
                            job.todo[e].id = i
                            job.todo[e].entry = m
                            e += 1
                    m = self.m_next.data[m]
            n_pages = pages.vals.n
            _map_free(&pages)
            # counting sort by page: job.first[p] .. job.first[p + 1] are page p's entries
            _fill(&job.first, n_pages + 1, 0)
            for k in range(e):
                job.first.data[job.todo[k].page + 1] += 1
            for page in range(n_pages):
                job.first.data[page + 1] += job.first.data[page]
            _fill(&starts, n_pages, 0)  # where each page's next entry goes
            memcpy(starts.data, job.first.data, n_pages * sizeof(int64_t))
            _grow(<void**>&order, e * sizeof(persist_t))
            for k in range(e):
                page = job.todo[k].page
                order[starts.data[page]] = job.todo[k]
                starts.data[page] += 1
            free(job.todo)
            job.todo = order
            order = NULL
            job.n_pages = n_pages
            job.ahead = max(ahead, 1)
            _fill(&job.count, n_pages, 0)
            _fill(&job.carved, n_pages, 0)
            _grow(<void**>&job.rows, (n_pages if n_pages else 1) * sizeof(int64_t*))
            memset(job.rows, 0, (n_pages if n_pages else 1) * sizeof(int64_t*))
            if threaded is None:
                threaded = (os.cpu_count() or 1) > 1
            if threaded and n_pages > 1:
                pthread_mutex_init(&job.mu, NULL)
                pthread_cond_init(&job.cv, NULL)
                job.sync = 1
                worker = threading.Thread(target=self._produce_all, args=(<size_t>&job,),
                                          name="morello-persist-rows", daemon=True)
                worker.start()
            for page in range(n_pages):
                if job.sync:
                    with nogil:
                        pthread_mutex_lock(&job.mu)
                        while job.produced <= page and not job.failed:
                            pthread_cond_wait(&job.cv, &job.mu)
                        pthread_mutex_unlock(&job.mu)
                else:
                    self._produce_page(&job, page)
                if job.failed:
                    raise MemoryError("no memory for the rows of a page")
                rows = job.rows[page]
                job.rows[page] = NULL
                if job.sync:
                    with nogil:
                        pthread_mutex_lock(&job.mu)
                        job.consumed = page + 1
                        pthread_cond_signal(&job.cv)
                        pthread_mutex_unlock(&job.mu)
                try:
                    self.pages.bulk_carved += job.carved.data[page]
                    self.pages.put_page(job.fam.data[page], job.count.data[page], rows,
                                        job.exact.data[page] >= 0)
                finally:
                    free(rows)
                for k in range(job.first.data[page], job.first.data[page + 1]):
                    self.m_persist.data[job.todo[k].entry] = 0
                n += job.first.data[page + 1] - job.first.data[page]
                if flush is not None:
                    flush()
            if flush is not None and n_pages == 0:
                flush()
        finally:
            if worker is not None:
                with nogil:
                    pthread_mutex_lock(&job.mu)
                    job.stop = 1
                    pthread_cond_signal(&job.cv)
                    pthread_mutex_unlock(&job.mu)
                worker.join()
            if job.sync:
                pthread_cond_destroy(&job.cv)
                pthread_mutex_destroy(&job.mu)
            if job.rows != NULL:
                for page in range(job.n_pages):
                    free(job.rows[page])
            free(job.rows)
            _map_free(&pages)
            _vec_free(&starts)
            _vec_free(&job.first)
            _vec_free(&job.fam)
            _vec_free(&job.ndim)
            _vec_free(&job.exact)
            _vec_free(&job.merge)
            _vec_free(&job.count)
            _vec_free(&job.carved)
            free(job.todo)
            free(order)
        return n

    def _produce_all(self, size_t address):
        """The row-building thread of ``persist``: every page's rows in turn, waiting
        while it is ``job.ahead`` pages ahead, until done or told to stop. Out of
        memory, it marks the job failed (the putting thread raises) and stops."""
        cdef job_t* job = <job_t*>address
        cdef int64_t page
        cdef bint stop
        try:
            with nogil:
                for page in range(job.n_pages):
                    pthread_mutex_lock(&job.mu)
                    while job.consumed + job.ahead <= page and not job.stop:
                        pthread_cond_wait(&job.cv, &job.mu)
                    stop = job.stop  # read under the lock, as it is written
                    pthread_mutex_unlock(&job.mu)
                    if stop:
                        break
                    self._produce_page(job, page)
                    pthread_mutex_lock(&job.mu)
                    job.produced = page + 1
                    pthread_cond_signal(&job.cv)
                    pthread_mutex_unlock(&job.mu)
        except MemoryError:
            with nogil:
                pthread_mutex_lock(&job.mu)
                job.failed = 1
                pthread_cond_signal(&job.cv)
                pthread_mutex_unlock(&job.mu)

    cdef int _produce_page(self, void* job_, int64_t page) except -1 nogil:
        """Build the rows ``[lo, hi, values]`` of page ``page``'s entries into a new
        buffer (``job.rows[page]``, a ``job_t``; their count ``job.count[page]``), carved
        and merged ready to freeze (``prepare_rows``) when the table has exact dims.
        Reads the memo only; MemoryError when out of memory."""
        cdef job_t* job = <job_t*>job_
        cdef int64_t lo[HARD_MAX_POINT]
        cdef int64_t hi[HARD_MAX_POINT]
        cdef int64_t L = self.L, nd = job.ndim.data[page], tail = nd - L
        cdef int64_t w = 2 * nd + 4 + L, k, i, m, d, l, vol, a, g, n
        cdef int64_t k0 = job.first.data[page], k1 = job.first.data[page + 1]
        cdef int64_t* r = NULL
        cdef int64_t* r0
        cdef vec_t spare
        _grow(<void**>&r, (k1 - k0) * w * sizeof(int64_t))
        job.rows[page] = r0 = r
        for k in range(k0, k1):
            i = job.todo[k].id
            m = job.todo[k].entry
            self.graph.point(i, self.m_hi.data + m * L, hi)
            for d in range(tail):     # lo and hi differ only in their L limit coordinates
                lo[d] = hi[d]
            self.graph.limit_point(self.m_lo.data + m * L, lo + tail)
            for d in range(nd):
                r[d] = lo[d]
                r[nd + d] = hi[d]
            vol = self.graph.volume(i)
            a = self.m_main.data[m]
            g = _gcd(a, vol) if a else vol
            r[2 * nd] = a // g
            r[2 * nd + 1] = vol // g
            for l in range(L):
                r[2 * nd + 2 + l] = self.m_peaks.data[m * L + l]
            r[2 * nd + 2 + L] = self.m_depth.data[m]
            r[2 * nd + 3 + L] = self.m_action.data[m]
            r += w
        job.count.data[page] = k1 - k0
        if job.exact.data[page] < 0:
            return 0
        memset(&spare, 0, sizeof(vec_t))
        r = r0
        try:
            n = prepare_rows(nd, 4 + L, <uint64_t>job.exact.data[page],
                             <uint64_t>job.merge.data[page], k1 - k0, &r, &spare,
                             &job.carved.data[page])
            if r != r0:  # carved: the rows are spare's now
                job.rows[page] = spare.data
                memset(&spare, 0, sizeof(vec_t))
                free(r0)
            job.count.data[page] = n
        finally:
            _vec_free(&spare)
        return 0
