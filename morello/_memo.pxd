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
from libc.stdint cimport int32_t, int64_t, uint64_t

from morello._vec cimport _grow, _push, _reserve, _same_row, vec_t

cdef enum:
    MAX_NDIM = 32        # largest supported number of coordinates
    MAX_NVALUES = 16     # largest supported number of values per box
    LEAF_SIZE = 16       # a leaf holding more box ids than this is split
    FILTER_DIMS = 4      # dimensions a leaf screens its boxes on (see leaf_t)
    SPLIT_SAMPLE = 256   # boxes sampled to rank the cuts of a larger leaf
    LEAF = -1            # node_t.dim of a leaf
    FREE = -2            # node_t.dim of a node on the free list

cdef struct node_t:      # a k-d tree node, kept small for the descent
    int64_t split        # internal: x[dim] < split goes left, else right
    int32_t dim          # the cut dimension, or LEAF, or FREE
    int32_t child        # internal: left child (right is child + 1); leaf: its leaf_t

cdef struct leaf_t:      # the payload of a leaf node
    vec_t ids            # ids of the boxes meeting the leaf's region
    vec_t keys           # per id, [lo, hi] in each of fdims: a contiguous screen
    int64_t limit        # split when ids.n exceeds this
    int32_t fdims[FILTER_DIMS]  # the dimensions in which the boxes differ most


cdef int64_t _select(int64_t* a, int64_t n, int64_t k) noexcept nogil
cdef int _read_row(object seq, int64_t* out, int n, str name) except -1


@cython.final
cdef class MemoTable:
    cdef readonly int ndim                   # number of coordinates of a point
    cdef readonly int nvalues                # number of int64 in a value row
    cdef public uint64_t merge_dims          # bit d set: merge neighbours along dim d

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

    # The k-d tree. Node 0 is the root; children come in pairs (2i+1, 2i+2).
    cdef node_t* _nodes                      # (_nodes_cap,) nodes
    cdef int32_t* _parent                    # (_nodes_cap,) parent node; -1 for the root
    cdef int64_t* _size                      # (_nodes_cap,) leaves under the node
    cdef int64_t* _built                     # (_nodes_cap,) _size when the node was made
    cdef int64_t _nnodes                     # nodes ever handed out
    cdef int64_t _nodes_cap                  # allocated nodes
    cdef vec_t _pair_free                    # left ids of free child pairs
    cdef leaf_t* _leaves                     # (_leaves_cap,) leaf payloads
    cdef int64_t _nleaves                    # payloads ever handed out
    cdef int64_t _leaves_cap                 # allocated payloads
    cdef vec_t _leaf_free                    # free payload indices
    cdef int64_t _rebuilds                   # subtree rebuilds so far (diagnostics)

    # Scratch lists reused across calls.
    cdef vec_t _stack                        # traversal stack of node ids
    cdef vec_t _touched                      # leaves touched by (un)registering
    cdef vec_t _hits                         # box ids found by an overlap query
    cdef vec_t _work                         # box ids still to try merging
    cdef vec_t _keys                         # coordinates ranked to pick a cut
    cdef vec_t _gather                       # ids or nodes collected by a rebuild
    cdef vec_t _sample                       # boxes sampled to rank cuts

    cdef int _reserve_nodes(self, int64_t extra) except -1 nogil
    cdef int64_t _new_leaf(self, int64_t node) except -1 nogil
    cdef int64_t _new_pair(self, int64_t parent) except -1 nogil
    cdef int _free_leaf(self, int64_t node) except -1 nogil
    cdef int _leaf_push(self, int64_t lf, int64_t box) except -1 nogil
    cdef int _leaf_refilter(self, int64_t lf) except -1 nogil
    cdef int _best_cut(self, const int64_t* ids, int64_t n, int* best_dim,
                       int64_t* best_m) except -1 nogil
    cdef int _split_leaf(self, int64_t node, bint refilter) except -1 nogil
    cdef int _after_split(self, int64_t node) except -1 nogil
    cdef int _rebuild(self, int64_t node) except -1 nogil
    cdef int _try_collapse(self, int64_t node) except -1 nogil
    cdef int _walk(self, const int64_t* lo, const int64_t* hi) except -1 nogil
    cdef int _register(self, int64_t box) except -1 nogil
    cdef int _unregister(self, int64_t box) except -1 nogil
    cdef int _reserve_boxes(self, int64_t n) except -1 nogil
    cdef int64_t _insert(self, const int64_t* lo, const int64_t* hi,
                         const int64_t* val) except -1 nogil
    cdef int _remove(self, int64_t box) except -1 nogil
    cdef int64_t _locate(self, const int64_t* point) noexcept nogil
    cdef int _collect_overlaps(self, const int64_t* lo,
                               const int64_t* hi) except -1 nogil
    cdef int _merge_from(self, int64_t box) except -1 nogil
    cdef int _put(self, const int64_t* lo, const int64_t* hi,
                  const int64_t* val) except -1 nogil

    # Accessors for other compiled modules (morello._dp): a box's value j and its
    # bounds in coordinate d.
    cdef inline int64_t box_value(self, int64_t box, int64_t j) noexcept nogil:
        return self._val[box * self.nvalues + j]

    cdef inline int64_t box_lo(self, int64_t box, int64_t d) noexcept nogil:
        return self._lo[box * self.ndim + d]

    cdef inline int64_t box_hi(self, int64_t box, int64_t d) noexcept nogil:
        return self._hi[box * self.ndim + d]
