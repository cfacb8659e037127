# cython: language_level=3
"""Declarations of the compressed memo table (implementation in _memo.pyx).

A MemoTable stores pairwise-disjoint inclusive boxes [lo, hi] over Z>=0^ndim,
each mapped to a row of nvalues int64. Boxes live in C buffers indexed by box
id; a bucket k-d tree over space (not over boxes) answers point and overlap
queries.

C-level contract (cimported by morello._dp, keep stable): ``_locate(point)``
returns a box id or -1; box ``b`` has rows ``_lo[b * ndim:(b + 1) * ndim]``,
``_hi[...]`` and ``_val[b * nvalues:(b + 1) * nvalues]``; ``_put(lo, hi, val)``
is ``put`` without argument checks (requires 0 <= lo <= hi). Changing the
fields below changes the object layout: rebuild both extensions afterwards.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t

cdef enum:
    MAX_NDIM = 32        # largest supported number of coordinates
    MAX_NVALUES = 16     # largest supported number of values per box
    LEAF_SIZE = 16       # a leaf holding more box ids than this is split
    LEAF = -1            # node_t.dim of a leaf
    FREE = -2            # node_t.dim of a node on the free list

cdef struct vec_t:       # growable array of int64
    int64_t* data        # malloc'd storage, or NULL
    int64_t n            # used length
    int64_t cap          # allocated length

cdef struct node_t:      # a k-d tree node: a leaf or a split of its region
    int64_t split        # internal: x[dim] < split is left, x[dim] >= split right
    int64_t left         # internal: node id of the left child
    int64_t right        # internal: node id of the right child
    int64_t parent       # node id of the parent; -1 for the root
    int64_t limit        # leaf: split when ids.n exceeds this
    vec_t ids            # leaf: ids of the boxes meeting the leaf's region
    int32_t dim          # split dimension, or LEAF, or FREE


@cython.final
cdef class MemoTable:
    cdef readonly int ndim                   # number of coordinates of a point
    cdef readonly int nvalues                # number of int64 in a value row

    # Boxes, indexed by id. A free id has _alive[id] == 0.
    cdef int64_t* _lo                        # (_cap, ndim) inclusive low corners
    cdef int64_t* _hi                        # (_cap, ndim) inclusive high corners
    cdef int64_t* _val                       # (_cap, nvalues) value rows
    cdef char* _alive                        # (_cap,) 1 for a stored box
    cdef int64_t* _stamp                     # (_cap,) last epoch that saw the box
    cdef vec_t _free                         # stack of free box ids
    cdef int64_t _nslots                     # ids ever handed out (high-water mark)
    cdef int64_t _cap                        # allocated rows of the box buffers
    cdef int64_t _nalive                     # number of stored boxes
    cdef int64_t _epoch                      # counter for deduplicating visits

    # The k-d tree. Node 0 is the root and covers all of Z>=0^ndim.
    cdef node_t* _nodes                      # (_nodes_cap,) nodes
    cdef int64_t _nnodes                     # nodes ever handed out
    cdef int64_t _nodes_cap                  # allocated nodes
    cdef vec_t _node_free                    # stack of free node ids

    # Scratch lists reused across calls.
    cdef vec_t _stack                        # traversal stack of node ids
    cdef vec_t _touched                      # leaves touched by (un)registering
    cdef vec_t _hits                         # box ids found by an overlap query
    cdef vec_t _work                         # box ids still to try merging
    cdef vec_t _keys                         # split candidates being ranked

    cdef int64_t _new_leaf(self, int64_t parent) except -1 nogil
    cdef int _split_leaf(self, int64_t node) except -1 nogil
    cdef int _try_collapse(self, int64_t node) except -1 nogil
    cdef int _walk(self, const int64_t* lo, const int64_t* hi) except -1 nogil
    cdef int _register(self, int64_t box) except -1 nogil
    cdef int _unregister(self, int64_t box) except -1 nogil
    cdef int _reserve_box(self) except -1 nogil
    cdef int64_t _insert(self, const int64_t* lo, const int64_t* hi,
                         const int64_t* val) except -1 nogil
    cdef int _remove(self, int64_t box) except -1 nogil
    cdef int64_t _locate(self, const int64_t* point) noexcept nogil
    cdef int _collect_overlaps(self, const int64_t* lo,
                               const int64_t* hi) except -1 nogil
    cdef int _merge_from(self, int64_t box) except -1 nogil
    cdef int _put(self, const int64_t* lo, const int64_t* hi,
                  const int64_t* val) except -1 nogil
