"""AVX-512: the AVX2 kernel table, with 16-lane f32 vectors and 32 vector registers.

The register-tile kernels (``BroadcastVecMultAdd``, ``VectorAssign``, ``VectorFill``) emit
through the target's vector types, so a Move into VRF may take 64-byte vectors here
(``rewrites.move`` picks the widest vector that tiles the row) and the 32 zmm registers
hold larger register tiles. The memory-bound kinds have their AVX2 kernels and the same
in 16 lanes (``morello.kernels.stream``, names ending in 16): the search picks per Spec
(16 lanes for long rows; 8 where a row of 8 would be a scalar tail in 16-lane code).
Exact u8 x s8 -> s32 matmuls multiply four bytes at a time into s32 (VNNI's vpdpbusd,
in 256-bit vectors: ``DpbusdLoop``) instead of widening to s16 for vpmaddwd.
Host support: ``morello.memory.host_lacks``.
"""
from __future__ import annotations

from morello.cost import move_cost, side_by_side_surcharge, stream_cost
from morello.dtypes import Dtype
from morello.kernels import stream
from morello.kernels.avx2 import (
    KERNELS,
    VECTOR_TYPES,
    axpy_cost,
    axpy_emit,
    axpy_why_not,
    dot_check,
    dot_finish,
    dot_sums_cost,
    quad_loop_emit,
    quad_tile_check,
    quad_tile_cost,
    rows_check,
    sweep_check,
    sweep_cost,
    sweep_emit,
)
from morello.kernels.base import (
    F32,
    L1,
    MEM,
    RL,
    VRF,
    Kernel,
    KernelTable,
    Reason,
    VecType,
    pin_widened,
)
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec

VECTOR_TYPES_512 = (
    VecType(Dtype.F32, 16, "__m512", "_mm512_loadu_ps", "_mm512_storeu_ps",
            "_mm512_setzero_ps", "_mm512_set1_ps", "_mm512_fmadd_ps", "_mm512_add_ps",
            "_mm512_mul_ps", "_mm512_max_ps"),
    *VECTOR_TYPES,
)


def _dpbusd_check(spec: Spec, target: Target) -> Reason:
    # Beyond accumulators and rhs vectors: the broadcast and one to spare.
    return quad_tile_check(spec, target, 32, 2)


def _dpbusd_emit(w, spec, ops, vt) -> None:
    quad_loop_emit(w, spec, ops, lambda x, b, c: f"morello_dpbusd8({c}, {x}, {b})")


def _dpbusd_cost(s: Spec, t: Target) -> int:
    # One vpdpbusd (an FMA's port and latency) per 32 multiply-adds.
    return quad_tile_cost(s, t, t.costs.fma)


def _dot16_check(spec: Spec, target: Target) -> Reason:
    if reason := dot_check(spec, target):
        return reason
    n, k = spec.shape[3], spec.shape[2]
    if spec.operands[1].dtype is not Dtype.BF16 or n not in (4, 8) or k % 32:
        return "bf16 columns, 4 or 8 of them, k a multiple of 32"
    return None


def _dot16_emit(w, spec, ops, vt) -> None:
    """DotProductLoop's odd/even bf16 loop in 16 lanes: 32 bf16 of a column per load, the
    even ones the lanes shifted left by 16, the odd ones the lanes masked; x split into
    its even and odd elements by two two-source permutes per 32, shared by the columns.
    Each column's accumulator is folded to 8 lanes for the sums (``dot_finish``)."""
    lhs, rhs, out = ops
    k, n = spec.shape[2], spec.shape[3]
    with w.block("{"):
        w.line("const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);")
        w.line("const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, "
               "10, 8, 6, 4, 2, 0);")
        w.line("const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));")
        for j in range(n):
            w.line(f"const uint16_t *restrict col{j} = {rhs.ptr_at((0, 0, j))};")
            w.line(f"__m512 z{j} = _mm512_setzero_ps();")
        with w.block(f"for (long q = 0; q < {k}; q += 32) {{"):
            w.line(f"const __m512 l = _mm512_loadu_ps({lhs.ptr('q')}), "
                   f"h = _mm512_loadu_ps({lhs.ptr('q + 16')});")
            w.line("const __m512 xe = _mm512_permutex2var_ps(l, ev, h), "
                   "xo = _mm512_permutex2var_ps(l, od, h);")
            for j in range(n):
                w.line(f"__m512i w{j} = _mm512_loadu_si512((const void *)(col{j} + q)); "
                       f"{pin_widened(rhs, f'w{j}')}")
                w.line(f"z{j} = _mm512_fmadd_ps(xe, _mm512_castsi512_ps("
                       f"_mm512_slli_epi32(w{j}, 16)), z{j});")
                w.line(f"z{j} = _mm512_fmadd_ps(xo, _mm512_castsi512_ps("
                       f"_mm512_and_si512(w{j}, hi)), z{j});")
        for j in range(n):
            w.line(f"__m256 acc{j}_0 = _mm256_add_ps(_mm512_castps512_ps256(z{j}), "
                   f"_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z{j}), 1)));")
        dot_finish(w, out, n, 1)


def _dot16_cost(s: Spec, t: Target) -> int:
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    rhs = s.operands[1]
    # Per 32 of k and column: a load, a shift and a mask (half a vector move each) and
    # two FMAs, all of 16 lanes; x's two permutes shared by the columns; the folds.
    stream = (stream_cost(rhs, t, n) if rhs.level is not Level.L1
              else side_by_side_surcharge(rhs, t, n))
    return ((k // 32) * (n * (2 * c.fma + 2 * c.vector_move) + 2 * c.vector_move)
            + n * c.vector_move + dot_sums_cost(n, t) + move_cost(s.operands[2], t) + stream)


def _rows16_check(spec: Spec, target: Target) -> Reason:
    if reason := rows_check(spec, target):
        return reason
    if spec.operands[1].dtype is not Dtype.BF16 or spec.shape[2] % 64:
        return "bf16 columns, k a multiple of 64"
    return None


def _rows16_emit(w, spec, ops, vt) -> None:
    """DotProductRows in 16 lanes: x split once into its even and odd elements per 32 (two
    two-source permutes, into a stack copy), then each column whole in turn, 64 bf16 a
    step over four accumulators, widened by a shift and a mask."""
    from morello.codegen.affine import Affine, Var

    lhs, rhs, out = ops
    k, n = spec.shape[2], spec.shape[3]
    j = Affine.var(Var("j", n))
    with w.block("{"):
        w.line(f"_Alignas(64) float xs[{k}];")
        w.line("const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, "
               "10, 8, 6, 4, 2, 0);")
        w.line("const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));")
        with w.block(f"for (long q = 0; q < {k}; q += 32) {{"):
            w.line(f"const __m512 l = _mm512_loadu_ps({lhs.ptr('q')}), "
                   f"h = _mm512_loadu_ps({lhs.ptr('q + 16')});")
            w.line("_mm512_store_ps(xs + q, _mm512_permutex2var_ps(l, ev, h));")
            w.line("_mm512_store_ps(xs + q + 16, _mm512_permutex2var_ps(l, od, h));")
        w.line("const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);")
        with w.block(f"for (long j = 0; j < {n}; j++) {{"):
            w.line(f"const uint16_t *restrict col = {rhs.at((0, 0, j)).ptr(0)};")
            w.line("__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;")
            with w.block(f"for (long q = 0; q < {k}; q += 64) {{"):
                for h in range(2):
                    w.line(f"__m512i w{h} = _mm512_loadu_si512((const void *)"
                           f"(col + q + {32 * h})); {pin_widened(rhs, f'w{h}')}")
                    w.line(f"a{2 * h} = _mm512_fmadd_ps(_mm512_load_ps(xs + q + {32 * h}), "
                           f"_mm512_castsi512_ps(_mm512_slli_epi32(w{h}, 16)), a{2 * h});")
                    w.line(f"a{2 * h + 1} = _mm512_fmadd_ps(_mm512_load_ps(xs + q + "
                           f"{32 * h + 16}), _mm512_castsi512_ps(_mm512_and_si512(w{h}, hi)), "
                           f"a{2 * h + 1});")
            w.line("const __m512 z = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));")
            dst = out.lval() if n == 1 else out.at((0, 0, j)).lval()
            w.line(f"{dst} += morello_hsum16(z);")


def _rows16_cost(s: Spec, t: Target) -> int:
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


AVX512_KERNELS = (
    # Not in the reference: its bf16 dot products are 8 lanes.
    Kernel("DotProductLoop16", PrimKind.MATMUL_ACCUM, _dot16_check, _dot16_cost, 12,
           _dot16_emit, "dot products of a contiguous f32 row with 4 or 8 contiguous bf16 "
           "columns, 32 elements a step in 16 lanes", unit_dims=(0, 1), levels=(L1, MEM, RL),
           dtypes=(F32, (Dtype.BF16,), F32)),
    # Not in the reference: DotProductRows in 16 lanes.
    Kernel("DotProductRows16", PrimKind.MATMUL_ACCUM, _rows16_check, _rows16_cost, 6,
           _rows16_emit, "dot products of a contiguous f32 row with bf16 columns, one "
           "column after another, 64 elements a step in 16 lanes", unit_dims=(0, 1),
           levels=(L1, MEM, RL), dtypes=(F32, (Dtype.BF16,), F32)),
    # Not in the reference: WidenAxpyLoop in 16 lanes. In cache (1x512x1024 x.W, its
    # Split(8) program, a hand copy in zmm against the ymm kernel, Zen 4, 2 x 9 rounds):
    # 64 columns 1.15-1.21x, 128 (8 accumulators) 1.16-1.18x.
    Kernel("WidenAxpyLoop16", PrimKind.MATMUL_ACCUM,
           lambda spec, target: axpy_why_not(spec, 32),
           lambda s, t: axpy_cost(s, t, 32), 8,
           lambda w, spec, ops, vt: axpy_emit(w, spec, ops, wide=True),
           "WidenAxpyLoop over 32 or 64 columns, 32 bf16 a vector (zmm)",
           unit_dims=(0, 1), levels=(L1, MEM, L1), dtypes=(F32, (Dtype.BF16,), F32)),
    # Not in the reference: WidenAxpySweep in 16 lanes.
    Kernel("WidenAxpySweep16", PrimKind.MATMUL_ACCUM, sweep_check,
           lambda s, t: sweep_cost(s, t, 32), 8,
           lambda w, spec, ops, vt: sweep_emit(w, spec, ops, wide=True),
           "WidenAxpySweep, 32 bf16 a vector (zmm)",
           unit_dims=(0, 1), levels=(L1, MEM, L1), dtypes=(F32, (Dtype.BF16,), F32)),
    # Not in the reference: exact u8 x s8 there is a dot-product loop over bytes.
    Kernel("DpbusdLoop", PrimKind.MATMUL_ACCUM, _dpbusd_check, _dpbusd_cost, 2,
           _dpbusd_emit, "out (s32 vectors) += u8 rows times s8 quads of rows, all of k "
           "(vpdpbusd: four exact products summed into each s32, wrapping as numpy's "
           "int32 does)", unit_dims=(0,), needs_vrf=True, levels=(MEM, MEM, VRF),
           dtypes=((Dtype.U8,), (Dtype.S8,), (Dtype.S32,))),
)

TABLE = KernelTable("avx512", (*KERNELS, *stream.rows(stream.AVX512), *AVX512_KERNELS),
                    VECTOR_TYPES_512)
BY_NAME = TABLE.by_name
