"""The AVX2 kernel table: one entry per leaf microkernel (see ``morello.kernels.base``).

Costs are formulas as in the published Morello, except where marked, over the target's
measured constants ``target.costs`` (see ``morello.costs``).
"""
from __future__ import annotations

from morello.cost import (
    move_cost,
    run_bytes,
    run_cost,
    side_by_side_surcharge,
    stream_cost,
    stripes_read_cost,
)
from morello.dtypes import Dtype
from morello.kernels import stream
from morello.kernels.base import (
    BYTES,
    F32,
    L1,
    MEM,
    NOT_RF,
    RL,
    VRF,
    Kernel,
    KernelTable,
    Reason,
    VecType,
    all_f32,
    c_value,
    io_cost,
    pin,
    pin_widened,
    rf_or_l1,
    same_contiguous_f32,
)
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec
from morello.tensorspec import TensorSpec

# Vectors per row of an outer-product loop's register tile, in two kernel rows: up to 2
# (needing 3 registers beyond out: a row of rhs and a broadcast; AVX2's 6x16) and 3 or 4
# (needing 5: AVX-512's 8x48 and 6x64).
OUTER_VECTORS = {"OuterProductLoop": (1, 2), "OuterProductLoopWide": (3, 4)}






def _lanes(t: TensorSpec) -> int:
    assert t.vector_size is not None
    return t.vector_size


def _vecs(t: TensorSpec) -> int:
    assert t.vector_size is not None
    return t.volume // t.vector_size


VECTOR_TYPES = (
    VecType(Dtype.F32, 8, "__m256", "_mm256_loadu_ps", "_mm256_storeu_ps",
            "_mm256_setzero_ps", "_mm256_set1_ps", "_mm256_fmadd_ps", "_mm256_add_ps",
            "_mm256_mul_ps", "_mm256_max_ps"),
    VecType(Dtype.F32, 4, "__m128", "_mm_loadu_ps", "_mm_storeu_ps", "_mm_setzero_ps",
            "_mm_set1_ps", "_mm_fmadd_ps", "_mm_add_ps", "_mm_mul_ps", "_mm_max_ps"),
    # Integer and bf16 vectors (no kernels use them yet): one 256-bit register each.
    VecType(Dtype.BF16, 16, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256"),
    VecType(Dtype.U8, 32, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256"),
    VecType(Dtype.S16, 16, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256", add="_mm256_add_epi16"),
    VecType(Dtype.S32, 8, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256", add="_mm256_add_epi32", max="_mm256_max_epi32"),
)


# --- MatmulAccum ---------------------------------------------------------------------

def _mult_add_check(spec: Spec, target: Target) -> Reason:
    if any(o.volume != 1 for o in spec.operands):
        return "operands are not scalars"
    if not all(rf_or_l1(o) for o in spec.operands):
        return "operands must be in RF or L1"
    return None  # any dtypes: the inputs widen into out's (kinds.check_dtypes)


def _mult_add_emit(w, spec, ops, vt) -> None:
    lhs, rhs, out = ops
    dt = out.spec.dtype
    a, b = (convert(o.lval(), o.spec.dtype, dt) for o in (lhs, rhs))
    w.line(f"{out.lval()} += {a} * {b};")


def _bvma_check(spec: Spec, target: Target) -> Reason:
    lhs, rhs, out = spec.operands
    if lhs.volume != 1 or not rf_or_l1(lhs):
        return "lhs must be a scalar in RF or L1"
    if spec.shape[0] != 1 or spec.shape[1] != 1:
        return "needs b = m = 1"
    for t in (rhs, out):
        if t.level is not Level.VRF or not t.contiguous:
            return "rhs and out must be contiguous VRF tensors"
    if rhs.vector_size != out.vector_size:
        return "rhs and out vector sizes differ"
    return all_f32(spec)


def _bvma_emit(w, spec, ops, vt) -> None:
    lhs, rhs, out = ops
    v = vt(out.spec.dtype, out.spec.vector_size)
    with w.block("{"):
        w.line(f"const {v.c_type} a = {v.set1}({lhs.lval()});")
        for j in range(_vecs(out.spec)):
            w.line(f"{out.vec(j)} = {v.fma}(a, {rhs.vec(j)}, {out.vec(j)});")


def _outer_check(vectors: tuple[int, int]):
    return lambda spec, target: _outer_why_not(spec, vectors)


def _outer_why_not(spec: Spec, vectors: tuple[int, int]) -> Reason:
    lhs, rhs, out = spec.operands
    b, m, k, n = spec.shape
    if b != 1:
        return "needs b = 1"
    if lhs.level is not Level.L1 or rhs.level is not Level.L1:
        return "lhs and rhs must be in L1"
    if out.level is not Level.VRF or out.vector_size is None or n % out.vector_size:
        return "out must be a VRF tile whose rows are whole vectors"
    vs = out.vector_size
    if not vectors[0] <= n // vs <= vectors[1]:
        return f"needs {vectors[0]} to {vectors[1]} vectors per row"
    if reason := all_f32(spec):
        return reason
    # Each row of out is whole consecutive vectors; each row of rhs is contiguous.
    row = (1, 1, n)
    for t in (out, rhs):
        if not t.valid_tile_shape(row) or not t.tile(row).contiguous:
            return "rows of rhs and out must be contiguous"
    if any(out.layout.offset(out.shape, (0, i, 0)) % vs for i in range(m)):
        return "rows of out must start at a vector"
    if any(p and p < k for p in (lhs.layout.pack_of(2), rhs.layout.pack_of(1))):
        return "k crosses a pack of lhs or rhs (split k first)"
    return None


def _outer_cost(s: Spec, t: Target) -> int:
    """Per step of k: m * nv FMAs, against nv vector loads of rhs and m broadcasts of
    lhs, on the core's ports at once (whichever is slower), and at least the FMA latency
    (8 FMAs in flight: 4 cycles on 2 ports)."""
    _, m, k, n = s.shape
    nv = n // _lanes(s.operands[2])
    c = t.costs
    return k * max(m * nv * c.fma, (m + nv) * c.vector_move, 8 * c.fma)


def _outer_emit(w, spec, ops, vt) -> None:
    from morello.codegen.affine import Affine, Var

    lhs, rhs, out = ops
    _, m, k, n = spec.shape
    vs = _lanes(out.spec)
    v = vt(Dtype.F32, vs)
    nv = n // vs
    q = Affine.var(Var("q", k))
    with w.block(f"for (long q = 0; q < {k}; q++) {{"):
        for j in range(nv):
            w.line(f"{'' if m > 1 else 'const '}{v.c_type} b{j} = "
                   f"{v.load}({rhs.at((0, q, j * vs)).ptr(0)});")
        # The row of rhs held in registers for every row of the tile (``pin``). One row
        # uses each vector once: there the folded load is the better code.
        if m > 1:
            w.line(pin(*(f"b{j}" for j in range(nv))))
        for i in range(m):
            row = out.at((0, i, 0))
            with w.block(f"{{ const {v.c_type} a = {v.set1}({lhs.at((0, i, q)).lval()});"):
                for j in range(nv):
                    w.line(f"{row.vec(j)} = {v.fma}(a, b{j}, {row.vec(j)});")


def dot_check(spec: Spec, target: Target) -> Reason:
    lhs, rhs, out = spec.operands
    b, m, k, n = spec.shape
    if (b, m) != (1, 1) or n not in (1, 2, 4, 8) or k % 8:
        return "needs a [1,1,k]x[1,k,n] product, n in 1, 2, 4, 8, k a multiple of 8"
    if lhs.level is not Level.L1 or rhs.level.counts_registers:
        return "lhs must be in L1, rhs in memory"
    if not lhs.contiguous or lhs.dtype is not Dtype.F32:
        return "lhs must be contiguous f32"
    if rhs.dtype not in (Dtype.F32, Dtype.BF16) or out.dtype is not Dtype.F32:
        return "rhs must be f32 or bf16, out f32"
    # Each column of rhs contiguous along k: one unpacked run per column.
    if rhs.stream_dim != 1 or (n > 1 and rhs.contig < 1):
        return "rhs columns must be contiguous"
    if rhs.contig < 1 or (n == 1 and not rhs.contiguous):
        return "rhs columns must be contiguous"
    if n == 1:
        if out.volume != 1 or not rf_or_l1(out):
            return "out must be a scalar in RF or L1"
    elif out.level is not Level.L1 or not out.contiguous:
        return "out must be a contiguous L1 row"
    return None


def _dot_chains(k: int, n: int) -> int:
    """Accumulators per column: 8 chains in all where k allows (enough to hide the FMA
    latency of every current x86 core)."""
    return max(c for c in (8, 4, 2, 1) if n * c <= 8 and k % (8 * c) == 0)


def _odd_even(k: int, n: int) -> int:
    """Chains per column of the odd/even bf16 loop (16 elements a step), 0 if k does not
    allow it."""
    fits = [c for c in (8, 4, 2, 1) if n * c <= 8 and k % (16 * c) == 0]
    return fits[0] if fits else 0


def _dot_odd_even_emit(w, lhs, rhs, out, k: int, n: int, c: int) -> None:
    """bf16 columns widened without a shuffle: each 32-bit lane of 16 loaded bf16 holds
    an even and an odd element, so the even ones are the lane shifted left by 16 and the
    odd ones the lane with its low half masked off. x is split into its even and odd
    elements instead (two shuffles per 8, shared by the n columns)."""
    with w.block("{"):
        w.line("const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);")
        for j in range(n):
            w.line(f"const uint16_t *restrict col{j} = "
                   f"{rhs.ptr_at((0, 0, j)) if n > 1 else rhs.ptr(0)};")
            for a in range(c):
                w.line(f"__m256 acc{j}_{a} = _mm256_setzero_ps();")
        with w.block(f"for (long q = 0; q < {k}; q += {16 * c}) {{"):
            for a in range(c):
                w.line(f"const __m256 l{a} = _mm256_loadu_ps({lhs.ptr(f'q + {16 * a}')});")
                w.line(f"const __m256 h{a} = _mm256_loadu_ps({lhs.ptr(f'q + {16 * a + 8}')});")
                for name, imm in (("xe", "0x88"), ("xo", "0xDD")):
                    w.line(f"const __m256 {name}{a} = _mm256_castpd_ps(_mm256_permute4x64_pd("
                           f"_mm256_castps_pd(_mm256_shuffle_ps(l{a}, h{a}, {imm})), 0xD8));")
                for j in range(n):
                    acc = f"acc{j}_{a}"
                    w.line(f"__m256i w{j}_{a} = _mm256_loadu_si256((const __m256i *)"
                           f"(col{j} + q + {16 * a})); {pin_widened(rhs, f'w{j}_{a}')}")
                    w.line(f"{acc} = _mm256_fmadd_ps(xe{a}, _mm256_castsi256_ps("
                           f"_mm256_slli_epi32(w{j}_{a}, 16)), {acc});")
                    w.line(f"{acc} = _mm256_fmadd_ps(xo{a}, _mm256_castsi256_ps("
                           f"_mm256_and_si256(w{j}_{a}, hi)), {acc});")
        dot_finish(w, out, n, c)


def dot_finish(w, out, n: int, c: int) -> None:
    for j in range(n):
        step = 1
        while step < c:  # a tree of adds: the chains stay independent to the end
            for a in range(0, c, 2 * step):
                w.line(f"acc{j}_{a} = _mm256_add_ps(acc{j}_{a}, acc{j}_{a + step});")
            step *= 2
    if n in (4, 8):
        # The columns' horizontal sums side by side: pairs of hadds halve the vectors
        # twice, leaving each column's sum in two 128-bit halves, added into out at once
        # (in a hand loop over 8 columns of 512 in L1: 51-55 % of the FMA peak, against
        # 47-52 % with one horizontal sum per column).
        for j in range(0, n, 2):
            w.line(f"const __m256 h{j} = _mm256_hadd_ps(acc{j}_0, acc{j + 1}_0);")
        for j in range(0, n, 4):
            w.line(f"const __m256 q{j} = _mm256_hadd_ps(h{j}, h{j + 2});")
        if n == 8:
            w.line("const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(q0, q4, 0x20), "
                   "_mm256_permute2f128_ps(q0, q4, 0x31));")
            w.line(f"_mm256_storeu_ps({out.ptr(0)}, _mm256_add_ps("
                   f"_mm256_loadu_ps({out.ptr(0)}), sums));")
        else:
            w.line("const __m128 sums = _mm_add_ps(_mm256_castps256_ps128(q0), "
                   "_mm256_extractf128_ps(q0, 1));")
            w.line(f"_mm_storeu_ps({out.ptr(0)}, _mm_add_ps(_mm_loadu_ps({out.ptr(0)}), sums));")
        return
    for j in range(n):
        dst = out.lval() if n == 1 else f"(*{out.ptr(j)})"
        w.line(f"{dst} += morello_hsum8(acc{j}_0);")


def _dot_emit(w, spec, ops, vt) -> None:
    lhs, rhs, out = ops
    k, n = spec.shape[2], spec.shape[3]
    c = _dot_chains(k, n)
    bf16 = rhs.spec.dtype is Dtype.BF16
    if bf16 and _odd_even(k, n):
        _dot_odd_even_emit(w, lhs, rhs, out, k, n, _odd_even(k, n))
        return
    with w.block("{"):
        for j in range(n):
            w.line(f"const {rhs.spec.dtype.c_type} *restrict col{j} = "
                   f"{rhs.ptr_at((0, 0, j)) if n > 1 else rhs.ptr(0)};")
            for a in range(c):
                w.line(f"__m256 acc{j}_{a} = _mm256_setzero_ps();")
        with w.block(f"for (long q = 0; q < {k}; q += {8 * c}) {{"):
            for a in range(c):
                x = f"_mm256_loadu_ps({lhs.ptr(f'q + {8 * a}')})"
                if n > 1:
                    w.line(f"const __m256 x{a} = {x};")
                    x = f"x{a}"
                for j in range(n):
                    col = f"col{j} + q + {8 * a}"
                    y = f"morello_bf16x8({col})" if bf16 else f"_mm256_loadu_ps({col})"
                    w.line(f"acc{j}_{a} = _mm256_fmadd_ps({x}, {y}, acc{j}_{a});")
        dot_finish(w, out, n, c)


def _dot_cost(s: Spec, t: Target) -> int:
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    rhs = s.operands[1]
    # bf16: a widening per 8 elements (zero-extend and shift), or with the odd/even
    # loop one op per 8 and x's shuffles (two per 8, shared by the n columns).
    widen = 0
    if rhs.dtype is Dtype.BF16:
        widen = c.vector_move // 2 + c.vector_move // n if _odd_even(k, n) else c.vector_move
    # rhs streamed from L2 or main memory: its lines, priced by how many columns are
    # read side by side (``stream_cost``); from L1 its view paid them as one stream, and
    # the kernel what side by side costs more (``side_by_side_surcharge``).
    stream = (stream_cost(rhs, t, n) if rhs.level is not Level.L1
              else side_by_side_surcharge(rhs, t, n))
    return ((k // 8) * (n * (c.fma + c.vector_move + widen) + c.vector_move)
            + dot_sums_cost(n, t) + move_cost(s.operands[2], t) + stream)


# The longest k DotProductRows takes: its copy of x (even elements, then odd, per 16)
# lives on the stack, and should stay in L1 beside the rows it meets (16 KiB).
ROWS_MAX_K = 4096


def rows_check(spec: Spec, target: Target) -> Reason:
    lhs, rhs, out = spec.operands
    b, m, k, n = spec.shape
    if (b, m) != (1, 1) or k % 32 or k > ROWS_MAX_K:
        return f"needs a [1,1,k]x[1,k,n] product, k a multiple of 32 up to {ROWS_MAX_K}"
    if lhs.level is not Level.L1 or not lhs.contiguous or lhs.dtype is not Dtype.F32:
        return "lhs must be contiguous f32 in L1"
    if rhs.level.counts_registers or rhs.dtype not in (Dtype.F32, Dtype.BF16):
        return "rhs must be f32 or bf16 in memory"
    # All of rhs one run (whole columns, adjacent): read in turn, that is one sequential
    # stream. Columns cut along k are runs that each start anew, and read in turn they
    # measured 2.2x slower than 8 read side by side (DotProductLoop): 1x16384x2048 bf16,
    # k split by 4096, on a Zen 4 host; x too long for L1 (from L2) was as slow.
    if rhs.stream_dim != 1 or not rhs.contiguous:
        return "rhs must be whole contiguous columns"
    if out.dtype is not Dtype.F32 or not (out.contiguous and out.level is Level.L1
                                          or n == 1 and rf_or_l1(out)):
        return "out must be a contiguous f32 row in L1 (or one scalar)"
    return None


def _rows_emit(w, spec, ops, vt) -> None:
    """Each column's whole dot product in turn, four accumulator chains over k, so that
    the columns (weight rows) are read one after another: in memory order when they are
    adjacent. For bf16, x is first split into its even and odd elements (per 16, into a
    stack copy), so that each step widens by a shift and a mask and loads x as it is."""
    from morello.codegen.affine import Affine, Var

    lhs, rhs, out = ops
    k, n = spec.shape[2], spec.shape[3]
    bf16 = rhs.spec.dtype is Dtype.BF16
    j = Affine.var(Var("j", n))
    with w.block("{"):
        if bf16:
            _split_x(w, lhs, k)
        with w.block(f"for (long j = 0; j < {n}; j++) {{"):
            w.line(f"const {rhs.spec.dtype.c_type} *restrict col = "
                   f"{rhs.at((0, 0, j)).ptr(0)};")
            w.line("__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;")
            with w.block(f"for (long q = 0; q < {k}; q += 32) {{"):
                if bf16:
                    for h in range(2):
                        w.line(f"__m256i w{h} = _mm256_loadu_si256((const __m256i *)"
                               f"(col + q + {16 * h})); {pin_widened(rhs, f'w{h}')}")
                        w.line(f"a{2 * h} = _mm256_fmadd_ps(_mm256_load_ps(xs + q + {16 * h}), "
                               f"_mm256_castsi256_ps(_mm256_slli_epi32(w{h}, 16)), a{2 * h});")
                        w.line(f"a{2 * h + 1} = _mm256_fmadd_ps(_mm256_load_ps(xs + q + "
                               f"{16 * h + 8}), _mm256_castsi256_ps(_mm256_and_si256(w{h}, "
                               f"hi)), a{2 * h + 1});")
                else:
                    for a in range(4):
                        w.line(f"a{a} = _mm256_fmadd_ps(_mm256_loadu_ps("
                               f"{lhs.ptr(f'q + {8 * a}')}), _mm256_loadu_ps(col + q + "
                               f"{8 * a}), a{a});")
            dst = out.lval() if n == 1 else out.at((0, 0, j)).lval()
            w.line(f"{dst} += morello_hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), "
                   "_mm256_add_ps(a2, a3)));")


def _split_x(w, lhs, k: int) -> None:
    """x copied to the stack as its even elements, then its odd ones, per 16 (``xs``), and
    the mask of a lane's high half (``hi``): each 32-bit lane of 16 loaded bf16 then
    widens to its even element by a shift and to its odd one by the mask."""
    w.line(f"_Alignas(32) float xs[{k}];")
    with w.block(f"for (long q = 0; q < {k}; q += 16) {{"):
        w.line(f"const __m256 l = _mm256_loadu_ps({lhs.ptr('q')}), "
               f"h = _mm256_loadu_ps({lhs.ptr('q + 8')});")
        for off, imm in ((0, "0x88"), (8, "0xDD")):
            w.line(f"_mm256_store_ps(xs + q + {off}, _mm256_castpd_ps("
                   f"_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps("
                   f"l, h, {imm})), 0xD8)));")
    w.line("const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);")


# Columns DotProductStripes reads side by side, each from its own stripe of the columns
# (the alternatives tried: docs/model-notes.md).
STRIPES = 8
# Each line is asked into L2 twice, at the prefetch distance and at half of it: of 8
# streams' prefetches some are lost (a single one at another distance, 384 or 512
# lines, gained nothing); only beyond the LLC's size, where it gains.
# The longest k it takes: its split copy of x (64 KiB on the stack) is read from L2, at
# a line per 8 lines of weights.
STRIPES_MAX_K = 16384


def stripes_check(spec: Spec, target: Target) -> Reason:
    lhs, rhs, out = spec.operands
    b, m, k, n = spec.shape
    if (b, m) != (1, 1) or k % 16 or k > STRIPES_MAX_K or n % STRIPES or n < 2 * STRIPES:
        return (f"needs a [1,1,k]x[1,k,n] product, k a multiple of 16 up to {STRIPES_MAX_K}, "
                f"n a multiple of {STRIPES} from {2 * STRIPES}")
    if lhs.level not in (Level.L1, Level.L2) or not lhs.contiguous \
            or lhs.dtype is not Dtype.F32:
        return "lhs must be contiguous f32 in L1 or L2"
    if rhs.level.counts_registers or rhs.dtype not in (Dtype.F32, Dtype.BF16):
        return "rhs must be f32 or bf16 in memory"
    # Each stripe is one run only if the columns are whole and adjacent.
    if rhs.stream_dim != 1 or not rhs.contiguous:
        return "rhs must be whole contiguous columns"
    if out.dtype is not Dtype.F32 or out.level not in (Level.L1, Level.L2) \
            or not out.contiguous:
        return "out must be a contiguous f32 row in L1 or L2"
    return None


def _stripes_emit(w, spec, ops, vt) -> None:
    """The columns cut into 8 stripes of n/8 adjacent columns, the j-th column of every
    stripe dotted with x at once, one accumulator each: 8 long runs of memory read side
    by side, each continuing where the last step left it. For bf16, x split as in
    DotProductRows."""
    from morello.codegen.affine import Affine, Var

    lhs, rhs, out = ops
    k, n = spec.shape[2], spec.shape[3]
    s = n // STRIPES
    bf16 = rhs.spec.dtype is Dtype.BF16
    j = Affine.var(Var("j", s))
    with w.block("{"):
        if bf16:
            _split_x(w, lhs, k)
        with w.block(f"for (long j = 0; j < {s}; j++) {{"):
            for r in range(STRIPES):
                w.line(f"const {rhs.spec.dtype.c_type} *restrict c{r} = "
                       f"{rhs.at((0, 0, j + r * s)).ptr(0)};")
                w.line(f"__m256 a{r} = _mm256_setzero_ps();")
            step = 16 if bf16 else 8
            # A line of each stripe per two steps; with a prefetch distance, each stripe's
            # line that far ahead is asked into L2 first (``CostConstants.gl_prefetch``),
            # and again at half the distance where the weights exceed the LLC (see
            # STRIPES above).
            ahead = rhs.prefetch_lines if k % (2 * step) == 0 else 0
            twice = rhs.ref.buffer.tensor.bytes > rhs.llc_bytes
            with w.block(f"for (long q = 0; q < {k}; q += {2 * step if ahead else step}) {{"):
                for d in (ahead, ahead // 2) if twice else (ahead,):
                    for r in range(STRIPES if d else 0):
                        w.line(f"_mm_prefetch((const char *)(c{r} + q) + {64 * d}, "
                               "_MM_HINT_T1);")
                for u in ("q", f"q + {step}") if ahead else ("q",):
                    _stripes_step(w, lhs, rhs, u, bf16)
            # The 8 horizontal sums at once (hadd pairs, as DotProductLoop's 8 columns).
            for r in range(0, STRIPES, 2):
                w.line(f"const __m256 h{r} = _mm256_hadd_ps(a{r}, a{r + 1});")
            w.line("const __m256 q0 = _mm256_hadd_ps(h0, h2), q4 = _mm256_hadd_ps(h4, h6);")
            w.line("_Alignas(32) float sums[8];")
            w.line("_mm256_store_ps(sums, _mm256_add_ps(_mm256_permute2f128_ps(q0, q4, 0x20), "
                   "_mm256_permute2f128_ps(q0, q4, 0x31)));")
            for r in range(STRIPES):
                w.line(f"{out.at((0, 0, j + r * s)).lval()} += sums[{r}];")


def _stripes_step(w, lhs, rhs, q: str, bf16: bool) -> None:
    """One step of DotProductStripes at k offset ``q`` (a C block of its own): 16 bf16 or
    8 f32 of each stripe."""
    with w.block("{"):
        if bf16:
            w.line(f"const __m256 xe = _mm256_load_ps(xs + {q}), "
                   f"xo = _mm256_load_ps(xs + {q} + 8);")
        else:
            w.line(f"const __m256 x = _mm256_loadu_ps({lhs.ptr(q)});")
        for r in range(STRIPES):
            if bf16:
                w.line(f"__m256i w{r} = _mm256_loadu_si256((const __m256i *)"
                       f"(c{r} + {q})); {pin_widened(rhs, f'w{r}')}")
                w.line(f"a{r} = _mm256_fmadd_ps(xe, _mm256_castsi256_ps("
                       f"_mm256_slli_epi32(w{r}, 16)), a{r});")
                w.line(f"a{r} = _mm256_fmadd_ps(xo, _mm256_castsi256_ps("
                       f"_mm256_and_si256(w{r}, hi)), a{r});")
            else:
                w.line(f"a{r} = _mm256_fmadd_ps(x, _mm256_loadu_ps(c{r} + {q}), a{r});")


def _stripes_cost(s: Spec, t: Target) -> int:
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    rhs = s.operands[1]
    # Per 16 of k (bf16) and column: a load, a shift and a mask (a vector move), two
    # FMAs; x's two loads per 16 are shared by the 8 stripes; for f32 per 8 of k and
    # column a load and an FMA, x's load shared. Then 8 sums per step of the stripes;
    # for bf16 first x's split (as DotProductRows).
    if rhs.dtype is Dtype.BF16:
        per_col = (k // 16) * (2 * c.fma + 2 * c.vector_move)
        per_step = (k // 16) * 2 * c.vector_move
        split = (k // 16) * 8 * c.vector_move
    else:
        per_col = (k // 8) * (c.fma + c.vector_move)
        per_step = (k // 8) * c.vector_move
        split = 0
    steps = n // STRIPES
    compute = split + n * per_col + steps * (per_step + dot_sums_cost(STRIPES, t)
                                             + STRIPES * c.scalar_op)
    # x from L2: once for bf16 (into the split copy, which stays in L2 beside it), once a
    # step for f32.
    x = s.operands[0]
    if x.level is Level.L2:
        compute += move_cost(x, t) * (2 if rhs.dtype is Dtype.BF16 else steps)
    return compute + stripes_read_cost(rhs, t, STRIPES) + move_cost(s.operands[2], t)


def _rows_cost(s: Spec, t: Target) -> int:
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    rhs = s.operands[1]
    bf16 = rhs.dtype is Dtype.BF16
    # Per 8 of k and column: an FMA, a load of rhs and one of x, and for bf16 a shift or
    # a mask (half a vector move); for bf16 first x's split: per 16 two loads, four
    # shuffles and two stores; a horizontal sum per column. rhs is read as one stream
    # (``stream_cost``), its columns in turn.
    widen = c.vector_move // 2 if bf16 else 0
    split = (k // 16) * 8 * c.vector_move if bf16 else 0
    stream = stream_cost(rhs, t, 1) if rhs.level is not Level.L1 else 0
    return (split + n * ((k // 8) * (c.fma + 2 * c.vector_move + widen) + c.hsum)
            + move_cost(s.operands[2], t) + stream)


def dot_sums_cost(n: int, t: Target) -> int:
    """The columns' horizontal sums: one each, or for 4 and 8 columns one tree of
    hadds (``_dot_finish``): one sum's latency and the hadds' (3n/4) shuffles."""
    c = t.costs
    return c.hsum + (3 * n // 4) * c.vector_move if n in (4, 8) else n * c.hsum


def _axpy_check(spec: Spec, target: Target) -> Reason:
    return axpy_why_not(spec, 16)


def axpy_why_not(spec: Spec, block: int) -> Reason:
    """WidenAxpyLoop's rule, for vectors of ``block`` bf16 (16: ymm, 32: zmm)."""
    b, m, k, n = spec.shape
    if (b, m) != (1, 1) or n % block or n > 64:
        return f"needs a [1,1,k]x[1,k,n] product, n a multiple of {block} up to 64"
    return _axpy_operands(spec)


def _axpy_operands(spec: Spec) -> Reason:
    """The operands of WidenAxpyLoop and WidenAxpySweep."""
    lhs, rhs, out = spec.operands
    if lhs.level is not Level.L1 or not lhs.contiguous or lhs.dtype is not Dtype.F32:
        return "lhs must be contiguous f32 in L1"
    if rhs.dtype is not Dtype.BF16 or rhs.level.counts_registers:
        return "rhs must be bf16 in memory"
    if rhs.stream_dim != 2 or rhs.contig < 1 or rhs.layout.is_packed:
        return "rhs rows must be contiguous"
    if out.level is not Level.L1 or not out.contiguous or out.dtype is not Dtype.F32:
        return "out must be a contiguous f32 row in L1"
    return None


# WidenAxpyLoop prefetches only over more rows than this (see _axpy_emit).
AXPY_PREFETCH_MIN_K = 16


def _axpy_emit(w, spec, ops, vt) -> None:
    axpy_emit(w, spec, ops, wide=False)


def _widen_fma_row(w, rhs, nb: int, wide: bool) -> None:
    """One row of bf16 weights at ``row`` times the broadcast ``x``, ``nb`` vectors of
    16 (``wide``: 32) bf16: each loaded once, its even columns (the lane shifted left by
    16) into ``e{j}``, its odd ones (the lane masked by ``hi``) into ``o{j}``."""
    block, P, V, si = (32, "_mm512", "__m512", "si512") if wide \
        else (16, "_mm256", "__m256", "si256")
    load = ("_mm512_loadu_si512((const void *)" if wide
            else "_mm256_loadu_si256((const __m256i *)")
    for j in range(nb):
        w.line(f"{V}i w{j} = {load}(row + {block * j})); {pin_widened(rhs, f'w{j}')}")
        w.line(f"e{j} = {P}_fmadd_ps(x, {P}_cast{si}_ps({P}_slli_epi32(w{j}, 16)), e{j});")
        w.line(f"o{j} = {P}_fmadd_ps(x, {P}_cast{si}_ps({P}_and_{si}(w{j}, hi)), o{j});")


def axpy_emit(w, spec, ops, wide: bool) -> None:
    """Rows of bf16 weights scaled by x and summed, widened without a shuffle: each
    32-bit lane of 16 (``wide``: 32, in zmm registers) loaded bf16 holds an even and an
    odd column, so the even columns accumulate the lane shifted left by 16 and the odd
    ones the lane masked; the two are interleaved back into out once, after all of k."""
    lhs, rhs, out = ops
    k, n = spec.shape[2], spec.shape[3]
    block = 32 if wide else 16
    nb = n // block
    P, V = ("_mm512", "__m512") if wide else ("_mm256", "__m256")
    # Beyond the last-level cache (``OperandView.prefetch_lines``), the lines some way
    # along each row into L2, at most an eighth of a whole row of W ahead (further, they
    # land in another row; into L1 they evict what is being read).
    row_lines = rhs.ref.buffer.tensor.shape[-1] * rhs.spec.dtype.size // 64
    ahead = min(rhs.prefetch_lines, row_lines // 8)
    # And the same lines k rows below, which the enclosing split of k reads next, after
    # the rest of these rows (k whole rows of W later), where that is no further than L2
    # holds (within the LLC nothing is prefetched: there it only cost).
    whole_k = rhs.ref.buffer.tensor.shape[-2]
    below = ahead and 1 < k < whole_k and k * row_lines * 64 <= rhs.prefetch_room
    with w.block("{"):
        w.line(f"const {V}i hi = {P}_set1_epi32((int)0xFFFF0000u);")
        w.line(f"const uint16_t *restrict row = {rhs.ptr(0)};")
        w.line(f"const long rs = {rhs.ptr_at((0, 1, 0)) + ' - row' if k > 1 else '0'};")
        for j in range(nb):
            w.line(f"{V} e{j} = {P}_setzero_ps(), o{j} = {P}_setzero_ps();")
        with w.block(f"for (long q = 0; q < {k}; q++, row += rs) {{"):
            w.line(f"const {V} x = {P}_set1_ps(*{lhs.ptr('q')});")
            # This row's lines four column tiles ahead, which the loop over tiles reads
            # soon, where the kernel walks a long k itself (down a column of tiles). Over
            # the few rows of a split k the tiles run along 8 rows side by side, which
            # the hardware prefetchers follow, and the prefetches only cost.
            if k > AXPY_PREFETCH_MIN_K:
                for line in range(0, 2 * n, 64):
                    w.line(f"_mm_prefetch((const char *)(row + {4 * n + line // 2}), "
                           "_MM_HINT_T0);")
            elif ahead:
                for line in range(0, 2 * n, 64):
                    w.line(f"_mm_prefetch((const char *)row + {64 * ahead + line}, "
                           "_MM_HINT_T1);")
                    if below:
                        w.line(f"_mm_prefetch((const char *)(row + {k} * rs)"
                               f"{f' + {line}' if line else ''}, _MM_HINT_T1);")
            _widen_fma_row(w, rhs, nb, wide)
        # Unpacking puts even and odd columns side by side per 128-bit lane: ymm l = columns
        # 0-3 | 8-11 and h = 4-7 | 12-15 (zmm: 0-3 | 8-11 | 16-19 | 24-27 and 4-7 | ...),
        # so each half of the block's columns is a lane permute of l and h.
        if wide:
            w.line("const __m512i lo16 = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, "
                   "19, 18, 17, 16, 3, 2, 1, 0);")
            w.line("const __m512i hi16 = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, "
                   "27, 26, 25, 24, 11, 10, 9, 8);")
        for j in range(nb):
            w.line(f"const {V} l{j} = {P}_unpacklo_ps(e{j}, o{j}), "
                   f"h{j} = {P}_unpackhi_ps(e{j}, o{j});")
            for half in (0, 1):
                pick = (f"_mm512_permutex2var_ps(l{j}, {('lo16', 'hi16')[half]}, h{j})" if wide
                        else f"_mm256_permute2f128_ps(l{j}, h{j}, {('0x20', '0x31')[half]})")
                p = out.ptr(block * j + block // 2 * half)
                w.line(f"{P}_storeu_ps({p}, {P}_add_ps({P}_loadu_ps({p}), {pick}));")


def _axpy_cost(s: Spec, t: Target) -> int:
    return axpy_cost(s, t, 16)


def _axpy_row_cost(nb: int, c) -> int:
    """One row of k over ``nb`` vectors of bf16 in the axpy loops: a broadcast, and per
    vector a load, a shift and a mask (half a vector move each, as in the odd/even dot
    loop) and two FMAs; at least the FMA latency (8 chains in flight), which fewer than
    64 columns do not fill."""
    return max(nb * (2 * c.fma + 2 * c.vector_move) + c.broadcast, 8 * c.fma)


def axpy_cost(s: Spec, t: Target, block: int) -> int:
    """WidenAxpyLoop's cost, for vectors of ``block`` bf16.

    Beyond the LLC, the search sweeps 4 rows of W side by side on AVX2 (Split(4) above
    TileOut(64)), not by a discount here but by the loop that sweeps whole rows
    (``cost.sweep_saving``). Three pricings here failed: a discount for k <= 4 (the rows
    side by side are the sweep's, not k: the search split 8-row sweeps into calls of 4);
    the same paid back by loops over the rows of a column tile, with this cost the larger
    of arithmetic and reads (that hid the y epilogue: Split(1), all epilogue, won, and ran
    0.40-0.71x); and the larger of the two with the lines priced by k (the search took
    Split(8) over TileOut(32) over Split(2) calls). The arithmetic here is priced at 31 %
    of the FMA peak where the loop in L1 runs at 85 %."""
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    nb = n // block
    rhs = s.operands[1]
    per_k = _axpy_row_cost(nb, c)
    mem = move_cost(rhs, t) if rhs.level is not Level.L1 else 0
    return k * per_k + nb * 4 * c.vector_move + mem


# WidenAxpySweep's rows of W a column tile takes at a time, and its tile's columns.
SWEEP_ROWS, SWEEP_COLS = 8, 64


def sweep_check(spec: Spec, target: Target) -> Reason:
    """WidenAxpyLoop's operands, with all of out (at least two column tiles) and rows of
    W in multiples of ``SWEEP_ROWS``, in a problem within the last-level cache."""
    b, m, k, n = spec.shape
    if (b, m) != (1, 1) or n % SWEEP_COLS or n < 2 * SWEEP_COLS or k % SWEEP_ROWS:
        return (f"needs a [1,1,k]x[1,k,n] product, n a multiple of {SWEEP_COLS} (two tiles "
                f"or more) and k of {SWEEP_ROWS}")
    if target.gl_in_dram:
        return "not beyond the last-level cache (WidenAxpyLoop's prefetches are there)"
    return _axpy_operands(spec)


def _sweep_emit(w, spec, ops, vt) -> None:
    sweep_emit(w, spec, ops, wide=False)


def sweep_emit(w, spec, ops, wide: bool) -> None:
    """out += x W over all of out: the loop nest Split(8) over TileOut(64) over
    WidenAxpyLoop, but with out's columns in even/odd order (per 16, ``wide``: 32: the
    even ones, then the odd ones) from its first row of W to its last, so that each tile's
    accumulators are loaded from out and stored back as they are, where WidenAxpyLoop
    interleaves them (two unpacks, two lane permutes and two adds per 16 columns, every 8
    rows). out is put in that order before and back after, once."""
    lhs, rhs, out = ops
    k, n = spec.shape[2], spec.shape[3]
    block = 32 if wide else 16
    nb, half = SWEEP_COLS // block, block // 2
    P, V = ("_mm512", "__m512") if wide else ("_mm256", "__m256")
    with w.block("{"):
        w.line(f"const {V}i hi = {P}_set1_epi32((int)0xFFFF0000u);")
        w.line(f"float *restrict y = {out.ptr(0)};")
        w.line(f"const float *restrict xs = {lhs.ptr(0)};")
        w.line(f"const uint16_t *restrict w0 = {rhs.ptr(0)};")
        w.line(f"const long rs = {rhs.ptr_at((0, 1, 0))} - w0;")
        if wide:  # lane i of the even (odd) half takes column 2i (2i + 1) of the 32
            for name, first in (("ev", 0), ("od", 1)):
                idx = ", ".join(str(first + 2 * i) for i in reversed(range(16)))
                w.line(f"const __m512i {name} = _mm512_set_epi32({idx});")
            for name, first in (("lo16", 0), ("hi16", 8)):
                idx = ", ".join(str(first + i // 2 + 16 * (i % 2)) for i in reversed(range(16)))
                w.line(f"const __m512i {name} = _mm512_set_epi32({idx});")
        with w.block(f"for (long g = 0; g < {n}; g += {block}) {{"):
            w.line(f"const {V} v0 = {P}_loadu_ps(y + g), v1 = {P}_loadu_ps(y + g + {half});")
            for off, sel, idx in ((0, "0x88", "ev"), (half, "0xDD", "od")):
                part = (f"_mm512_permutex2var_ps(v0, {idx}, v1)" if wide
                        else "_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd("
                             f"_mm256_shuffle_ps(v0, v1, {sel})), 0xD8))")
                w.line(f"{P}_storeu_ps(y + g + {off}, {part});")
        with w.block(f"for (long kk = 0; kk < {k}; kk += {SWEEP_ROWS}) {{"):
            with w.block(f"for (long c = 0; c < {n}; c += {SWEEP_COLS}) {{"):
                w.line("const uint16_t *restrict row = w0 + kk * rs + c;")
                for j in range(nb):
                    w.line(f"{V} e{j} = {P}_loadu_ps(y + c + {block * j}), "
                           f"o{j} = {P}_loadu_ps(y + c + {block * j + half});")
                with w.block(f"for (long q = 0; q < {SWEEP_ROWS}; q++, row += rs) {{"):
                    w.line(f"const {V} x = {P}_set1_ps(xs[kk + q]);")
                    _widen_fma_row(w, rhs, nb, wide)
                for j in range(nb):
                    w.line(f"{P}_storeu_ps(y + c + {block * j}, e{j}); "
                           f"{P}_storeu_ps(y + c + {block * j + half}, o{j});")
        with w.block(f"for (long g = 0; g < {n}; g += {block}) {{"):
            w.line(f"const {V} e = {P}_loadu_ps(y + g), o = {P}_loadu_ps(y + g + {half});")
            if wide:
                w.line("_mm512_storeu_ps(y + g, _mm512_permutex2var_ps(e, lo16, o));")
                w.line("_mm512_storeu_ps(y + g + 16, _mm512_permutex2var_ps(e, hi16, o));")
            else:
                w.line("const __m256 l = _mm256_unpacklo_ps(e, o), "
                       "h = _mm256_unpackhi_ps(e, o);")
                w.line("_mm256_storeu_ps(y + g, _mm256_permute2f128_ps(l, h, 0x20));")
                w.line("_mm256_storeu_ps(y + g + 8, _mm256_permute2f128_ps(l, h, 0x31));")


def _sweep_cost(s: Spec, t: Target) -> int:
    return sweep_cost(s, t, 16)


def sweep_cost(s: Spec, t: Target, block: int) -> int:
    """WidenAxpyLoop's arithmetic per tile of ``SWEEP_ROWS`` x ``SWEEP_COLS`` (vectors of
    ``block`` bf16), with a load and a store per accumulator where it prices an
    interleaving epilogue at twice that; the two reorderings of out; W's lines as the loop
    nest pays them (every row one run, its tiles read in turn:
    ``rewrites.tile.stream_discount``)."""
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    nb = SWEEP_COLS // block
    rhs = s.operands[1]
    per_k = _axpy_row_cost(nb, c)
    tiles = (k // SWEEP_ROWS) * (n // SWEEP_COLS)
    reorder = 2 * (n // block) * 4 * c.vector_move
    if rhs.level is Level.GL:
        mem = t.hit_cost[Level.GL] * rhs.units(t) + run_cost(n * rhs.dtype.size, t) * k
    else:
        mem = move_cost(rhs, t)
    return tiles * (SWEEP_ROWS * per_k + nb * 2 * c.vector_move) + reorder + mem


def _pairs_along_k(t: TensorSpec) -> bool:
    """A contiguous ``[1, 2, n]`` tensor stored ``[n][2]``: each column's two rows side by
    side (``rewrites.move.pair_layout``, canonicalized)."""
    if t.shape[1] != 2 or not t.contiguous or not t.layout.dims:
        return False
    inner = t.layout.dims[-1]
    return inner.dim == 1 and inner.pack in (None, 2)


def _madd_check(spec: Spec, target: Target) -> Reason:
    lhs, rhs, out = spec.operands
    b, m, k, n = spec.shape
    if b != 1 or k != 2 or n % 8 or m > 6:
        return "needs b = 1, k = 2, m <= 6 and n a multiple of 8"
    if lhs.level is not Level.L1 or lhs.dtype not in (Dtype.U8, Dtype.S8, Dtype.S16):
        return "lhs must be u8, s8 or s16 in L1"
    if lhs.contig < 1 or lhs.stream_dim != 2:
        return "lhs rows must be contiguous"
    if rhs.level is not Level.L1 or rhs.dtype is not Dtype.S16 or not _pairs_along_k(rhs):
        return "rhs must be s16 in L1, its two rows interleaved"
    # Beyond accumulators and rhs vectors: the broadcast pair and the product's
    # temporary (``morello_madd_add8`` names it, so 6 x 16 fits: tests/test_asm.py).
    return s32_tile(out, m, n, 2, target)


def s32_tile(out: TensorSpec, m: int, n: int, extra: int, target: Target) -> Reason:
    """An integer register tile: out as contiguous s32 vectors of 8, its ``m * n / 8``
    accumulators, the ``n / 8`` rhs vectors and ``extra`` more fitting the registers."""
    if out.level is not Level.VRF or not out.contiguous or out.vector_size != 8 \
            or out.dtype is not Dtype.S32:
        return "out must be contiguous s32 vectors of 8"
    if m * (n // 8) + n // 8 + extra > target.capacity[Level.VRF]:
        return "the register tile does not fit"
    return None


def _madd_emit(w, spec, ops, vt) -> None:
    lhs, rhs, out = ops
    m, n = spec.shape[1], spec.shape[3]
    nv = n // 8
    pair = f"morello_pair_{lhs.spec.dtype.short}"
    with w.block("{"):
        for j in range(nv):
            w.line(f"const __m256i b{j} = _mm256_loadu_si256((const __m256i *)"
                   f"{rhs.ptr(16 * j)});")
        for i in range(m):
            p = lhs.ptr_at((0, i, 0)) if m > 1 else lhs.ptr(0)
            w.line(f"const __m256i a{i} = _mm256_set1_epi32({pair}({p}));")
            for j in range(nv):
                o = out.vec(i * nv + j)
                w.line(f"{o} = morello_madd_add8({o}, a{i}, b{j});")


def _madd_cost(s: Spec, t: Target) -> int:
    m, n = s.shape[1], s.shape[3]
    c = t.costs
    # vpmaddwd + vpaddd: two ops on three ports for 16 multiply-adds, about 1.25 FMAs.
    # A pair of s16 is one broadcast load; a pair of bytes is built first (two loads, a
    # shift and an or, then a move into a vector): priced as two vector moves more.
    pair = c.broadcast + (2 * c.vector_move if s.operands[0].dtype.size == 1 else 0)
    return m * (n // 8) * (c.fma + c.fma // 4) + (n // 8) * c.vector_move + m * pair


def quad_rows(t: TensorSpec) -> bool:
    """A ``[1, k, n]`` tensor stored as quads of rows, each column's four bytes side by
    side (``rewrites.move.quad_layout``): innermost k by 4 (or k = 4 itself), then n."""
    dims = t.layout.dims
    if t.shape[1] % 4 or len(dims) < 2 or t.contig < 2:
        return False
    inner, nxt = dims[-1], dims[-2]
    quad = inner.dim == 1 and (inner.pack == 4 or (inner.pack is None and t.shape[1] == 4))
    return quad and nxt.dim == 2 and nxt.pack is None


def quad_tile_check(spec: Spec, target: Target, most_n: int, extra: int) -> Reason:
    """The byte kernels over all of k (``quad_loop_emit``): u8 rows of lhs in memory, s8
    quads of rhs rows, an s32 register tile of up to ``most_n`` columns with ``extra``
    registers beyond its accumulators and rhs vectors."""
    lhs, rhs, out = spec.operands
    b, m, k, n = spec.shape
    if b != 1 or k % 4 or n % 8 or n > most_n:
        return f"needs b = 1, k a multiple of 4, n a multiple of 8 up to {most_n}"
    if lhs.dtype is not Dtype.U8 or rhs.dtype is not Dtype.S8 or out.dtype is not Dtype.S32:
        return "u8 x s8 -> s32 only"
    if lhs.level.counts_registers or lhs.contig < 1 or lhs.stream_dim != 2:
        return "lhs rows must be contiguous in memory"
    if rhs.level.counts_registers or not quad_rows(rhs):
        return "rhs must be in memory, in quads of rows"
    return s32_tile(out, m, n, extra, target)


def _maddubs_check(spec: Spec, target: Target) -> Reason:
    # Beyond accumulators and rhs vectors: the ones, a broadcast, and one to spare (at
    # 16 the compiler spills: checked in tests/test_asm.py).
    return quad_tile_check(spec, target, 24, 3)


def quad_loop_emit(w, spec, ops, step, setup: tuple[str, ...] = ()) -> None:
    """out (s32 vectors) += u8 rows of lhs times s8 quads of rhs rows, over all of k:
    per 4 of k, each row's four bytes broadcast and ``step(x, b, c)`` (the C expression
    of the accumulator ``c`` after multiplying ``x`` by ``b``) for every vector."""
    lhs, rhs, out = ops
    m, k, n = spec.shape[1], spec.shape[2], spec.shape[3]
    nv = n // 8
    with w.block("{"):
        for line in setup:
            w.line(line)
        for i in range(m):
            w.line(f"const uint8_t *a{i} = {lhs.ptr_at((0, i, 0)) if i else lhs.ptr(0)};")
        w.line(f"const int8_t *b = {rhs.ptr(0)};")
        stride = f"{rhs.ptr_at((0, 4, 0))} - b" if k > 4 else "0"
        w.line(f"const long bs = {stride};")
        # The accumulators as locals of the loop (the tile's variables outlive it, and
        # gcc then shuffles and spills them every iteration: tests/test_asm.py).
        for i in range(m):
            for j in range(nv):
                w.line(f"__m256i c{i}_{j} = {out.vec(i * nv + j)};")
        with w.block(f"for (long q = 0; q < {k}; q += 4, b += bs) {{"):
            for j in range(nv):
                w.line(f"const __m256i b{j} = _mm256_loadu_si256((const __m256i *)(b + {32 * j}));")
            for i in range(m):
                w.line(f"const __m256i x{i} = _mm256_set1_epi32(morello_quad_u8(a{i} + q));")
                for j in range(nv):
                    w.line(f"c{i}_{j} = {step(f'x{i}', f'b{j}', f'c{i}_{j}')};")
        for i in range(m):
            for j in range(nv):
                w.line(f"{out.vec(i * nv + j)} = c{i}_{j};")


def _maddubs_emit(w, spec, ops, vt) -> None:
    quad_loop_emit(w, spec, ops,
                   lambda x, b, c: f"_mm256_add_epi32(_mm256_madd_epi16("
                                   f"_mm256_maddubs_epi16({x}, {b}), ones), {c})",
                   ("const __m256i ones = _mm256_set1_epi16(1);",))


def quad_tile_cost(s: Spec, t: Target, per_vector: int) -> int:
    """A ``quad_loop_emit`` kernel: per 4 of k, ``per_vector`` for each accumulator's
    step, a load per rhs vector and a broadcast per row; operands outside L1 pay their
    lines."""
    m, k, n = s.shape[1], s.shape[2], s.shape[3]
    c = t.costs
    mem = sum(move_cost(x, t) for x in s.operands[:2] if x.level is not Level.L1)
    return ((k // 4) * (m * (n // 8) * per_vector + (n // 8) * c.vector_move
                        + m * c.broadcast) + mem)


def _maddubs_cost(s: Spec, t: Target) -> int:
    # vpmaddubsw + vpmaddwd + vpaddd: three ops (two on the FMA ports) for 32
    # multiply-adds, about 1.5 FMAs.
    return quad_tile_cost(s, t, t.costs.fma + t.costs.fma // 2)


def _sat_scalar_check(spec: Spec, target: Target) -> Reason:
    lhs, rhs, out = spec.operands
    b, m, k, n = spec.shape
    if (b, m, n) != (1, 1, 1):
        return "one output element"
    if out.volume != 1 or not rf_or_l1(out):
        return "out must be a scalar in RF or L1"
    for t in (lhs, rhs):
        if t.level.counts_registers or t.layout.is_packed:
            return "lhs and rhs must be unpacked, in memory"
    return None


def _sat_scalar_emit(w, spec, ops, vt) -> None:
    lhs, rhs, out = ops
    k = spec.shape[2]
    with w.block("{"):
        w.line(f"const {lhs.spec.dtype.c_type} *a = {lhs.ptr(0)};")
        w.line(f"const {rhs.spec.dtype.c_type} *b = {rhs.ptr(0)};")
        for name, o in (("as", lhs), ("bs", rhs)):
            ptr = "a" if name == "as" else "b"
            step = f"{o.ptr_at((0, 0, 1) if o is lhs else (0, 1, 0))} - {ptr}" if k > 1 else "0"
            w.line(f"const long {name} = {step};")
        w.line("int32_t acc = 0;")
        with w.block(f"for (long q = 0; q + 1 < {k}; q += 2) {{"):
            w.line("acc += morello_sat16((int32_t)a[q * as] * b[q * bs] + "
                   "(int32_t)a[(q + 1) * as] * b[(q + 1) * bs]);")
        if k % 2:
            w.line(f"acc += (int32_t)a[{k - 1} * as] * b[{k - 1} * bs];")
        w.line(f"{out.lval()} += acc;")


def _quad_pack_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if len(spec.shape) != 3 or spec.shape[0] != 1 or spec.shape[1] != 4 \
            or spec.shape[2] % 8:
        return "needs [1, 4, n] with n a multiple of 8"
    if src.dtype.size != 1 or dst.dtype is not src.dtype:
        return "bytes only"
    if src.level is not Level.L1 or src.contig < 1 or src.stream_dim != 2:
        return "src rows must be contiguous in L1"
    if dst.level is not Level.L1 or not dst.contiguous or not quad_rows(dst):
        return "dst must be contiguous in L1, in a quad of rows"
    return None


def _quad_pack_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    n = spec.shape[2]
    ct = src.spec.dtype.c_type
    with w.block("{"):
        for r in range(4):
            w.line(f"const {ct} *r{r} = {src.ptr_at((0, r, 0)) if r else src.ptr(0)};")
        w.line(f"{ct} *d = {dst.ptr(0)};")
        with w.block(f"for (long j = 0; j < {n}; j += 8) {{"):
            for r in range(4):
                w.line(f"const __m128i x{r} = _mm_loadl_epi64((const __m128i *)(r{r} + j));")
            w.line("const __m128i p01 = _mm_unpacklo_epi8(x0, x1), "
                   "p23 = _mm_unpacklo_epi8(x2, x3);")
            w.line("_mm_storeu_si128((__m128i *)(d + 4 * j), _mm_unpacklo_epi16(p01, p23));")
            w.line("_mm_storeu_si128((__m128i *)(d + 4 * j + 16), "
                   "_mm_unpackhi_epi16(p01, p23));")


# --- Move ----------------------------------------------------------------------------

def _assign_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if spec.volume != 1:
        return "not a scalar"
    if not (rf_or_l1(src) and rf_or_l1(dst)):
        return "both operands must be in RF or L1"
    return None  # a Move Spec's dst widens its src (kinds.check_dtypes)


def convert(value: str, src: Dtype, dst: Dtype) -> str:
    """C expression of the scalar ``value`` of dtype ``src`` widened to ``dst``."""
    if src is dst:
        return value
    if src is Dtype.BF16:
        return f"morello_bf16_f32({value})"
    return f"({dst.c_type}){value}"


def _assign_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    w.line(f"{dst.lval()} = {convert(src.lval(), src.spec.dtype, dst.spec.dtype)};")


def _vassign_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    vrf = [t for t in (src, dst) if t.level is Level.VRF]
    if not vrf:
        return "neither operand is in VRF"
    if len(vrf) == 2 and src.vector_size != dst.vector_size:
        return "vector sizes differ"
    mem = [t for t in (src, dst) if t.level is not Level.VRF]
    if mem and mem[0].level is Level.RF:
        return "cannot vector-assign with RF"
    if not (src.contiguous and dst.contiguous) or src.layout != dst.layout:
        return "operands must be contiguous, of one layout"
    if src.dtype is not dst.dtype or src.dtype not in (Dtype.F32, Dtype.S32, Dtype.S16):
        return "one dtype: f32, s32 or s16"
    vs = vrf[0].vector_size
    assert vs is not None
    if spec.volume % vs:
        return "volume is not a multiple of the vector size"
    return None


def _vassign_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    vs = (src.spec.vector_size or dst.spec.vector_size)
    v = vt(src.spec.dtype, vs)
    for j in range(spec.volume // vs):
        if src.spec.level is Level.VRF and dst.spec.level is Level.VRF:
            w.line(f"{dst.vec(j)} = {src.vec(j)};")
        elif dst.spec.level is Level.VRF:
            w.line(f"{dst.vec(j)} = {v.load}({_vptr(v, src.ptr(j * vs), True)});")
        else:
            w.line(f"{v.store}({_vptr(v, dst.ptr(j * vs), False)}, {src.vec(j)});")


def _vptr(v: VecType, ptr: str, const: bool) -> str:
    """``ptr`` as the pointer type of ``v``'s loads and stores (integer vectors take
    ``__m256i *``)."""
    if v.dtype.is_float:
        return ptr
    return f"({'const ' if const else ''}{v.c_type} *){ptr}"


def _vcopy_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if src.level is not Level.L1 or dst.level is not Level.L1:
        return "both operands must be in L1"
    if reason := same_contiguous_f32(src, dst):
        return reason
    if spec.volume % 8:
        return "volume is not a multiple of 8"
    return None


def _vcopy_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    v = vt(Dtype.F32, 8)
    for j in range(0, spec.volume, 8):
        w.line(f"{v.store}({dst.ptr(j)}, {v.load}({src.ptr(j)}));")


def _stream_store_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if not target.gl_in_dram:
        return "only for problems in DRAM (Target.in_dram): in cache it is slower"
    if src.level is not Level.L1 or dst.level is not Level.GL:
        return "copies an L1 buffer out to main memory"
    if reason := same_contiguous_f32(src, dst):
        return reason
    return None


def _stream_loop_emit(w, src, dst, n: int, setup: tuple[str, ...], vector: str,
                      scalar: str, src2=None) -> None:
    """``d[i] = f(s[i])`` (with ``src2``, ``f(s[i], t[i])``) over n floats, stored to
    main memory by non-temporal stores of ``vector`` (an expression of ``v``, the 8
    floats at ``s + i``, and ``u``, those at ``t + i``), whole 64-byte lines only: the
    elements before the first whole line and after the last by ordinary stores (8 at a
    time, and ``scalar``, of ``s[i]`` and ``t[i]``, for the rest). A line written
    past the caches in part, the rest of it by the next run (rows of 5000 floats end
    mid-line), is merged in main memory: 3000x5000 softmax ran at 1.18 ns an element,
    3000x5008 at 0.55. The emitter fences the stores (``Kernel.nontemporal``)."""
    def vec(store: str, off: str = "") -> None:
        u = f"const __m256 u = _mm256_loadu_ps(t + i{off}); " if src2 is not None else ""
        w.line(f"{{ const __m256 v = _mm256_loadu_ps(s + i{off}); {u}"
               f"{store}(d + i{off}, {vector}); }}")
    with w.block("{"):
        w.line(f"const float *restrict s = {src.ptr(0)};")
        if src2 is not None:
            w.line(f"const float *restrict t = {src2.ptr(0)};")
        w.line(f"float *restrict d = {dst.ptr(0)};")
        for line in setup:
            w.line(line)
        w.line("long i = 0;")
        w.line(f"for (; i < {n} && ((uintptr_t)(d + i) & 31); i++) d[i] = {scalar};")
        with w.block(f"if (i + 8 <= {n} && ((uintptr_t)(d + i) & 63)) {{"):
            vec("_mm256_storeu_ps")
            w.line("i += 8;")
        with w.block(f"for (; i + 16 <= {n}; i += 16) {{"):
            vec("_mm256_stream_ps")
            vec("_mm256_stream_ps", " + 8")
        with w.block(f"for (; i + 8 <= {n}; i += 8) {{"):
            vec("_mm256_storeu_ps")
        w.line(f"for (; i < {n}; i++) d[i] = {scalar};")


def _stream_store_emit(w, spec, ops, vt) -> None:
    """An L1 buffer copied to main memory past the caches."""
    src, dst = ops
    _stream_loop_emit(w, src, dst, spec.volume, (), "v", "s[i]")


def _stream_store_cost(s: Spec, t: Target) -> int:
    # A load and a store per vector, the buffer's lines in L1, and the start of each run
    # in main memory (which loops over tiles may discount: ``tile.stream_discount``).
    # The lines in main memory are the parent Move's, paid once: no read first, no
    # write-back (``cost.writeback_cost``).
    dst = s.operands[1]
    return (2 * t.costs.vector_move * -(-s.volume // 8) + move_cost(s.operands[0], t)
            + run_cost(run_bytes(dst), t) * dst.blocks)


def _elementwise_stream_check(spec: Spec, target: Target) -> Reason:
    """Add, Mul, Relu with their inputs in L1 and the output in main memory, stored past
    the caches as it is computed."""
    if not target.gl_in_dram:
        return "only for problems in DRAM (Target.in_dram): in cache it is slower"
    *ins, out = spec.operands
    if out.level is not Level.GL:
        return "stores dst in main memory"
    if any(t.level is not Level.L1 for t in ins):
        return "inputs must be in L1"
    for t in ins:
        if reason := same_contiguous_f32(t, out):
            return reason
    return None


# Each kind's vector and scalar expressions over v and u (s[i] and t[i]).
_STREAM_OPS = {
    # NaN propagated, as VectorRelu (``stream.RELU_SCALAR``).
    PrimKind.RELU: ("_mm256_max_ps(_mm256_setzero_ps(), v)", stream.RELU_SCALAR.format(x="s[i]")),
    PrimKind.ADD: ("_mm256_add_ps(v, u)", "s[i] + t[i]"),
    PrimKind.MUL: ("_mm256_mul_ps(v, u)", "s[i] * t[i]"),
}


def _elementwise_stream_emit(w, spec, ops, vt) -> None:
    """dst = f(src[, src2]) from L1 rows stored to main memory past the caches: one pass,
    where an L1 buffer and ``StreamStore`` make two (the stores then wait for the
    computing pass, and the loads for the storing one)."""
    vector, scalar = _STREAM_OPS[spec.kind]
    *ins, out = ops
    _stream_loop_emit(w, ins[0], out, spec.volume, (), vector, scalar,
                      ins[1] if len(ins) > 1 else None)


def _elementwise_stream_cost(s: Spec, t: Target) -> int:
    # Per vector a load of each input, the op and a store; every operand's lines once
    # (dst's in main memory: no read first, no write-back, ``cost.writeback_cost``).
    return stream.pass_cost(s.volume, t, len(s.operands), 1) + io_cost(s, t)


def _div_stream_check(spec: Spec, target: Target) -> Reason:
    if not target.gl_in_dram:
        return "only for problems in DRAM (Target.in_dram): in cache it is slower"
    if spec.operands[2].level is not Level.GL:
        return "stores dst in main memory"
    return stream.div_into_check(spec, target)


def _div_stream_emit(w, spec, ops, vt) -> None:
    """src * (1 / denom) stored to main memory past the caches."""
    den, src, dst = ops
    _stream_loop_emit(w, src, dst, spec.volume,
                      (f"const float inv = 1.0f / {den.lval()};",
                       "const __m256 iv = _mm256_set1_ps(inv);"),
                      "_mm256_mul_ps(v, iv)", "s[i] * inv")


def _div_stream_cost(s: Spec, t: Target) -> int:
    # A load, a multiply and a store per vector; every operand's lines once (dst's in
    # main memory: no read first, no write-back, ``cost.writeback_cost``).
    return stream.pass_cost(s.volume, t, 2, 1) + t.costs.scalar_op + io_cost(s, t)


def _widen_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if src.dtype is not Dtype.BF16 or dst.dtype is not Dtype.F32:
        return "widens bf16 to f32 only"
    if src.level is not Level.L1 or not src.contiguous:
        return "src must be contiguous in L1"
    if dst.level is not Level.VRF or not dst.contiguous or dst.layout != src.layout:
        return "dst must be a contiguous VRF tensor of src's layout"
    if dst.vector_size not in (4, 8, 16):
        return "vectors of 4, 8 or 16 floats"
    return None


def _widen_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    vs = dst.spec.vector_size
    for j in range(spec.volume // vs):
        w.line(f"{dst.vec(j)} = morello_bf16x{vs}({src.ptr(j * vs)});")


def _copy_operands_check(src: TensorSpec, dst: TensorSpec) -> Reason:
    """A widening copy's operands: both contiguous in L1, of one layout."""
    if src.level is not Level.L1 or dst.level is not Level.L1:
        return "both operands must be in L1"
    if not (src.contiguous and dst.contiguous) or src.layout != dst.layout:
        return "operands must be contiguous, of one layout"
    return None


def _copy_loop_emit(w, src, dst, n: int, step: int, vector: str, scalar: str) -> None:
    """``d[i] = f(s[i])`` over n elements: ``vector`` (a statement of ``i``) per ``step``,
    ``scalar`` for the tail; ``s`` and ``d`` are the operands' typed pointers."""
    with w.block("{"):
        w.line(f"const {src.spec.dtype.c_type} *restrict s = {src.ptr(0)};")
        w.line(f"{dst.spec.dtype.c_type} *restrict d = {dst.ptr(0)};")
        if n >= step:
            with w.block(f"for (long i = 0; i < {n - n % step}; i += {step}) {{"):
                w.line(vector)
        if n % step:
            with w.block(f"for (long i = {n - n % step}; i < {n}; i++) {{"):
                w.line(scalar)


def _widen_copy_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if src.dtype is not Dtype.BF16 or dst.dtype is not Dtype.F32:
        return "widens bf16 to f32 only"
    return _copy_operands_check(src, dst)


def _widen_copy_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    _copy_loop_emit(w, src, dst, spec.volume, 8,
                    "_mm256_storeu_ps(d + i, morello_bf16x8(s + i));",
                    "d[i] = morello_bf16_f32(s[i]);")


# Integer widenings by vector: (source, destination) -> (elements per step, intrinsic).
_INT_WIDEN = {
    (Dtype.U8, Dtype.S16): (16, "_mm256_cvtepu8_epi16"),
    (Dtype.S8, Dtype.S16): (16, "_mm256_cvtepi8_epi16"),
    (Dtype.U8, Dtype.S32): (8, "_mm256_cvtepu8_epi32"),
    (Dtype.S8, Dtype.S32): (8, "_mm256_cvtepi8_epi32"),
    (Dtype.S16, Dtype.S32): (8, "_mm256_cvtepi16_epi32"),
}


def _int_widen_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if (src.dtype, dst.dtype) not in _INT_WIDEN:
        return "widens u8/s8 to s16/s32, or s16 to s32"
    return _copy_operands_check(src, dst)


def _int_widen_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    step, cvt = _INT_WIDEN[src.spec.dtype, dst.spec.dtype]
    load = "_mm_loadu_si128" if step * src.spec.dtype.size == 16 else "_mm_loadl_epi64"
    _copy_loop_emit(w, src, dst, spec.volume, step,
                    f"_mm256_storeu_si256((__m256i *)(d + i), {cvt}({load}((const __m128i *)"
                    "(s + i))));", f"d[i] = ({dst.spec.dtype.c_type})s[i];")


def _int_widen_cost(s: Spec, t: Target) -> int:
    step = _INT_WIDEN[s.operands[0].dtype, s.operands[1].dtype][0]
    return stream.pass_cost(s.volume, t, 2, 1, lanes=step) + io_cost(s, t)


def _pair_pack_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if len(spec.shape) != 3 or spec.shape[0] != 1 or spec.shape[1] != 2 \
            or spec.shape[2] % 8:
        return "needs [1, 2, n] with n a multiple of 8"
    if src.dtype not in (Dtype.U8, Dtype.S8) or dst.dtype is not Dtype.S16:
        return "widens u8 or s8 to s16"
    if src.level is not Level.L1 or src.contig < 1 or src.stream_dim != 2:
        return "src rows must be contiguous in L1"
    if dst.level is not Level.L1 or not _pairs_along_k(dst):
        return "dst must be in L1, its two rows interleaved"
    return None


def _pair_pack_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    n = spec.shape[2]
    cvt = "_mm256_cvtepu8_epi16" if src.spec.dtype is Dtype.U8 else "_mm256_cvtepi8_epi16"
    with w.block("{"):
        w.line(f"const {src.spec.dtype.c_type} *r0 = {src.ptr(0)};")
        w.line(f"const {src.spec.dtype.c_type} *r1 = {src.ptr_at((0, 1, 0))};")
        w.line(f"int16_t *d = {dst.ptr(0)};")
        with w.block(f"for (long j = 0; j < {n}; j += 8) {{"):
            # Bytes of the two rows interleaved, then widened: 8 columns' pairs.
            w.line("__m128i x = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(r0 + j)), "
                   "_mm_loadl_epi64((const __m128i *)(r1 + j)));")
            w.line(f"_mm256_storeu_si256((__m256i *)(d + 2 * j), {cvt}(x));")


# --- Fill ----------------------------------------------------------------------------


def _memset_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if spec.params[0] != 0.0:
        return "memset fills with zero only"
    if dst.level.counts_registers:
        return "destination is in registers"
    if not dst.contiguous:
        return "destination is not contiguous"
    return None


def _memset_emit(w, spec, ops, vt) -> None:
    (dst,) = ops
    w.line(f"memset({dst.ptr(0)}, 0, {spec.volume * dst.spec.dtype.size});")


def _value_fill_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if dst.volume != 1 or not rf_or_l1(dst):
        return "not a scalar in RF or L1"
    return None


def _value_fill_emit(w, spec, ops, vt) -> None:
    w.line(f"{ops[0].lval()} = {c_value(spec.params[0], ops[0].spec.dtype)};")


def _vector_fill_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if dst.level is not Level.VRF or not dst.contiguous:
        return "not a contiguous VRF tensor"
    if dst.dtype is not Dtype.F32 and (dst.dtype is not Dtype.S32 or spec.params[0] != 0):
        return "f32, or s32 zeros"
    return None


def _vector_fill_emit(w, spec, ops, vt) -> None:
    (dst,) = ops
    v = vt(dst.spec.dtype, dst.spec.vector_size)
    value = spec.params[0]
    fill = f"{v.zero}()" if value == 0.0 else f"{v.set1}({c_value(value)})"
    for j in range(_vecs(dst.spec)):
        w.line(f"{dst.vec(j)} = {fill};")


KERNELS: tuple[Kernel, ...] = (
    Kernel("MultAdd", PrimKind.MATMUL_ACCUM, _mult_add_check,
           lambda s, t: t.costs.scalar_op + io_cost(s, t), 0, _mult_add_emit,
           "out += lhs * rhs on scalars", scalar=True, levels=(RL, RL, RL)),
    # Differs from the reference (2·vc + 1): one FMA per vector plus one broadcast.
    Kernel("BroadcastVecMultAdd", PrimKind.MATMUL_ACCUM, _bvma_check,
           lambda s, t: _vecs(s.operands[2]) * t.costs.fma + t.costs.broadcast, 1, _bvma_emit,
           "broadcast a scalar of lhs, FMA with rhs vectors into out vectors",
           unit_dims=(0, 1, 2), needs_vrf=True, levels=(RL, VRF, VRF), dtypes=(F32, F32, F32)),
    # Not in the reference (whose register tiles are loops over BroadcastVecMultAdd): a
    # whole register tile's k loop, each step's FMAs over independent accumulators.
    *(Kernel(name, PrimKind.MATMUL_ACCUM, _outer_check(vectors), _outer_cost,
             vectors[1] + 1, _outer_emit,
             f"out (an m x n VRF tile, {vectors[0]} to {vectors[1]} vectors a row) += lhs "
             "(m x k, L1) * rhs (k x n, L1): per step of k a row of rhs in registers, m "
             "broadcasts of lhs, m * n/vs FMAs", unit_dims=(0,), needs_vrf=True,
             levels=(L1, L1, VRF), dtypes=(F32, F32, F32))
      for name, vectors in OUTER_VECTORS.items()),
    # Differs from the reference (k/4): adds the horizontal sum at the end.
    # Differs from the reference (k/4, one column, f32): up to 8 columns (weight rows)
    # at once, bf16 columns widened in registers, 8 accumulator chains, the horizontal
    # sums at the end.
    Kernel("DotProductLoop", PrimKind.MATMUL_ACCUM, dot_check, _dot_cost, 12, _dot_emit,
           "dot products of a contiguous f32 row with 1, 2, 4 or 8 contiguous f32 or bf16 "
           "columns", unit_dims=(0, 1), levels=(L1, MEM, RL),
           dtypes=(F32, (Dtype.F32, Dtype.BF16), F32)),
    # Not in the reference (whose dot products are one column at a time, x widened per
    # step): any number of columns, each read whole in turn, bf16 widened by shift and
    # mask against a split copy of x.
    Kernel("DotProductRows", PrimKind.MATMUL_ACCUM, rows_check, _rows_cost, 6, _rows_emit,
           "dot products of a contiguous f32 row with f32 or bf16 columns, one column "
           "after another (the columns read in turn, not side by side)", unit_dims=(0, 1),
           levels=(L1, MEM, RL), dtypes=(F32, (Dtype.F32, Dtype.BF16), F32)),
    # Not in the reference: long runs side by side, each a stripe of adjacent columns.
    Kernel("DotProductStripes", PrimKind.MATMUL_ACCUM, stripes_check, _stripes_cost, 12,
           _stripes_emit, f"dot products of a contiguous f32 row with f32 or bf16 columns, "
           f"the columns cut into {STRIPES} stripes read side by side (long runs of memory, "
           "where columns read in turn are one run and page-long columns side by side are "
           "many)", unit_dims=(0, 1),
           levels=((Level.L1, Level.L2), MEM, (Level.L1, Level.L2)),
           dtypes=(F32, (Dtype.F32, Dtype.BF16), F32)),
    # Not in the reference (x . W there broadcasts x over widened rows in registers):
    # all of k over up to 64 columns, 8 accumulators, widened by shift and mask.
    Kernel("WidenAxpyLoop", PrimKind.MATMUL_ACCUM, _axpy_check, _axpy_cost, 12, _axpy_emit,
           "x (f32 row) times bf16 weight rows summed into up to 64 columns of out, over "
           "all of k (even/odd columns widened by a shift and a mask, interleaved at the "
           "end)", unit_dims=(0, 1), levels=(L1, MEM, L1),
           dtypes=(F32, (Dtype.BF16,), F32)),
    # Not in the reference: the loop nest above WidenAxpyLoop in cache, out's columns
    # kept in the widening's even/odd order throughout.
    Kernel("WidenAxpySweep", PrimKind.MATMUL_ACCUM, sweep_check, _sweep_cost, 12,
           _sweep_emit, f"x (f32 row) times bf16 weight rows summed into all of out: "
           f"{SWEEP_ROWS} rows of W over each {SWEEP_COLS} columns in turn, out's columns "
           "in even/odd order meanwhile (reordered once before and once after)",
           unit_dims=(0, 1), levels=(L1, MEM, L1), dtypes=(F32, (Dtype.BF16,), F32)),
    # Not in the reference: u8 x s8 -> s32 there is a dot-product loop over bytes.
    Kernel("PairMaddS16", PrimKind.MATMUL_ACCUM, _madd_check, _madd_cost, 4, _madd_emit,
           "out (s32 vectors) += pairs of lhs (u8/s8/s16) times interleaved s16 rhs rows "
           "(vpmaddwd: exact, no saturation for 8-bit inputs)", unit_dims=(0,),
           needs_vrf=True, levels=(L1, L1, VRF),
           dtypes=((*BYTES, Dtype.S16), (Dtype.S16,), (Dtype.S32,))),
    # Saturating u8 x s8 (MatmulSat16): the k loop is the kernel's (no Split may cut k).
    Kernel("MaddubsLoop", PrimKind.MATMUL_SAT16_ACCUM, _maddubs_check, _maddubs_cost, 2,
           _maddubs_emit, "out (s32 vectors) += u8 rows times s8 quads of rows, all of k "
           "(vpmaddubsw: each pair's sum saturates to s16; vpmaddwd by ones; vpaddd)",
           unit_dims=(0,), needs_vrf=True, levels=(MEM, MEM, VRF),
           dtypes=((Dtype.U8,), (Dtype.S8,), (Dtype.S32,))),
    Kernel("MultAddSat16Loop", PrimKind.MATMUL_SAT16_ACCUM, _sat_scalar_check,
           lambda s, t: s.shape[2] * (4 * t.costs.scalar_op + t.costs.vector_move)
           + io_cost(s, t), 0, _sat_scalar_emit,
           "one output element: the k-pairs' products summed with s16 saturation, scalar",
           unit_dims=(0, 1, 3), levels=(MEM, MEM, RL)),
    Kernel("Assign", PrimKind.MOVE, _assign_check,
           lambda s, t: t.costs.scalar_op + io_cost(s, t), 0, _assign_emit, "scalar copy",
           scalar=True, levels=(RL, RL)),
    Kernel("VectorAssign", PrimKind.MOVE, _vassign_check,
           lambda s, t: t.costs.vector_move * (
               s.volume // (s.operands[0].vector_size or s.operands[1].vector_size)),
           0, _vassign_emit, "vector loads/stores between VRF and memory", needs_vrf=True,
           levels=(NOT_RF, NOT_RF), dtypes=((Dtype.F32, Dtype.S32, Dtype.S16),) * 2),
    Kernel("VectorWidenBf16", PrimKind.MOVE, _widen_check,
           lambda s, t: 2 * t.costs.vector_move * _vecs(s.operands[1]) + io_cost(s, t), 0,
           _widen_emit, "bf16 in L1 widened into f32 vector registers (zero-extend, shift)",
           needs_vrf=True, levels=(L1, VRF), dtypes=((Dtype.BF16,), F32)),
    Kernel("WidenCopyBf16", PrimKind.MOVE, _widen_copy_check,
           lambda s, t: stream.pass_cost(s.volume, t, 3, 0) + io_cost(s, t), 0, _widen_copy_emit,
           "bf16 widened into an f32 buffer, both contiguous in L1", levels=(L1, L1),
           dtypes=((Dtype.BF16,), F32)),
    Kernel("WidenCopyInt", PrimKind.MOVE, _int_widen_check, _int_widen_cost, 0,
           _int_widen_emit, "u8/s8 widened into an s16 or s32 buffer (s16 into s32), both "
           "contiguous in L1 (vpmovzx/vpmovsx)", levels=(L1, L1),
           dtypes=((*BYTES, Dtype.S16), (Dtype.S16, Dtype.S32))),
    Kernel("QuadPack", PrimKind.MOVE, _quad_pack_check,
           lambda s, t: 6 * t.costs.vector_move * (s.shape[2] // 8) + io_cost(s, t), 0,
           _quad_pack_emit, "four rows of bytes interleaved by column (vpmaddubsw's order)",
           levels=(L1, L1), dtypes=(BYTES, BYTES)),
    Kernel("WidenPairPack", PrimKind.MOVE, _pair_pack_check,
           lambda s, t: 3 * t.costs.vector_move * (s.shape[2] // 8) + io_cost(s, t), 0,
           _pair_pack_emit, "two rows of u8/s8 widened into s16, interleaved (vpmaddwd's "
           "operand order)", levels=(L1, L1), dtypes=(BYTES, (Dtype.S16,))),
    # Not in the reference: packing copies there go element by element.
    Kernel("VectorCopy", PrimKind.MOVE, _vcopy_check,
           lambda s, t: 2 * t.costs.vector_move * (s.volume // 8) + io_cost(s, t), 0, _vcopy_emit,
           "contiguous copy in L1 by vector loads and stores (packing)", levels=(L1, L1),
           dtypes=(F32, F32)),
    # Not in the reference: an output stored past the caches, for problems in DRAM.
    Kernel("StreamStore", PrimKind.MOVE, _stream_store_check, _stream_store_cost, 0,
           _stream_store_emit, "an L1 buffer stored to main memory by non-temporal stores "
           "(problems larger than the last-level cache only)", levels=(L1, (Level.GL,)),
           dtypes=(F32, F32), nontemporal=True),
    *(Kernel(f"Vector{name}Stream", kind, _elementwise_stream_check,
             _elementwise_stream_cost, 1, _elementwise_stream_emit,
             f"dst = {doc} over L1 inputs, stored to main memory by non-temporal stores "
             "(problems larger than the last-level cache only)",
             levels=(L1,) * inputs + ((Level.GL,),), dtypes=(F32,) * (inputs + 1),
             nontemporal=True)
      for name, kind, doc, inputs in (("Relu", PrimKind.RELU, "max(src, 0)", 1),
                                      ("Add", PrimKind.ADD, "lhs + rhs", 2),
                                      ("Mul", PrimKind.MUL, "lhs * rhs", 2))),
    Kernel("VectorDivScalarStream", PrimKind.DIV_REDUCED_INTO, _div_stream_check,
           _div_stream_cost, 1, _div_stream_emit, "dst = src * (1 / denom), an L1 row "
           "stored to main memory by non-temporal stores (problems larger than the "
           "last-level cache only)", levels=(RL, L1, (Level.GL,)), dtypes=(F32, F32, F32),
           nontemporal=True),
    # Differs from the reference (cost 1 whatever the size): memset touches every line.
    Kernel("MemsetZero", PrimKind.FILL, _memset_check,
           lambda s, t: t.costs.scalar_op + move_cost(s.operands[0], t), 0, _memset_emit,
           "memset (fills with zero)", levels=(MEM,)),
    Kernel("ValueFill", PrimKind.FILL, _value_fill_check,
           lambda s, t: t.costs.scalar_op + io_cost(s, t), 0, _value_fill_emit, "scalar = value",
           scalar=True, levels=(RL,)),
    Kernel("VectorFill", PrimKind.FILL, _vector_fill_check,
           lambda s, t: _vecs(s.operands[0]) * t.costs.vector_move, 0, _vector_fill_emit,
           "vector registers = value", needs_vrf=True, levels=(VRF,),
           dtypes=((Dtype.F32, Dtype.S32),)),
    # --- The memory-bound kinds (elementwise, broadcast, reductions, softmax family).
    *stream.rows(stream.AVX2),
)

TABLE = KernelTable("avx2", KERNELS, VECTOR_TYPES)
BY_NAME = TABLE.by_name
