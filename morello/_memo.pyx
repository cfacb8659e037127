# cython: language_level=3
"""The compressed memo table: disjoint boxes of Z>=0^ndim mapped to int64 rows.

The DP stores each solved Spec as a box: a single point in the Spec's own
coordinates times a range [peak, limit] in the memory coordinates, since one
solution is optimal for every limit between its peak and the limit it was
solved at. Neighbouring boxes with identical values are merged, which is what
keeps the table small.

Invariants kept by every public method:

* stored boxes are pairwise disjoint (a later put overwrites the overlap);
* after ``put``, no two stored boxes are *face-mergeable*: equal values, equal
  extents in all dimensions but one, and adjacent in that one. (Boxes loaded
  by ``from_arrays`` are kept as given.)

Index: a bucket k-d tree over space. Each internal node cuts its region by an
axis-aligned hyperplane x[dim] = split; each leaf lists the ids of every box
meeting its region, so a box crossing a cut is listed on both sides (as in an
R+-tree) and a point query descends one path and scans one leaf. A leaf with
more than LEAF_SIZE ids is cut at the median box boundary of the dimension
that best balances it; if no cut helps, its limit doubles instead. Two sibling
leaves that shrink to LEAF_SIZE / 2 ids together are joined again.
"""
cimport cython
from cpython.number cimport PyNumber_Index
from libc.stdint cimport INT64_MAX, int64_t, uint8_t
from libc.stdlib cimport free, qsort, realloc
from libc.string cimport memcpy, memset

import numpy as np

cimport numpy as cnp

cnp.import_array()


# Growth helper: every allocation in this module goes through here so that a
# failure raises MemoryError instead of crashing (sklearn's safe_realloc).
cdef int _grow(void** p, size_t nbytes) except -1 nogil:
    cdef void* q = realloc(p[0], nbytes if nbytes > 0 else 1)
    if q == NULL:
        with gil:
            raise MemoryError(f"could not allocate {nbytes} bytes")
    p[0] = q
    return 0


cdef int _push(vec_t* v, int64_t x) except -1 nogil:
    cdef int64_t cap
    if v.n == v.cap:
        cap = 2 * v.cap if v.cap else 8
        _grow(<void**>&v.data, cap * sizeof(int64_t))
        v.cap = cap
    v.data[v.n] = x
    v.n += 1
    return 0


cdef int _cmp_int64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*>a)[0], y = (<const int64_t*>b)[0]
    return (x > y) - (x < y)


cdef inline bint _same_row(const int64_t* a, const int64_t* b,
                           int n) noexcept nogil:
    cdef int i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


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
        self._new_leaf(-1)  # the root, node 0

    def __init__(self, int ndim, int nvalues):
        pass

    def __dealloc__(self):
        cdef int64_t i
        if self._nodes != NULL:
            for i in range(self._nnodes):
                free(self._nodes[i].ids.data)
        free(self._nodes)
        free(self._node_free.data)
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

    # ---- the k-d tree --------------------------------------------------

    cdef int64_t _new_leaf(self, int64_t parent) except -1 nogil:
        cdef int64_t node, cap
        if self._node_free.n > 0:
            self._node_free.n -= 1
            node = self._node_free.data[self._node_free.n]
        else:
            if self._nnodes == self._nodes_cap:
                cap = 2 * self._nodes_cap if self._nodes_cap else 16
                _grow(<void**>&self._nodes, cap * sizeof(node_t))
                self._nodes_cap = cap
            node = self._nnodes
            self._nnodes += 1
        memset(&self._nodes[node], 0, sizeof(node_t))
        self._nodes[node].dim = LEAF
        self._nodes[node].parent = parent
        self._nodes[node].limit = LEAF_SIZE
        return node

    cdef int _split_leaf(self, int64_t node) except -1 nogil:
        """Cut an overfull leaf in two; return 1, or 0 if no cut helps.

        Candidate cuts are, in each dimension, the medians of the boxes' low
        faces and of their high faces. A cut sends a box left if it starts
        below the cut and right if it ends at or above it. The best candidate
        minimises the larger side, then the total (duplication).
        """
        cdef int d = self.ndim, dim, which
        cdef int64_t n = self._nodes[node].ids.n, t, b, m, nl, nr
        cdef int64_t best = n, best_total = 2 * n + 1, best_m = 0
        cdef int best_dim = -1
        cdef int64_t left, right
        cdef const int64_t* ids
        self._keys.n = 0
        for t in range(n):
            _push(&self._keys, 0)
        ids = self._nodes[node].ids.data
        for dim in range(d):
            for which in range(2):
                for t in range(n):
                    b = ids[t]
                    if which == 0:
                        self._keys.data[t] = self._lo[b * d + dim]
                    elif self._hi[b * d + dim] < INT64_MAX:
                        self._keys.data[t] = self._hi[b * d + dim] + 1
                    else:
                        self._keys.data[t] = INT64_MAX
                qsort(self._keys.data, n, sizeof(int64_t), _cmp_int64)
                m = self._keys.data[n // 2]
                nl = nr = 0
                for t in range(n):
                    b = ids[t]
                    nl += self._lo[b * d + dim] < m
                    nr += self._hi[b * d + dim] >= m
                if max(nl, nr) < best or (max(nl, nr) == best
                                          and nl + nr < best_total):
                    best, best_total = max(nl, nr), nl + nr
                    best_dim, best_m = dim, m
        if best >= n:
            # Every candidate leaves one side as full as now: grow instead.
            self._nodes[node].limit = 2 * n
            return 0
        left = self._new_leaf(node)
        right = self._new_leaf(node)
        ids = self._nodes[node].ids.data  # _nodes may have moved
        for t in range(n):
            b = ids[t]
            if self._lo[b * d + best_dim] < best_m:
                _push(&self._nodes[left].ids, b)
            if self._hi[b * d + best_dim] >= best_m:
                _push(&self._nodes[right].ids, b)
        free(self._nodes[node].ids.data)
        self._nodes[node].ids.data = NULL
        self._nodes[node].ids.n = self._nodes[node].ids.cap = 0
        self._nodes[node].dim = best_dim
        self._nodes[node].split = best_m
        self._nodes[node].left = left
        self._nodes[node].right = right
        return 1

    cdef int _try_collapse(self, int64_t node) except -1 nogil:
        """Join leaf node with its sibling if together they hold at most
        LEAF_SIZE / 2 ids, and repeat upwards."""
        cdef int64_t parent, left, right, t, b
        while True:
            parent = self._nodes[node].parent
            if parent < 0:
                return 0
            left = self._nodes[parent].left
            right = self._nodes[parent].right
            if (self._nodes[left].dim != LEAF or self._nodes[right].dim != LEAF
                    or self._nodes[left].ids.n + self._nodes[right].ids.n
                    > LEAF_SIZE // 2):
                return 0
            # The parent takes over the left list plus the right one's ids
            # not already in it (boxes crossing the cut are in both).
            self._epoch += 1
            for t in range(self._nodes[left].ids.n):
                self._stamp[self._nodes[left].ids.data[t]] = self._epoch
            for t in range(self._nodes[right].ids.n):
                b = self._nodes[right].ids.data[t]
                if self._stamp[b] != self._epoch:
                    _push(&self._nodes[left].ids, b)
            self._nodes[parent].ids = self._nodes[left].ids
            self._nodes[parent].dim = LEAF
            self._nodes[parent].limit = LEAF_SIZE
            free(self._nodes[right].ids.data)
            memset(&self._nodes[left].ids, 0, sizeof(vec_t))
            memset(&self._nodes[right].ids, 0, sizeof(vec_t))
            self._nodes[left].dim = self._nodes[right].dim = FREE
            _push(&self._node_free, left)
            _push(&self._node_free, right)
            node = parent

    cdef int _walk(self, const int64_t* lo, const int64_t* hi) except -1 nogil:
        """Set _touched to the leaves whose region meets the box [lo, hi]."""
        cdef int64_t node
        cdef node_t* nd
        self._touched.n = 0
        self._stack.n = 0
        _push(&self._stack, 0)
        while self._stack.n > 0:
            self._stack.n -= 1
            node = self._stack.data[self._stack.n]
            nd = &self._nodes[node]
            if nd.dim == LEAF:
                _push(&self._touched, node)
                continue
            if hi[nd.dim] >= nd.split:
                _push(&self._stack, nd.right)
            if lo[nd.dim] < nd.split:
                _push(&self._stack, nd.left)
        return 0

    cdef int _register(self, int64_t box) except -1 nogil:
        cdef int64_t t, leaf
        self._walk(&self._lo[box * self.ndim], &self._hi[box * self.ndim])
        for t in range(self._touched.n):
            _push(&self._nodes[self._touched.data[t]].ids, box)
        t = 0
        while t < self._touched.n:
            leaf = self._touched.data[t]
            t += 1
            if (self._nodes[leaf].ids.n > self._nodes[leaf].limit
                    and self._split_leaf(leaf)):
                # The halves may still be overfull: check them in turn.
                _push(&self._touched, self._nodes[leaf].left)
                _push(&self._touched, self._nodes[leaf].right)
        return 0

    cdef int _unregister(self, int64_t box) except -1 nogil:
        cdef int64_t t, u, leaf
        cdef vec_t* ids
        self._walk(&self._lo[box * self.ndim], &self._hi[box * self.ndim])
        for t in range(self._touched.n):
            ids = &self._nodes[self._touched.data[t]].ids
            for u in range(ids.n):
                if ids.data[u] == box:
                    ids.n -= 1
                    ids.data[u] = ids.data[ids.n]
                    break
        for t in range(self._touched.n):
            leaf = self._touched.data[t]
            if self._nodes[leaf].dim == LEAF:  # not freed by a collapse
                self._try_collapse(leaf)
        return 0

    # ---- boxes ---------------------------------------------------------

    cdef int _reserve_box(self) except -1 nogil:
        cdef int64_t cap
        if self._nslots < self._cap:
            return 0
        cap = 2 * self._cap if self._cap else 16
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
            self._reserve_box()
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
        cdef const node_t* nd = &self._nodes[0]
        cdef int64_t t, b
        cdef const int64_t* lo
        cdef const int64_t* hi
        while nd.dim != LEAF:
            nd = &self._nodes[nd.left if point[nd.dim] < nd.split else nd.right]
        for t in range(nd.ids.n):
            b = nd.ids.data[t]
            lo = &self._lo[b * d]
            hi = &self._hi[b * d]
            for i in range(d):
                if point[i] < lo[i] or point[i] > hi[i]:
                    break
            else:
                return b
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
            ids = &self._nodes[self._touched.data[t]].ids
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
        with nogil:
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
        with nogil:
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

        Raises ValueError if shapes disagree, a box is empty or negative, or
        two boxes overlap.
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
        cdef Py_ssize_t r
        for r in range(alo.shape[0]):
            table._collect_overlaps(&L[r, 0], &H[r, 0])
            if table._hits.n:
                raise ValueError(f"box {r} overlaps an earlier box")
            table._insert(&L[r, 0], &H[r, 0], &V[r, 0])
        return table

    def _tree_stats(self):
        """Shape of the index, for tuning: a dict of counts and depths."""
        cdef int64_t node
        leaves = ids = max_leaf = max_depth = 0
        depth_sum = 0
        stack = [(0, 0)]
        while stack:
            node, depth = stack.pop()
            if self._nodes[node].dim == LEAF:
                leaves += 1
                ids += self._nodes[node].ids.n
                max_leaf = max(max_leaf, self._nodes[node].ids.n)
                max_depth = max(max_depth, depth)
                depth_sum += depth
            else:
                stack.append((self._nodes[node].left, depth + 1))
                stack.append((self._nodes[node].right, depth + 1))
        return {"nodes": self._nnodes - self._node_free.n, "leaves": leaves,
                "ids_in_leaves": ids, "boxes": self._nalive,
                "max_leaf": max_leaf, "max_depth": max_depth,
                "mean_depth": depth_sum / leaves}

    def __reduce__(self):
        return (MemoTable.from_arrays, self.to_arrays())

    def __repr__(self):
        return (f"MemoTable(ndim={self.ndim}, nvalues={self.nvalues}, "
                f"boxes={self._nalive}, covered={self.covered()})")
