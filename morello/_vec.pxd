# Shared C containers of the compiled core (after scikit-learn's tree/_utils.pxd):
# growable int64 vectors and an open-addressing map from fixed-width int64 keys.
# Everything is ``cdef inline`` so that each module that cimports this header gets its
# own copy and no module depends on another at run time. Every allocation goes through
# ``_grow``, which raises MemoryError instead of crashing.
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset


cdef struct vec_t:       # growable array of int64
    int64_t* data        # malloc'd storage, or NULL
    int64_t n            # used length
    int64_t cap          # allocated length


cdef struct map_t:       # open addressing: fixed-width int64 keys -> int64 values
    int64_t width        # key width
    vec_t keys           # width ints per entry
    vec_t vals           # one value per entry
    vec_t slots          # entry index + 1, 0 = empty; size is a power of two


cdef inline int _grow(void** p, size_t nbytes) except -1 nogil:
    cdef void* q = realloc(p[0], nbytes if nbytes > 0 else 1)
    if q == NULL:
        with gil:
            raise MemoryError(f"could not allocate {nbytes} bytes")
    p[0] = q
    return 0


cdef inline int _reserve(vec_t* v, int64_t n) except -1 nogil:
    """Make room for n entries in v."""
    cdef int64_t cap = v.cap if v.cap else 8
    while cap < n:
        cap *= 2
    if cap != v.cap:
        _grow(<void**>&v.data, cap * sizeof(int64_t))
        v.cap = cap
    return 0


cdef inline int _push(vec_t* v, int64_t x) except -1 nogil:
    cdef int64_t cap
    if v.n == v.cap:
        cap = 2 * v.cap if v.cap else 8
        _grow(<void**>&v.data, cap * sizeof(int64_t))
        v.cap = cap
    v.data[v.n] = x
    v.n += 1
    return 0


cdef inline int _fill(vec_t* v, int64_t n, int64_t x) except -1 nogil:
    """Make ``v`` hold ``n`` copies of ``x``."""
    cdef int64_t i
    _reserve(v, n)
    v.n = n
    for i in range(n):
        v.data[i] = x
    return 0


cdef inline void _vec_free(vec_t* v) noexcept nogil:
    free(v.data)
    v.data = NULL
    v.n = v.cap = 0


cdef inline bint _same_row(const int64_t* a, const int64_t* b, int64_t n) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


cdef inline uint64_t _hash_key(const int64_t* k, int64_t w) noexcept nogil:
    cdef uint64_t h = 1469598103934665603ULL
    cdef int64_t i
    for i in range(w):
        h = (h ^ <uint64_t>k[i]) * 1099511628211ULL
        h ^= h >> 32
    return h


cdef inline int64_t _map_get(const map_t* m, const int64_t* key) noexcept nogil:
    """The value of ``key``, or -1."""
    cdef int64_t mask, pos, e
    if m.slots.n == 0:
        return -1
    mask = m.slots.n - 1
    pos = <int64_t>(_hash_key(key, m.width) & <uint64_t>mask)
    while True:
        e = m.slots.data[pos]
        if e == 0:
            return -1
        e -= 1
        if _same_row(m.keys.data + e * m.width, key, m.width):
            return m.vals.data[e]
        pos = (pos + 1) & mask


cdef inline void _slot_insert(map_t* m, int64_t e) noexcept nogil:
    cdef int64_t mask = m.slots.n - 1
    cdef int64_t pos = <int64_t>(_hash_key(m.keys.data + e * m.width, m.width)
                                 & <uint64_t>mask)
    while m.slots.data[pos] != 0:
        pos = (pos + 1) & mask
    m.slots.data[pos] = e + 1


cdef inline int _map_put(map_t* m, const int64_t* key, int64_t val) except -1 nogil:
    """Insert a key known to be absent. ``key`` must not point into ``m``."""
    cdef int64_t i, n = m.vals.n, e
    if (n + 1) * 2 > m.slots.n:
        _fill(&m.slots, max(<int64_t>1024, m.slots.n * 2), 0)
        for e in range(n):
            _slot_insert(m, e)
    for i in range(m.width):
        _push(&m.keys, key[i])
    _push(&m.vals, val)
    _slot_insert(m, n)
    return 0


cdef inline void _map_free(map_t* m) noexcept nogil:
    _vec_free(&m.keys)
    _vec_free(&m.vals)
    _vec_free(&m.slots)


cdef inline int _sort_pairs(uint64_t* pairs, int64_t n) except -1 nogil:
    """Sort ``n`` pairs ``(key, index)`` by key, stably: when the input is in index order
    (as every caller builds it) the result is ordered by (key, index). Insertion sort for
    a few pairs, else a radix sort by bytes (passes where every key shares the byte are
    skipped); a comparison sort through a callback was the larger part of building a
    page."""
    cdef int64_t i, j, b, shift, total
    cdef uint64_t k, v
    cdef int64_t counts[8][256]
    cdef uint64_t* tmp = NULL
    cdef uint64_t* src = pairs
    cdef uint64_t* dst
    cdef uint64_t* t
    if n < 48:
        for i in range(1, n):
            k = pairs[2 * i]
            v = pairs[2 * i + 1]
            j = i - 1
            while j >= 0 and pairs[2 * j] > k:
                pairs[2 * j + 2] = pairs[2 * j]
                pairs[2 * j + 3] = pairs[2 * j + 1]
                j -= 1
            pairs[2 * j + 2] = k
            pairs[2 * j + 3] = v
        return 0
    memset(counts, 0, sizeof(counts))
    for i in range(n):
        k = pairs[2 * i]
        for b in range(8):
            counts[b][(k >> (8 * b)) & 255] += 1
    _grow(<void**>&tmp, n * 2 * sizeof(uint64_t))
    dst = tmp
    for b in range(8):
        shift = 8 * b
        if counts[b][(src[0] >> shift) & 255] == n:
            continue  # every key has this byte
        total = 0
        for j in range(256):
            i = counts[b][j]
            counts[b][j] = total
            total += i
        for i in range(n):
            k = src[2 * i]
            j = counts[b][(k >> shift) & 255]
            counts[b][(k >> shift) & 255] = j + 1
            dst[2 * j] = k
            dst[2 * j + 1] = src[2 * i + 1]
        t = src
        src = dst
        dst = t
    if src != pairs:
        memcpy(pairs, src, n * 2 * sizeof(uint64_t))
    free(tmp)
    return 0
