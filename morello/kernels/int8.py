"""Integer matmuls: exact pairs of s16 products (vpmaddwd), saturating u8 x s8 quads
(vpmaddubsw) and their scalar form, and the layout predicates their packing Moves
(``moves``) and AVX-512's VNNI kernel share.
"""
from __future__ import annotations

from morello.cost import (
    move_cost,
)
from morello.dtypes import Dtype
from morello.kernels.base import (
    BYTES,
    L1,
    MEM,
    RL,
    VRF,
    Kernel,
    Reason,
    io_cost,
    rf_or_l1,
)
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec
from morello.tensorspec import TensorSpec


def pairs_along_k(t: TensorSpec) -> bool:
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
    if rhs.level is not Level.L1 or rhs.dtype is not Dtype.S16 or not pairs_along_k(rhs):
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




ROWS: tuple[Kernel, ...] = (
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
)
