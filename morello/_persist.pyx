"""Persisting a search: the Solver's new memo entries written into its page cache.

After a search, ``persist(solver, flush)`` gathers every working-memo entry not yet
written, groups them by page (a counting sort over dense page indices, which keeps each
page's entries in id order), builds each page's rows ``[lo, hi, values]`` (the point and
value row of each entry, read from the memo, then carved and merged: ``prepare_rows``) and
puts them into the pages in bulk (``PageCache.put_page``), calling ``flush()`` after each
page so the store writes and releases it. The rows are built by a second thread without
the GIL, a bounded number of pages ahead of the thread that puts them.

It reads the Solver's working memo and page cache through ``_dp.pxd`` and clears the
persist mark of each entry it puts; the Solver knows nothing of it.
"""
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

from morello._dp cimport Solver
from morello._graph cimport HARD_MAX_POINT
from morello._memo cimport MAX_NVALUES
from morello._pages cimport KEY_WIDTH
from morello._rows cimport prepare_rows
from morello._vec cimport (_fill, _grow, _map_free, _map_get, _map_put, _push, _vec_free,
                           map_t, vec_t)

import os
import threading

PERSIST_AHEAD = 8   # pages the row-building thread may run ahead (``persist``'s default)


cdef int64_t _gcd(int64_t a, int64_t b) noexcept nogil:
    while b:
        a, b = b, a % b
    return a


def persist(Solver solver, flush=None, threaded=None, int64_t ahead=PERSIST_AHEAD):
    """Write every entry ``solver``'s search found (not yet written) into the pages; return
    how many. Entries go in page order, a page's entries at once (``put_page``), and
    ``flush()``, if given, is called after each page (the store writes and releases
    it then, so the pages of a large search are never all in memory at once).

    Entries are grouped by a counting sort over dense page indices (an exact map of
    page keys), which keeps each page's entries in id order; a comparison sort of
    the entries was a sizeable part of the write (docs/model-notes.md).

    The rows of the pages (each entry's point and values, gathered from the memo:
    mostly cache misses, then carved and merged: ``prepare_rows``) are built by a
    second thread without the GIL, up to ``ahead`` pages ahead of this one, which
    freezes them into the pages and calls ``flush()`` (encoding, compression and the
    database write) meanwhile. ``threaded``: None (the default) uses the thread when
    the machine has more than one core; False builds each page's rows in turn here.
    ``ahead``: longer leads wrote no faster but raised the peak memory of a save
    (PERSIST_AHEAD; docs/model-notes.md)."""
    cdef int64_t hi[HARD_MAX_POINT]
    cdef int64_t key[KEY_WIDTH]
    cdef int64_t m, i, fam, L = solver.L, e, count = 0, page, n_pages, n = 0, k, nd, exact
    cdef uint64_t merge
    cdef persist_t* order = NULL
    cdef map_t pages
    cdef vec_t starts
    cdef job_t job
    cdef int64_t* rows
    if solver.pages is None:
        return 0
    if 4 + L > MAX_NVALUES or solver.pages.nvalues != 4 + L:
        raise ValueError(f"{4 + L} values per box: more than MAX_NVALUES {MAX_NVALUES} "
                         f"or not the pages' {solver.pages.nvalues}")
    for i in range(solver.memo_head.n):
        m = solver.memo_head.data[i]
        while m >= 0:
            count += solver.m_persist.data[m] != 0
            m = solver.m_next.data[m]
    memset(&pages, 0, sizeof(map_t))
    memset(&starts, 0, sizeof(vec_t))
    memset(&job, 0, sizeof(job_t))
    pages.width = KEY_WIDTH
    worker = None
    try:
        _grow(<void**>&job.todo, count * sizeof(persist_t))
        e = 0
        for i in range(solver.memo_head.n):
            m = solver.memo_head.data[i]
            while m >= 0:
                if solver.m_persist.data[m]:
                    fam = solver.graph.point(i, solver.m_hi.data + m * L, hi)
                    if solver.pages.declared(fam):
                        solver.pages._page_key(fam, hi, key)
                        page = _map_get(&pages, key)
                        if page < 0:
                            page = pages.vals.n
                            _map_put(&pages, key, page)
                            solver.pages.page_geometry(fam, &nd, &exact, &merge)
                            _push(&job.fam, fam)
                            _push(&job.ndim, nd)
                            _push(&job.exact, exact)
                            _push(&job.merge, <int64_t>merge)
                        job.todo[e].page = page
                        job.todo[e].id = i
                        job.todo[e].entry = m
                        e += 1
                m = solver.m_next.data[m]
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
            worker = threading.Thread(target=_produce_all, args=(solver, <size_t>&job),
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
                _produce_page(solver, &job, page)
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
                solver.pages.bulk_carved += job.carved.data[page]
                solver.pages.put_page(job.fam.data[page], job.count.data[page], rows,
                                      job.exact.data[page] >= 0)
            finally:
                free(rows)
            for k in range(job.first.data[page], job.first.data[page + 1]):
                solver.m_persist.data[job.todo[k].entry] = 0
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


def _produce_all(Solver solver, size_t address):
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
                _produce_page(solver, job, page)
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


cdef int _produce_page(Solver solver, job_t* job, int64_t page) except -1 nogil:
    """Build the rows ``[lo, hi, values]`` of page ``page``'s entries into a new
    buffer (``job.rows[page]``; their count ``job.count[page]``), carved
    and merged ready to freeze (``prepare_rows``) when the table has exact dims.
    Reads the memo only; MemoryError when out of memory."""
    cdef int64_t lo[HARD_MAX_POINT]
    cdef int64_t hi[HARD_MAX_POINT]
    cdef int64_t L = solver.L, nd = job.ndim.data[page], tail = nd - L
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
        solver.graph.point(i, solver.m_hi.data + m * L, hi)
        for d in range(tail):     # lo and hi differ only in their L limit coordinates
            lo[d] = hi[d]
        solver.graph.limit_point(solver.m_lo.data + m * L, lo + tail)
        for d in range(nd):
            r[d] = lo[d]
            r[nd + d] = hi[d]
        vol = solver.graph.volume(i)
        a = solver.m_main.data[m]
        g = _gcd(a, vol) if a else vol
        r[2 * nd] = a // g
        r[2 * nd + 1] = vol // g
        for l in range(L):
            r[2 * nd + 2 + l] = solver.m_peaks.data[m * L + l]
        r[2 * nd + 2 + L] = solver.m_depth.data[m]
        r[2 * nd + 3 + L] = solver.m_action.data[m]
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
