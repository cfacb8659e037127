"""Declarations of the persist pipeline (implementation in _persist.pyx)."""
from libc.stdint cimport int64_t

from morello._dp cimport Solver
from morello._vec cimport vec_t


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


cdef int _produce_page(Solver solver, job_t* job, int64_t page) except -1 nogil
