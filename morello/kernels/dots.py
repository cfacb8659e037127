"""Dot products of an f32 row with f32 or bf16 columns (matrix-vector products): side
by side (DotProductLoop), one column after another (DotProductRows), in stripes of
adjacent columns read side by side (DotProductStripes), and the first two in the wide
schedule of 16-lane vectors (``wide_rows``).
"""
from __future__ import annotations

from morello.cost import (
    move_cost,
    side_by_side_surcharge,
    stream_cost,
    stripes_read_cost,
)
from morello.dtypes import Dtype
from morello.kernels.base import (
    F32,
    L1,
    MEM,
    RL,
    Kernel,
    Reason,
    VecType,
    pin_widened,
    rf_or_l1,
)
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec


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
        # (faster than one horizontal sum per column: docs/model-notes.md).
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
    # stream. Columns cut along k are runs that each start anew, and read in turn they are
    # slower than 8 read side by side (DotProductLoop), as is x too long for L1
    # (docs/model-notes.md).
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



# --- The wide schedules: 16-lane f32 vectors, one accumulator per column ------------

def _dot_wide_check(spec: Spec, target: Target) -> Reason:
    if reason := dot_check(spec, target):
        return reason
    n, k = spec.shape[3], spec.shape[2]
    if spec.operands[1].dtype is not Dtype.BF16 or n not in (4, 8) or k % 32:
        return "bf16 columns, 4 or 8 of them, k a multiple of 32"
    return None


def _dot_wide_emit(w, ops, k: int, n: int, vt: VecType) -> None:
    """DotProductLoop's odd/even bf16 loop in ``vt`` (16 lanes): ``2 * lanes`` bf16 of a
    column per load, the even ones the lanes shifted left by 16, the odd ones the lanes
    masked; x split into its even and odd elements (``VecType.even``/``odd``) per step,
    shared by the columns. Each column's accumulator is folded to 8 lanes for the sums
    (``dot_finish``)."""
    lhs, rhs, out = ops
    V, step = vt.c_type, 2 * vt.lanes
    with w.block("{"):
        w.line(vt.hi_mask())
        for line in vt.split_setup():
            w.line(line)
        for j in range(n):
            w.line(f"const uint16_t *restrict col{j} = {rhs.ptr_at((0, 0, j))};")
            w.line(f"{V} z{j} = {vt.zeros};")
        with w.block(f"for (long q = 0; q < {k}; q += {step}) {{"):
            w.line(f"const {V} l = {vt.loadu(lhs.ptr('q'))}, "
                   f"h = {vt.loadu(lhs.ptr(f'q + {vt.lanes}'))};")
            w.line(f"const {V} xe = {vt.even('l', 'h')}, xo = {vt.odd('l', 'h')};")
            for j in range(n):
                w.line(f"{vt.int_type} w{j} = {vt.load_bits(f'col{j} + q')}; "
                       f"{pin_widened(rhs, f'w{j}')}")
                w.line(f"z{j} = {vt.fma}(xe, {vt.widen_even(f'w{j}')}, z{j});")
                w.line(f"z{j} = {vt.fma}(xo, {vt.widen_odd(f'w{j}')}, z{j});")
        for j in range(n):
            w.line(f"__m256 acc{j}_0 = _mm256_add_ps({vt.prefix}_castps{vt.bits}_ps256(z{j}), "
                   f"_mm256_castpd_ps({vt.prefix}_extractf64x4_pd({vt.prefix}_castps_pd(z{j}), "
                   "1)));")
        dot_finish(w, out, n, 1)


def _dot_wide_cost(s: Spec, t: Target) -> int:
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    rhs = s.operands[1]
    # Per 32 of k and column: a load, a shift and a mask (half a vector move each) and
    # two FMAs, all of 16 lanes; x's two permutes shared by the columns; the folds.
    stream = (stream_cost(rhs, t, n) if rhs.level is not Level.L1
              else side_by_side_surcharge(rhs, t, n))
    return ((k // 32) * (n * (2 * c.fma + 2 * c.vector_move) + 2 * c.vector_move)
            + n * c.vector_move + dot_sums_cost(n, t) + move_cost(s.operands[2], t) + stream)


def _rows_wide_check(spec: Spec, target: Target) -> Reason:
    if reason := rows_check(spec, target):
        return reason
    if spec.operands[1].dtype is not Dtype.BF16 or spec.shape[2] % 64:
        return "bf16 columns, k a multiple of 64"
    return None


def _rows_wide_emit(w, ops, k: int, n: int, vt: VecType) -> None:
    """DotProductRows in ``vt`` (16 lanes): x split once into its even and odd elements
    per ``2 * lanes`` (into a stack copy), then each column whole in turn, ``4 * lanes``
    bf16 a step over four accumulators, widened by a shift and a mask."""
    from morello.codegen.affine import Affine, Var

    lhs, rhs, out = ops
    V, lanes = vt.c_type, vt.lanes
    j = Affine.var(Var("j", n))
    with w.block("{"):
        w.line(f"_Alignas({vt.bits // 8}) float xs[{k}];")
        for line in vt.split_setup():
            w.line(line)
        with w.block(f"for (long q = 0; q < {k}; q += {2 * lanes}) {{"):
            w.line(f"const {V} l = {vt.loadu(lhs.ptr('q'))}, "
                   f"h = {vt.loadu(lhs.ptr(f'q + {lanes}'))};")
            w.line(f"{vt.op('store')}(xs + q, {vt.even('l', 'h')});")
            w.line(f"{vt.op('store')}(xs + q + {lanes}, {vt.odd('l', 'h')});")
        w.line(vt.hi_mask())
        with w.block(f"for (long j = 0; j < {n}; j++) {{"):
            w.line(f"const uint16_t *restrict col = {rhs.at((0, 0, j)).ptr(0)};")
            w.line(f"{V} a0 = {vt.zeros}, a1 = a0, a2 = a0, a3 = a0;")
            with w.block(f"for (long q = 0; q < {k}; q += {4 * lanes}) {{"):
                for h in range(2):
                    w.line(f"{vt.int_type} w{h} = {vt.load_bits(f'col + q + {2 * lanes * h}')}; "
                           f"{pin_widened(rhs, f'w{h}')}")
                    w.line(f"a{2 * h} = {vt.fma}({vt.op('load')}(xs + q + {2 * lanes * h}), "
                           f"{vt.widen_even(f'w{h}')}, a{2 * h});")
                    w.line(f"a{2 * h + 1} = {vt.fma}({vt.op('load')}(xs + q + "
                           f"{2 * lanes * h + lanes}), {vt.widen_odd(f'w{h}')}, "
                           f"a{2 * h + 1});")
            w.line(f"const {V} z = {vt.add}({vt.add}(a0, a1), {vt.add}(a2, a3));")
            dst = out.lval() if n == 1 else out.at((0, 0, j)).lval()
            w.line(f"{dst} += {vt.hreduce('sum')}(z);")


def _rows_wide_cost(s: Spec, t: Target) -> int:
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    rhs = s.operands[1]
    # Per 32 of k and column: a load of rhs, two of x, a shift and a mask (half a vector
    # move each), two FMAs, all of 16 lanes; first x's split: per 32 two loads, two
    # permutes, two stores; a fold and a horizontal sum per column; rhs as one stream.
    stream = stream_cost(rhs, t, 1) if rhs.level is not Level.L1 else 0
    return ((k // 32) * 6 * c.vector_move
            + n * ((k // 32) * (2 * c.fma + 4 * c.vector_move) + c.vector_move + c.hsum)
            + move_cost(s.operands[2], t) + stream)


def wide_rows(vt: VecType) -> tuple[Kernel, ...]:
    """DotProductLoop's and DotProductRows' bf16 schedules in the 16-lane f32 vector type
    ``vt`` (names end in ``vt.suffix``)."""
    step = 2 * vt.lanes
    return (
        # Not in the reference: its bf16 dot products are 8 lanes.
        Kernel(f"DotProductLoop{vt.suffix}", PrimKind.MATMUL_ACCUM, _dot_wide_check,
               _dot_wide_cost, 12,
               lambda w, spec, ops, _vt: _dot_wide_emit(w, ops, spec.shape[2], spec.shape[3],
                                                        vt),
               f"dot products of a contiguous f32 row with 4 or 8 contiguous bf16 columns, "
               f"{step} elements a step in {vt.lanes} lanes", unit_dims=(0, 1),
               levels=(L1, MEM, RL), dtypes=(F32, (Dtype.BF16,), F32)),
        # Not in the reference: DotProductRows in 16 lanes.
        Kernel(f"DotProductRows{vt.suffix}", PrimKind.MATMUL_ACCUM, _rows_wide_check,
               _rows_wide_cost, 6,
               lambda w, spec, ops, _vt: _rows_wide_emit(w, ops, spec.shape[2], spec.shape[3],
                                                         vt),
               f"dot products of a contiguous f32 row with bf16 columns, one column after "
               f"another, {2 * step} elements a step in {vt.lanes} lanes", unit_dims=(0, 1),
               levels=(L1, MEM, RL), dtypes=(F32, (Dtype.BF16,), F32)),
    )


ROWS: tuple[Kernel, ...] = (
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
)
