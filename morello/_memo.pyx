"""The compressed memo table: disjoint boxes of Z>=0^ndim mapped to int64 rows.

The DP stores each solved Spec as a box: a single point in the Spec's own
coordinates times a range [peak, limit] in the memory coordinates, since one
solution is optimal for every limit between its peak and the limit it was
solved at. Neighbouring boxes with identical values are merged, which is what
keeps the table small.

Invariants kept by every public method:

* stored boxes are pairwise disjoint (a later put overwrites the overlap);
* after ``put``, no two stored boxes are *face-mergeable*: equal values, equal
  extents in all dimensions but one, and adjacent in that one, if that one is
  among ``merge_dims`` (a bit mask, all dimensions by default). (Boxes loaded
  by ``from_arrays`` are kept as given.)

Index: a bucket k-d tree over space. Each internal node cuts its region by an
axis-aligned hyperplane x[dim] = split; each leaf lists the ids of every box
meeting its region, so a box crossing a cut is listed on both sides (as in an
R+-tree) and a point query descends one path and scans one leaf. A leaf with
more than LEAF_SIZE ids is cut at the median box boundary of the dimension
that best balances it; if no cut helps, its limit doubles instead. Two sibling
leaves that shrink to LEAF_SIZE / 2 ids together are joined again. When
inserts make the tree deeper than log_{5/3} of its leaf count, the subtree of
a "scapegoat" ancestor is rebuilt by median cuts, so sorted inserts keep
O(log n) depth. Each leaf screens its boxes on the FILTER_DIMS dimensions in
which they differ most, from a contiguous copy of those bounds, before
checking a candidate in full: this saves most cache misses of a scan.

One module, past the house's 700 lines, because it is one extension type: the box
buffers and the tree index the same ids under one set of invariants, the DP's point
lookup (``_locate``, cimported) walks both, and Cython cannot spread one cdef class
over modules; a tree of its own type would cost a pointer chase per lookup.

Concurrency: the table is not locked. The Python methods keep the GIL, so
Python threads are safe; C callers of the nogil methods must serialize
mutation themselves.
"""
cimport cython
from cpython.number cimport PyNumber_Index
from libc.stdint cimport INT64_MAX, int64_t, uint8_t
from libc.math cimport log
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

import numpy as np

cimport numpy as cnp

cnp.import_array()


cdef int64_t _select(int64_t* a, int64_t n, int64_t k) noexcept nogil:
    """The k-th smallest of a[0:n] (from 0), reordering a (Hoare's select)."""
    cdef int64_t lo = 0, hi = n - 1, i, j, pivot, x, y, z
    while lo < hi:
        x, y, z = a[lo], a[(lo + hi) // 2], a[hi]
        pivot = max(min(x, y), min(max(x, y), z))  # median of three
        i, j = lo, hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        # Now a[lo..j] <= pivot <= a[i..hi], and a[j+1..i-1] == pivot.
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return a[k]
    return a[k]


cdef int _read_row(object seq, int64_t* out, int n, str name) except -1:
    """Copy a length-n sequence of integers into out, rejecting non-integers."""
    cdef Py_ssize_t i
    cdef cnp.ndarray c
    if type(seq) is tuple or type(seq) is list:
        if len(seq) != n:
            raise ValueError(f"{name} has {len(seq)} entries, expected {n}")
        for i in range(n):
            # operator.index semantics: 2.0 or "2" are errors, not coordinates.
            out[i] = PyNumber_Index(seq[i])
        return 0
    arr = np.asarray(seq)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} has shape {arr.shape}, expected ({n},)")
    if arr.dtype.kind not in "iub":
        raise TypeError(f"{name} must hold integers, not {arr.dtype}")
    c = np.ascontiguousarray(arr, dtype=np.int64)
    memcpy(out, cnp.PyArray_DATA(c), n * sizeof(int64_t))
    return 0


def _as_rows(obj, int ncols, str name):
    """Return obj as a C-contiguous int64 array of shape (n, ncols)."""
    arr = np.asarray(obj)
    if arr.size == 0:
        arr = arr.reshape(0, ncols)
    if arr.ndim != 2 or arr.shape[1] != ncols:
        raise ValueError(f"{name} has shape {arr.shape}, expected (n, {ncols})")
    if arr.dtype.kind not in "iub" and arr.size:
        raise TypeError(f"{name} must hold integers, not {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.int64)


@cython.final
cdef class MemoTable:
    """Map from points of Z>=0^ndim to rows of nvalues int64, stored as boxes.

    ``put(lo, hi, value)`` assigns value to every point of the inclusive box
    lo <= x <= hi; ``get(point)`` returns the value at a point or None.
    ``len(table)`` is the number of stored boxes and ``covered()`` the number
    of points that have a value.
    """

    def __cinit__(self, int ndim, int nvalues):
        if not 1 <= ndim <= MAX_NDIM:
            raise ValueError(f"ndim must be in 1..{MAX_NDIM}, got {ndim}")
        if not 1 <= nvalues <= MAX_NVALUES:
            raise ValueError(
                f"nvalues must be in 1..{MAX_NVALUES}, got {nvalues}")
        self.ndim = ndim
        self.nvalues = nvalues
        self.merge_dims = ~(<uint64_t>0)
        self._reserve_nodes(1)
        self._nnodes = 1
        self._parent[0] = -1
        self._size[0] = self._built[0] = 1
        self._new_leaf(0)

    def __init__(self, int ndim, int nvalues):
        pass

    def __dealloc__(self):
        cdef int64_t i
        if self._leaves != NULL:
            for i in range(self._nleaves):
                free(self._leaves[i].ids.data)
                free(self._leaves[i].keys.data)
        free(self._leaves)
        free(self._leaf_free.data)
        free(self._nodes)
        free(self._parent)
        free(self._size)
        free(self._built)
        free(self._pair_free.data)
        free(self._lo)
        free(self._hi)
        free(self._val)
        free(self._alive)
        free(self._stamp)
        free(self._free.data)
        free(self._stack.data)
        free(self._touched.data)
        free(self._hits.data)
        free(self._work.data)
        free(self._keys.data)
        free(self._gather.data)
        free(self._sample.data)

    # ---- the k-d tree --------------------------------------------------
    #
    # Nodes are split only at leaves, so leaf regions always partition space.
    # _size counts the leaves under a node; it drives the scapegoat rule that
    # keeps the depth logarithmic when boxes arrive in sorted order.

    cdef int _reserve_nodes(self, int64_t extra) except -1 nogil:
        cdef int64_t cap = self._nodes_cap if self._nodes_cap else 16
        while cap < self._nnodes + extra:
            cap *= 2
        if cap == self._nodes_cap:
            return 0
        _grow(<void**>&self._nodes, cap * sizeof(node_t))
        _grow(<void**>&self._parent, cap * sizeof(int32_t))
        _grow(<void**>&self._size, cap * sizeof(int64_t))
        _grow(<void**>&self._built, cap * sizeof(int64_t))
        self._nodes_cap = cap
        return 0

    cdef int64_t _new_leaf(self, int64_t node) except -1 nogil:
        """Make node an empty leaf with a fresh payload; return the payload."""
        cdef int64_t lf, cap
        cdef int k, d = self.ndim
        if self._leaf_free.n > 0:
            self._leaf_free.n -= 1
            lf = self._leaf_free.data[self._leaf_free.n]
        else:
            if self._nleaves == self._leaves_cap:
                cap = 2 * self._leaves_cap if self._leaves_cap else 16
                _grow(<void**>&self._leaves, cap * sizeof(leaf_t))
                self._leaves_cap = cap
            lf = self._nleaves
            self._nleaves += 1
            memset(&self._leaves[lf], 0, sizeof(leaf_t))
        # A recycled payload keeps its buffers.
        self._leaves[lf].ids.n = self._leaves[lf].keys.n = 0
        self._leaves[lf].limit = LEAF_SIZE
        for k in range(FILTER_DIMS):
            # Until a split looks at the boxes, filter on the last dimensions
            # (the memory coordinates), cycling if there are fewer.
            self._leaves[lf].fdims[k] = ((d - 1 - k) % d + d) % d
        self._nodes[node].dim = LEAF
        self._nodes[node].child = <int32_t>lf
        return lf

    cdef int64_t _new_pair(self, int64_t parent) except -1 nogil:
        """Two fresh nodes (left, left + 1) under parent; return left."""
        cdef int64_t left
        if self._pair_free.n > 0:
            self._pair_free.n -= 1
            left = self._pair_free.data[self._pair_free.n]
        else:
            self._reserve_nodes(2)
            left = self._nnodes
            self._nnodes += 2
        self._parent[left] = self._parent[left + 1] = <int32_t>parent
        self._size[left] = self._size[left + 1] = 1
        self._built[left] = self._built[left + 1] = 1
        return left

    cdef int _free_leaf(self, int64_t node) except -1 nogil:
        """Recycle the payload of leaf node (its node slot is freed with its
        pair)."""
        _push(&self._leaf_free, self._nodes[node].child)
        self._nodes[node].dim = FREE
        return 0

    cdef int _leaf_push(self, int64_t lf, int64_t box) except -1 nogil:
        """Append box to leaf payload lf with its filter keys."""
        cdef leaf_t* leaf = &self._leaves[lf]
        cdef int k, d = self.ndim
        cdef int64_t* key
        _push(&leaf.ids, box)
        _reserve(&leaf.keys, leaf.keys.n + 2 * FILTER_DIMS)
        key = &leaf.keys.data[leaf.keys.n]
        for k in range(FILTER_DIMS):
            key[2 * k] = self._lo[box * d + leaf.fdims[k]]
            key[2 * k + 1] = self._hi[box * d + leaf.fdims[k]]
        leaf.keys.n += 2 * FILTER_DIMS
        return 0

    cdef int _leaf_refilter(self, int64_t lf) except -1 nogil:
        """Pick as filter dimensions of leaf payload lf those in which most
        of its boxes differ from the first one, and recompute the keys."""
        cdef leaf_t* leaf = &self._leaves[lf]
        cdef int64_t count[MAX_NDIM]
        cdef int d = self.ndim, i, k, best
        cdef int64_t t, n = leaf.ids.n, b, b0
        cdef int64_t* key
        for i in range(d):
            count[i] = 0
        if n > 1:
            b0 = leaf.ids.data[0]
            for t in range(1, n):
                b = leaf.ids.data[t]
                for i in range(d):
                    count[i] += (self._lo[b * d + i] != self._lo[b0 * d + i]
                                 or self._hi[b * d + i] != self._hi[b0 * d + i])
        for k in range(FILTER_DIMS):
            # The k-th most varying dimension; ties go to later dimensions.
            best = -1
            for i in range(d - 1, -1, -1):
                if count[i] >= 0 and (best < 0 or count[i] > count[best]):
                    best = i
            if best < 0:  # fewer dimensions than filter slots: repeat
                best = leaf.fdims[k - d]
            else:
                count[best] = -1
            leaf.fdims[k] = best
        _reserve(&leaf.keys, 2 * FILTER_DIMS * n)
        for t in range(n):
            b = leaf.ids.data[t]
            key = &leaf.keys.data[2 * FILTER_DIMS * t]
            for k in range(FILTER_DIMS):
                key[2 * k] = self._lo[b * d + leaf.fdims[k]]
                key[2 * k + 1] = self._hi[b * d + leaf.fdims[k]]
        leaf.keys.n = 2 * FILTER_DIMS * n
        return 0

    cdef int _best_cut(self, const int64_t* ids, int64_t n, int* best_dim,
                       int64_t* best_m) except -1 nogil:
        """Rank the candidate cuts of the boxes ids[0:n]; return the larger
        side of the best one (n or more: no cut helps).

        Candidates are, in each dimension where the boxes differ, the medians
        of the boxes' low faces and of their high faces. A cut at m sends a
        box left if it starts below m and right if it ends at or above m. The
        best candidate minimises the larger side, then the total (the boxes
        listed on both sides).
        """
        cdef int d = self.ndim, dim, which
        cdef int64_t t, b, m, nl, nr, lo0, hi0
        cdef int64_t best = n, best_total = 2 * n + 1
        cdef bint same
        _reserve(&self._keys, n)
        for dim in range(d):
            lo0 = self._lo[ids[0] * d + dim]
            hi0 = self._hi[ids[0] * d + dim]
            same = True
            for t in range(1, n):
                b = ids[t]
                if self._lo[b * d + dim] != lo0 or self._hi[b * d + dim] != hi0:
                    same = False
                    break
            if same:
                continue  # every cut puts all boxes on one side or both
            for which in range(2):
                for t in range(n):
                    b = ids[t]
                    if which == 0:
                        self._keys.data[t] = self._lo[b * d + dim]
                    elif self._hi[b * d + dim] < INT64_MAX:
                        self._keys.data[t] = self._hi[b * d + dim] + 1
                    else:
                        self._keys.data[t] = INT64_MAX
                m = _select(self._keys.data, n, n // 2)
                nl = nr = 0
                for t in range(n):
                    b = ids[t]
                    nl += self._lo[b * d + dim] < m
                    nr += self._hi[b * d + dim] >= m
                if max(nl, nr) < best or (max(nl, nr) == best
                                          and nl + nr < best_total):
                    best, best_total = max(nl, nr), nl + nr
                    best_dim[0], best_m[0] = dim, m
        return best

    cdef int _split_leaf(self, int64_t node, bint refilter) except -1 nogil:
        """Cut an overfull leaf in two; return 1, or 0 if no cut helps.

        Large leaves (bulk loads, rebuilds) rank the cuts on an evenly spaced
        sample of SPLIT_SAMPLE boxes. With refilter false the children's
        screens are left stale, for the caller to recompute.
        """
        cdef int d = self.ndim, best_dim = -1
        cdef int64_t lf = self._nodes[node].child, n = self._leaves[lf].ids.n
        cdef int64_t t, w, nl = n, nr = n, left, rf, best_m = 0
        cdef int64_t* ids = self._leaves[lf].ids.data
        if n > 4 * SPLIT_SAMPLE:
            self._sample.n = 0
            for t in range(SPLIT_SAMPLE):
                _push(&self._sample, ids[t * n // SPLIT_SAMPLE])
            if self._best_cut(self._sample.data, SPLIT_SAMPLE, &best_dim,
                              &best_m) < SPLIT_SAMPLE:
                nl = nr = 0
                for t in range(n):
                    nl += self._lo[ids[t] * d + best_dim] < best_m
                    nr += self._hi[ids[t] * d + best_dim] >= best_m
        if max(nl, nr) >= n and self._best_cut(ids, n, &best_dim, &best_m) >= n:
            # Every candidate leaves one side as full as now: grow instead.
            self._leaves[lf].limit = 2 * n
            return 0
        left = self._new_pair(node)
        rf = self._new_leaf(left + 1)
        ids = self._leaves[lf].ids.data  # _leaves may have moved
        for t in range(n):
            if self._hi[ids[t] * d + best_dim] >= best_m:
                _push(&self._leaves[rf].ids, ids[t])
        # The left child keeps this leaf's payload, filtered in place.
        w = 0
        for t in range(n):
            if self._lo[ids[t] * d + best_dim] < best_m:
                ids[w] = ids[t]
                w += 1
        self._leaves[lf].ids.n = w
        self._leaves[lf].limit = LEAF_SIZE
        if refilter:
            self._leaf_refilter(lf)
            self._leaf_refilter(rf)
        self._nodes[left].dim = LEAF
        self._nodes[left].child = <int32_t>lf
        self._nodes[node].dim = best_dim
        self._nodes[node].split = best_m
        self._nodes[node].child = <int32_t>left
        return 1

    cdef int _after_split(self, int64_t node) except -1 nogil:
        """Count the new leaf on the path to the root; if the new leaves are
        deeper than log_{5/3}(leaves) + 2, rebuild the lowest ancestor that
        is out of balance (one child holds over 3/5 of its leaves) and has
        doubled since it was built, the scapegoat rule."""
        cdef int64_t a = node, depth = 0, c, big
        self._built[node] = 2
        while a >= 0:
            self._size[a] += 1
            depth += 1
            a = self._parent[a]
        if depth <= log(<double>self._size[0]) / log(5.0 / 3.0) + 2:
            return 0
        a = node
        while a >= 0:
            c = self._nodes[a].child
            big = max(self._size[c], self._size[c + 1])
            if 5 * big > 3 * self._size[a] and self._size[a] >= 2 * self._built[a]:
                return self._rebuild(a)
            a = self._parent[a]
        return 0

    cdef int _rebuild(self, int64_t node) except -1 nogil:
        """Rebuild the subtree at node from its boxes by median cuts."""
        cdef int64_t x, c, t, b, lf, old_size = self._size[node]
        cdef vec_t* ids
        self._rebuilds += 1
        # Gather the distinct ids below node and free everything below it.
        self._gather.n = 0
        self._epoch += 1
        self._stack.n = 0
        _push(&self._stack, node)
        while self._stack.n > 0:
            self._stack.n -= 1
            x = self._stack.data[self._stack.n]
            if self._nodes[x].dim == LEAF:
                ids = &self._leaves[self._nodes[x].child].ids
                for t in range(ids.n):
                    b = ids.data[t]
                    if self._stamp[b] != self._epoch:
                        self._stamp[b] = self._epoch
                        _push(&self._gather, b)
                self._free_leaf(x)
            else:
                c = self._nodes[x].child
                _push(&self._pair_free, c)
                _push(&self._stack, c)
                _push(&self._stack, c + 1)
        lf = self._new_leaf(node)
        for t in range(self._gather.n):
            _push(&self._leaves[lf].ids, self._gather.data[t])
        # Cut top-down; record the nodes in preorder in _gather.
        self._gather.n = 0
        _push(&self._stack, node)
        while self._stack.n > 0:
            self._stack.n -= 1
            x = self._stack.data[self._stack.n]
            _push(&self._gather, x)
            if (self._leaves[self._nodes[x].child].ids.n > LEAF_SIZE
                    and self._split_leaf(x, False)):
                c = self._nodes[x].child
                _push(&self._stack, c)
                _push(&self._stack, c + 1)
        # Children follow their parent in preorder: fill sizes backwards.
        for t in range(self._gather.n - 1, -1, -1):
            x = self._gather.data[t]
            if self._nodes[x].dim == LEAF:
                self._size[x] = 1
                self._leaf_refilter(self._nodes[x].child)
            else:
                c = self._nodes[x].child
                self._size[x] = self._size[c] + self._size[c + 1]
            self._built[x] = self._size[x]
        x = self._parent[node]
        while x >= 0:
            self._size[x] += self._size[node] - old_size
            x = self._parent[x]
        return 0

    cdef int _try_collapse(self, int64_t node) except -1 nogil:
        """Join leaf node with its sibling if together they hold at most
        LEAF_SIZE / 2 ids, and repeat upwards."""
        cdef int64_t parent, c, lf, rf, t, b, a
        cdef vec_t* rids
        while True:
            parent = self._parent[node]
            if parent < 0:
                return 0
            c = self._nodes[parent].child
            if self._nodes[c].dim != LEAF or self._nodes[c + 1].dim != LEAF:
                return 0
            lf = self._nodes[c].child
            rf = self._nodes[c + 1].child
            if self._leaves[lf].ids.n + self._leaves[rf].ids.n > LEAF_SIZE // 2:
                return 0
            # The parent takes over the left list plus the right one's ids
            # not already in it (boxes crossing the cut are in both).
            self._epoch += 1
            for t in range(self._leaves[lf].ids.n):
                self._stamp[self._leaves[lf].ids.data[t]] = self._epoch
            rids = &self._leaves[rf].ids
            for t in range(rids.n):
                b = rids.data[t]
                if self._stamp[b] != self._epoch:
                    _push(&self._leaves[lf].ids, b)
            self._free_leaf(c + 1)
            self._nodes[c].dim = FREE
            _push(&self._pair_free, c)
            self._nodes[parent].dim = LEAF
            self._nodes[parent].child = <int32_t>lf
            self._leaves[lf].limit = LEAF_SIZE
            self._leaf_refilter(lf)
            self._built[parent] = 1
            a = parent
            while a >= 0:
                self._size[a] -= 1
                a = self._parent[a]
            node = parent

    cdef int _walk(self, const int64_t* lo, const int64_t* hi) except -1 nogil:
        """Set _touched to the leaves whose region meets the box [lo, hi]."""
        cdef int64_t x
        cdef const node_t* nd
        self._touched.n = 0
        self._stack.n = 0
        _push(&self._stack, 0)
        while self._stack.n > 0:
            self._stack.n -= 1
            x = self._stack.data[self._stack.n]
            nd = &self._nodes[x]
            if nd.dim == LEAF:
                _push(&self._touched, x)
                continue
            if hi[nd.dim] >= nd.split:
                _push(&self._stack, nd.child + 1)
            if lo[nd.dim] < nd.split:
                _push(&self._stack, nd.child)
        return 0

    cdef int _register(self, int64_t box) except -1 nogil:
        cdef int64_t t, x, lf
        self._walk(&self._lo[box * self.ndim], &self._hi[box * self.ndim])
        for t in range(self._touched.n):
            self._leaf_push(self._nodes[self._touched.data[t]].child, box)
        t = 0
        while t < self._touched.n:
            x = self._touched.data[t]
            t += 1
            if self._nodes[x].dim != LEAF:
                continue  # split or rebuilt earlier in this loop
            lf = self._nodes[x].child
            if (self._leaves[lf].ids.n > self._leaves[lf].limit
                    and self._split_leaf(x, True)):
                # The halves may still be overfull: check them in turn.
                _push(&self._touched, self._nodes[x].child)
                _push(&self._touched, self._nodes[x].child + 1)
                self._after_split(x)
        return 0

    cdef int _unregister(self, int64_t box) except -1 nogil:
        cdef int64_t t, u, x
        cdef leaf_t* leaf
        self._walk(&self._lo[box * self.ndim], &self._hi[box * self.ndim])
        for t in range(self._touched.n):
            leaf = &self._leaves[self._nodes[self._touched.data[t]].child]
            for u in range(leaf.ids.n):
                if leaf.ids.data[u] == box:
                    # Swap-remove the id and its keys.
                    leaf.ids.n -= 1
                    leaf.ids.data[u] = leaf.ids.data[leaf.ids.n]
                    leaf.keys.n -= 2 * FILTER_DIMS
                    memcpy(&leaf.keys.data[2 * FILTER_DIMS * u],
                           &leaf.keys.data[leaf.keys.n],
                           2 * FILTER_DIMS * sizeof(int64_t))
                    break
        for t in range(self._touched.n):
            x = self._touched.data[t]
            if self._nodes[x].dim == LEAF:  # not freed by a collapse
                self._try_collapse(x)
        return 0

    # ---- boxes ---------------------------------------------------------

    cdef int _reserve_boxes(self, int64_t n) except -1 nogil:
        """Make room for box ids 0..n-1."""
        cdef int64_t cap = self._cap if self._cap else 16
        while cap < n:
            cap *= 2
        if cap == self._cap:
            return 0
        _grow(<void**>&self._lo, cap * self.ndim * sizeof(int64_t))
        _grow(<void**>&self._hi, cap * self.ndim * sizeof(int64_t))
        _grow(<void**>&self._val, cap * self.nvalues * sizeof(int64_t))
        _grow(<void**>&self._alive, cap * sizeof(char))
        _grow(<void**>&self._stamp, cap * sizeof(int64_t))
        self._cap = cap
        return 0

    cdef int64_t _insert(self, const int64_t* lo, const int64_t* hi,
                         const int64_t* val) except -1 nogil:
        """Store a box (assumed disjoint from all others) and return its id."""
        cdef int64_t box
        if self._free.n > 0:
            self._free.n -= 1
            box = self._free.data[self._free.n]
        else:
            self._reserve_boxes(self._nslots + 1)
            box = self._nslots
            self._nslots += 1
        memcpy(&self._lo[box * self.ndim], lo, self.ndim * sizeof(int64_t))
        memcpy(&self._hi[box * self.ndim], hi, self.ndim * sizeof(int64_t))
        memcpy(&self._val[box * self.nvalues], val,
               self.nvalues * sizeof(int64_t))
        self._alive[box] = 1
        self._stamp[box] = 0
        self._nalive += 1
        self._register(box)
        return box

    cdef int _remove(self, int64_t box) except -1 nogil:
        self._unregister(box)
        self._alive[box] = 0
        self._nalive -= 1
        _push(&self._free, box)
        return 0

    cdef int64_t _locate(self, const int64_t* point) noexcept nogil:
        """Id of the box containing point, or -1."""
        cdef int d = self.ndim, i
        cdef const node_t* nd = self._nodes
        cdef const leaf_t* lf
        cdef int64_t t, b, q0, q1, q2, q3
        cdef const int64_t* key
        cdef const int64_t* lo
        cdef const int64_t* hi
        while nd.dim >= 0:
            nd = &self._nodes[nd.child + (point[nd.dim] >= nd.split)]
        lf = &self._leaves[nd.child]
        # Screen the leaf's boxes on its filter dimensions, whose bounds sit
        # next to each other in lf.keys; check survivors in full.
        q0 = point[lf.fdims[0]]
        q1 = point[lf.fdims[1]]
        q2 = point[lf.fdims[2]]
        q3 = point[lf.fdims[3]]
        key = lf.keys.data
        for t in range(lf.ids.n):
            if (key[0] <= q0 <= key[1] and key[2] <= q1 <= key[3]
                    and key[4] <= q2 <= key[5] and key[6] <= q3 <= key[7]):
                b = lf.ids.data[t]
                lo = &self._lo[b * d]
                hi = &self._hi[b * d]
                for i in range(d):
                    if point[i] < lo[i] or point[i] > hi[i]:
                        break
                else:
                    return b
            key += 2 * FILTER_DIMS
        return -1

    cdef int _collect_overlaps(self, const int64_t* lo,
                               const int64_t* hi) except -1 nogil:
        """Set _hits to the ids of all boxes that intersect [lo, hi]."""
        cdef int d = self.ndim, i
        cdef int64_t t, u, b
        cdef const vec_t* ids
        cdef bint hit
        self._hits.n = 0
        self._epoch += 1
        self._walk(lo, hi)
        for t in range(self._touched.n):
            ids = &self._leaves[self._nodes[self._touched.data[t]].child].ids
            for u in range(ids.n):
                b = ids.data[u]
                if self._stamp[b] == self._epoch:
                    continue
                self._stamp[b] = self._epoch
                hit = True
                for i in range(d):
                    if self._lo[b * d + i] > hi[i] or self._hi[b * d + i] < lo[i]:
                        hit = False
                        break
                if hit:
                    _push(&self._hits, b)
        return 0

    cdef int _merge_from(self, int64_t box) except -1 nogil:
        """Merge box with face-adjacent equal-valued neighbours until none is
        left. A neighbour across a face of box contains the point just past
        that face at box's low corner, so one point query finds it."""
        cdef int64_t p[MAX_NDIM]
        cdef int64_t ulo[MAX_NDIM]
        cdef int64_t uhi[MAX_NDIM]
        cdef int64_t uval[MAX_NVALUES]
        cdef int d = self.ndim, k = self.nvalues, j, side, i
        cdef int64_t m
        cdef bint merged = True
        while merged:
            merged = False
            for j in range(d):
                if not (self.merge_dims >> j) & 1:
                    continue
                for side in range(2):
                    memcpy(p, &self._lo[box * d], d * sizeof(int64_t))
                    if side == 0:
                        if p[j] == 0:
                            continue
                        p[j] -= 1
                    else:
                        if self._hi[box * d + j] == INT64_MAX:
                            continue
                        p[j] = self._hi[box * d + j] + 1
                    m = self._locate(p)
                    if m < 0 or not _same_row(&self._val[m * k],
                                              &self._val[box * k], k):
                        continue
                    for i in range(d):
                        if i != j and (self._lo[m * d + i] != self._lo[box * d + i]
                                       or self._hi[m * d + i] != self._hi[box * d + i]):
                            break
                    else:
                        # Disjointness makes m's extent in j end (or start)
                        # right at box's face, so the union is a box.
                        memcpy(ulo, &self._lo[box * d], d * sizeof(int64_t))
                        memcpy(uhi, &self._hi[box * d], d * sizeof(int64_t))
                        memcpy(uval, &self._val[box * k], k * sizeof(int64_t))
                        ulo[j] = min(ulo[j], self._lo[m * d + j])
                        uhi[j] = max(uhi[j], self._hi[m * d + j])
                        self._remove(m)
                        self._remove(box)
                        box = self._insert(ulo, uhi, uval)
                        merged = True
                        break
                if merged:
                    break
        return 0

    cdef int _put(self, const int64_t* lo, const int64_t* hi,
                  const int64_t* val) except -1 nogil:
        cdef int64_t elo[MAX_NDIM]
        cdef int64_t ehi[MAX_NDIM]
        cdef int64_t ev[MAX_NVALUES]
        cdef int64_t rlo[MAX_NDIM]
        cdef int64_t rhi[MAX_NDIM]
        cdef int d = self.ndim, k = self.nvalues, i
        cdef int64_t h, e, b
        self._collect_overlaps(lo, hi)
        if self._hits.n == 1:
            # Re-putting a value already stored over the whole box is a no-op.
            e = self._hits.data[0]
            if _same_row(&self._val[e * k], val, k):
                for i in range(d):
                    if self._lo[e * d + i] > lo[i] or self._hi[e * d + i] < hi[i]:
                        break
                else:
                    return 0
        self._work.n = 0
        for h in range(self._hits.n):
            # Carve [lo, hi] out of box e: peel off the part below and above
            # the new box in each dimension in turn, each peeled slab clipped
            # to the new box in the dimensions already handled.
            e = self._hits.data[h]
            memcpy(elo, &self._lo[e * d], d * sizeof(int64_t))
            memcpy(ehi, &self._hi[e * d], d * sizeof(int64_t))
            memcpy(ev, &self._val[e * k], k * sizeof(int64_t))
            self._remove(e)
            for i in range(d):
                if elo[i] < lo[i]:
                    memcpy(rlo, elo, d * sizeof(int64_t))
                    memcpy(rhi, ehi, d * sizeof(int64_t))
                    rhi[i] = lo[i] - 1
                    _push(&self._work, self._insert(rlo, rhi, ev))
                    elo[i] = lo[i]
                if ehi[i] > hi[i]:
                    memcpy(rlo, elo, d * sizeof(int64_t))
                    memcpy(rhi, ehi, d * sizeof(int64_t))
                    rlo[i] = hi[i] + 1
                    _push(&self._work, self._insert(rlo, rhi, ev))
                    ehi[i] = hi[i]
        _push(&self._work, self._insert(lo, hi, val))
        # Newest first, so the new box merges before the remainders around it.
        while self._work.n > 0:
            self._work.n -= 1
            b = self._work.data[self._work.n]
            # A stale id is either free (skip it) or reused by a box made by
            # a merge, which is as good a merge candidate as any.
            if self._alive[b]:
                self._merge_from(b)
        return 0

    # ---- Python API ----------------------------------------------------

    def put(self, lo, hi, value):
        """Map every point x with lo <= x <= hi (componentwise) to value.

        Overwrites earlier values in the overlap, then merges the new box and
        the remainders of the boxes it cut with equal-valued neighbours.
        Raises ValueError if lo has a negative entry or lo > hi anywhere.
        """
        cdef int64_t clo[MAX_NDIM]
        cdef int64_t chi[MAX_NDIM]
        cdef int64_t cval[MAX_NVALUES]
        cdef int i
        _read_row(lo, clo, self.ndim, "lo")
        _read_row(hi, chi, self.ndim, "hi")
        _read_row(value, cval, self.nvalues, "value")
        for i in range(self.ndim):
            if clo[i] < 0:
                raise ValueError(f"lo[{i}] = {clo[i]} is negative")
            if clo[i] > chi[i]:
                raise ValueError(f"lo[{i}] = {clo[i]} > hi[{i}] = {chi[i]}")
        self._put(clo, chi, cval)

    def get(self, point):
        """The value at point as a tuple of ints, or None if it has none."""
        cdef int64_t p[MAX_NDIM]
        cdef int64_t b
        cdef int i
        _read_row(point, p, self.ndim, "point")
        for i in range(self.ndim):
            if p[i] < 0:
                return None
        b = self._locate(p)
        if b < 0:
            return None
        return tuple([self._val[b * self.nvalues + i]
                      for i in range(self.nvalues)])

    def get_many(self, points):
        """Look up each row of an (n, ndim) integer array.

        Returns (values, found): an (n, nvalues) int64 array, zero where not
        found, and an (n,) bool array.
        """
        cdef cnp.ndarray pts = _as_rows(points, self.ndim, "points")
        cdef Py_ssize_t n = pts.shape[0], r
        values = np.zeros((n, self.nvalues), dtype=np.int64)
        found = np.zeros(n, dtype=np.bool_)
        cdef const int64_t[:, ::1] P = pts
        cdef int64_t[:, ::1] V = values
        cdef uint8_t[::1] F = found.view(np.uint8)
        cdef int64_t b
        cdef int i, d = self.ndim, k = self.nvalues
        # The GIL stays held: a put from another thread must not interleave.
        for r in range(n):
            for i in range(d):
                if P[r, i] < 0:
                    break
            else:
                b = self._locate(&P[r, 0])
                if b >= 0:
                    F[r] = 1
                    memcpy(&V[r, 0], &self._val[b * k], k * sizeof(int64_t))
        return values, found

    def __len__(self):
        return self._nalive

    def nbytes(self):
        """Bytes this table holds in C buffers (boxes, index, scratch): for cache budgets."""
        cdef int64_t i, n = self._cap * ((2 * self.ndim + self.nvalues) * 8 + 9)
        n += self._nodes_cap * (sizeof(node_t) + sizeof(int32_t) + 2 * sizeof(int64_t))
        n += self._leaves_cap * sizeof(leaf_t)
        for i in range(self._nleaves):
            n += (self._leaves[i].ids.cap + self._leaves[i].keys.cap) * sizeof(int64_t)
        for v in (self._free.cap, self._stack.cap, self._touched.cap, self._hits.cap,
                  self._work.cap, self._keys.cap, self._gather.cap, self._sample.cap,
                  self._pair_free.cap, self._leaf_free.cap):
            n += v * sizeof(int64_t)
        return n + 256

    def covered(self):
        """The number of points with a value (the boxes' total volume)."""
        cdef int64_t total = 0, vol, w, b
        cdef int i, d = self.ndim
        for b in range(self._nslots):
            if not self._alive[b]:
                continue
            vol = 1
            for i in range(d):
                w = self._hi[b * d + i] - self._lo[b * d + i]
                if w == INT64_MAX or vol > INT64_MAX // (w + 1):
                    return self._covered_exact()
                vol *= w + 1
            if total > INT64_MAX - vol:
                return self._covered_exact()
            total += vol
        return total

    def _covered_exact(self):
        """covered() in Python integers, for volumes beyond int64."""
        lo, hi, _ = self.to_arrays()
        total = 0
        for a, b in zip(lo.tolist(), hi.tolist()):
            vol = 1
            for x, y in zip(a, b):
                vol *= y - x + 1
            total += vol
        return total

    def to_arrays(self):
        """(lo, hi, values) arrays of shape (n, ndim), (n, ndim), (n, nvalues)
        holding the stored boxes, sorted lexicographically by lo."""
        cdef int64_t n = self._nalive, b, r = 0
        cdef int d = self.ndim, k = self.nvalues
        lo = np.empty((n, d), dtype=np.int64)
        hi = np.empty((n, d), dtype=np.int64)
        values = np.empty((n, k), dtype=np.int64)
        cdef int64_t[:, ::1] L = lo
        cdef int64_t[:, ::1] H = hi
        cdef int64_t[:, ::1] V = values
        for b in range(self._nslots):
            if not self._alive[b]:
                continue
            memcpy(&L[r, 0], &self._lo[b * d], d * sizeof(int64_t))
            memcpy(&H[r, 0], &self._hi[b * d], d * sizeof(int64_t))
            memcpy(&V[r, 0], &self._val[b * k], k * sizeof(int64_t))
            r += 1
        # Boxes are disjoint, so their low corners are distinct sort keys.
        order = np.lexsort(lo.T[::-1])
        return lo[order], hi[order], values[order]

    def boxes(self):
        """All stored boxes as (lo, hi, value) tuples, sorted by lo."""
        lo, hi, values = self.to_arrays()
        return [(tuple(a), tuple(b), tuple(v))
                for a, b, v in zip(lo.tolist(), hi.tolist(), values.tolist())]

    @classmethod
    def from_arrays(cls, lo, hi, values):
        """Rebuild a table from to_arrays() output, keeping the boxes as given.

        The index is built in one pass of median cuts. Raises ValueError if
        shapes disagree, a box is empty or negative, or two boxes overlap.
        """
        lo = np.asarray(lo)
        values = np.asarray(values)
        if lo.ndim != 2 or values.ndim != 2:
            raise ValueError("lo and values must be 2-D arrays")
        cdef MemoTable table = cls(lo.shape[1], values.shape[1])
        cdef int d = table.ndim, k = table.nvalues
        cdef cnp.ndarray alo = _as_rows(lo, d, "lo")
        cdef cnp.ndarray ahi = _as_rows(hi, d, "hi")
        cdef cnp.ndarray aval = _as_rows(values, k, "values")
        if not alo.shape[0] == ahi.shape[0] == aval.shape[0]:
            raise ValueError(
                f"lo, hi and values have {alo.shape[0]}, {ahi.shape[0]} "
                f"and {aval.shape[0]} rows")
        if alo.shape[0] and ((alo < 0).any() or (alo > ahi).any()):
            raise ValueError("every box needs 0 <= lo <= hi")
        cdef const int64_t[:, ::1] L = alo
        cdef const int64_t[:, ::1] H = ahi
        cdef const int64_t[:, ::1] V = aval
        cdef int64_t n = alo.shape[0], b = 0
        with nogil:  # safe: no other thread can see the new table yet
            table._reserve_boxes(n)
            table._nslots = table._nalive = n
            if n:
                memcpy(table._lo, &L[0, 0], n * d * sizeof(int64_t))
                memcpy(table._hi, &H[0, 0], n * d * sizeof(int64_t))
                memcpy(table._val, &V[0, 0], n * k * sizeof(int64_t))
            for b in range(n):
                table._alive[b] = 1
                table._stamp[b] = 0
                _push(&table._leaves[table._nodes[0].child].ids, b)
            table._rebuild(0)
            for b in range(n):
                table._collect_overlaps(&L[b, 0], &H[b, 0])
                if table._hits.n != 1:
                    break
        if n and table._hits.n != 1:
            raise ValueError(f"box {b} overlaps another box")
        return table

    def _tree_stats(self):
        """Shape of the index, for tuning: a dict of counts and depths."""
        cdef int64_t x
        leaves = ids = max_leaf = max_depth = depth_sum = 0
        stack = [(0, 0)]
        while stack:
            x, depth = stack.pop()
            if self._nodes[x].dim == LEAF:
                n = self._leaves[self._nodes[x].child].ids.n
                leaves += 1
                ids += n
                max_leaf = max(max_leaf, n)
                max_depth = max(max_depth, depth)
                depth_sum += depth
            else:
                stack.append((self._nodes[x].child, depth + 1))
                stack.append((self._nodes[x].child + 1, depth + 1))
        return {"leaves": leaves, "ids_in_leaves": ids, "boxes": self._nalive,
                "max_leaf": max_leaf, "max_depth": max_depth,
                "mean_depth": depth_sum / leaves, "rebuilds": self._rebuilds}

    def __reduce__(self):
        return (MemoTable.from_arrays, self.to_arrays())

    def __repr__(self):
        return (f"MemoTable(ndim={self.ndim}, nvalues={self.nvalues}, "
                f"boxes={self._nalive}, covered={self.covered()})")
