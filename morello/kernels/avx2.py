"""The AVX2 kernel table: one entry per leaf microkernel (see ``morello.kernels.base``).

Costs are formulas as in the published Morello, except where marked, over the target's
measured constants ``target.costs`` (see ``morello.costs``).
"""
from __future__ import annotations

import math

from morello.cost import move_cost
from morello.dtypes import Dtype
from morello.kernels.base import Kernel, KernelTable, Reason, VecType
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec
from morello.tensorspec import TensorSpec



def _rf_or_l1(t: TensorSpec) -> bool:
    return t.level in (Level.RF, Level.L1)


def _io(spec: Spec, target: Target) -> int:
    return sum(move_cost(o, target) for o in spec.operands)


def _all_f32(spec: Spec) -> Reason:
    if any(o.dtype is not Dtype.F32 for o in spec.operands):
        return "only f32 operands are supported by this kernel"
    return None


def _same_contiguous_f32(src: TensorSpec, dst: TensorSpec) -> Reason:
    """Copies element for element: same layout, both contiguous, f32."""
    if not (src.contiguous and dst.contiguous):
        return "operands must be contiguous"
    if src.layout != dst.layout:
        return "layouts differ"
    if src.dtype is not Dtype.F32 or dst.dtype is not Dtype.F32:
        return "only f32"
    return None


def _vecs(t: TensorSpec) -> int:
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
    VecType(Dtype.I16, 16, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256", add="_mm256_add_epi16"),
    VecType(Dtype.I32, 8, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256", add="_mm256_add_epi32", max="_mm256_max_epi32"),
)


# --- MatmulAccum ---------------------------------------------------------------------

def _mult_add_check(spec: Spec, target: Target) -> Reason:
    if any(o.volume != 1 for o in spec.operands):
        return "operands are not scalars"
    if not all(_rf_or_l1(o) for o in spec.operands):
        return "operands must be in RF or L1"
    return _all_f32(spec)


def _mult_add_emit(w, spec, ops, vt) -> None:
    lhs, rhs, out = ops
    w.line(f"{out.lval()} += {lhs.lval()} * {rhs.lval()};")


def _bvma_check(spec: Spec, target: Target) -> Reason:
    lhs, rhs, out = spec.operands
    if lhs.volume != 1 or not _rf_or_l1(lhs):
        return "lhs must be a scalar in RF or L1"
    if spec.shape[0] != 1 or spec.shape[1] != 1:
        return "needs b = m = 1"
    for t in (rhs, out):
        if t.level is not Level.VRF or not t.contiguous:
            return "rhs and out must be contiguous VRF tensors"
    if rhs.vector_size != out.vector_size:
        return "rhs and out vector sizes differ"
    return _all_f32(spec)


def _bvma_emit(w, spec, ops, vt) -> None:
    lhs, rhs, out = ops
    v = vt(out.spec.dtype, out.spec.vector_size)
    with w.block("{"):
        w.line(f"const {v.c_type} a = {v.set1}({lhs.lval()});")
        for j in range(_vecs(out.spec)):
            w.line(f"{out.vec(j)} = {v.fma}(a, {rhs.vec(j)}, {out.vec(j)});")


def _dot_check(spec: Spec, target: Target) -> Reason:
    lhs, rhs, out = spec.operands
    b, m, k, n = spec.shape
    if (b, m, n) != (1, 1, 1) or k % 8:
        return "needs a [1,1,k]x[1,k,1] product with k a multiple of 8"
    if lhs.level is not Level.L1 or rhs.level is not Level.L1:
        return "lhs and rhs must be in L1"
    if not (lhs.contiguous and rhs.contiguous):
        return "lhs and rhs must be contiguous"
    if out.volume != 1 or not _rf_or_l1(out):
        return "out must be a scalar in RF or L1"
    return _all_f32(spec)


def _dot_emit(w, spec, ops, vt) -> None:
    lhs, rhs, out = ops
    k = spec.shape[2]
    accs = max(c for c in (1, 2, 4) if (k // 8) % c == 0)
    with w.block("{"):
        for a in range(accs):
            w.line(f"__m256 acc{a} = _mm256_setzero_ps();")
        with w.block(f"for (int q = 0; q < {k}; q += {8 * accs}) {{"):
            for a in range(accs):
                off = f"q + {8 * a}"
                w.line(
                    f"acc{a} = _mm256_fmadd_ps(_mm256_loadu_ps({lhs.ptr(off)}), "
                    f"_mm256_loadu_ps({rhs.ptr(off)}), acc{a});"
                )
        for a in range(1, accs):
            w.line(f"acc0 = _mm256_add_ps(acc0, acc{a});")
        w.line(f"{out.lval()} += morello_hsum8(acc0);")


# --- Move ----------------------------------------------------------------------------

def _assign_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if spec.volume != 1:
        return "not a scalar"
    if not (_rf_or_l1(src) and _rf_or_l1(dst)):
        return "both operands must be in RF or L1"
    if src.dtype is not dst.dtype:
        return "dtypes differ"
    return None


def _assign_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    w.line(f"{dst.lval()} = {src.lval()};")


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
    if reason := _same_contiguous_f32(src, dst):
        return reason
    if spec.volume % vrf[0].vector_size:
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
            w.line(f"{dst.vec(j)} = {v.load}({src.ptr(j * vs)});")
        else:
            w.line(f"{v.store}({dst.ptr(j * vs)}, {src.vec(j)});")


def _vcopy_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if src.level is not Level.L1 or dst.level is not Level.L1:
        return "both operands must be in L1"
    if reason := _same_contiguous_f32(src, dst):
        return reason
    if spec.volume % 8:
        return "volume is not a multiple of 8"
    return None


def _vcopy_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    v = vt(Dtype.F32, 8)
    for j in range(0, spec.volume, 8):
        w.line(f"{v.store}({dst.ptr(j)}, {v.load}({src.ptr(j)}));")


# --- Fill ----------------------------------------------------------------------------

def _c_value(v: float) -> str:
    return "-INFINITY" if v == -math.inf else f"{v!r}f"


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
    if dst.volume != 1 or not _rf_or_l1(dst):
        return "not a scalar in RF or L1"
    return None


def _value_fill_emit(w, spec, ops, vt) -> None:
    w.line(f"{ops[0].lval()} = {_c_value(spec.params[0])};")


def _vector_fill_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if dst.level is not Level.VRF or not dst.contiguous:
        return "not a contiguous VRF tensor"
    if dst.dtype is not Dtype.F32:
        return "only f32"
    return None


def _vector_fill_emit(w, spec, ops, vt) -> None:
    (dst,) = ops
    v = vt(dst.spec.dtype, dst.spec.vector_size)
    value = spec.params[0]
    fill = f"{v.zero}()" if value == 0.0 else f"{v.set1}({_c_value(value)})"
    for j in range(_vecs(dst.spec)):
        w.line(f"{dst.vec(j)} = {fill};")


KERNELS: tuple[Kernel, ...] = (
    Kernel("MultAdd", PrimKind.MATMUL_ACCUM, _mult_add_check,
           lambda s, t: t.costs.scalar_op + _io(s, t), 0, _mult_add_emit,
           "out += lhs * rhs on scalars", scalar=True),
    # Differs from the reference (2·vc + 1): one FMA per vector plus one broadcast.
    Kernel("BroadcastVecMultAdd", PrimKind.MATMUL_ACCUM, _bvma_check,
           lambda s, t: _vecs(s.operands[2]) * t.costs.fma + t.costs.broadcast, 1, _bvma_emit,
           "broadcast a scalar of lhs, FMA with rhs vectors into out vectors",
           unit_dims=(0, 1, 2), needs_vrf=True),
    # Differs from the reference (k/4): adds the horizontal sum at the end.
    Kernel("DotProductLoop", PrimKind.MATMUL_ACCUM, _dot_check,
           lambda s, t: (s.shape[2] // 8) * (t.costs.fma + 2 * t.costs.vector_move)
           + t.costs.hsum + move_cost(s.operands[2], t), 5, _dot_emit,
           "vectorized dot product of a contiguous row and column", unit_dims=(0, 1, 3)),
    Kernel("Assign", PrimKind.MOVE, _assign_check,
           lambda s, t: t.costs.scalar_op + _io(s, t), 0, _assign_emit, "scalar copy",
           scalar=True),
    Kernel("VectorAssign", PrimKind.MOVE, _vassign_check,
           lambda s, t: t.costs.vector_move * (
               s.volume // (s.operands[0].vector_size or s.operands[1].vector_size)),
           0, _vassign_emit, "vector loads/stores between VRF and memory", needs_vrf=True),
    # Not in the reference: packing copies there go element by element.
    Kernel("VectorCopy", PrimKind.MOVE, _vcopy_check,
           lambda s, t: 2 * t.costs.vector_move * (s.volume // 8) + _io(s, t), 0, _vcopy_emit,
           "contiguous copy in L1 by vector loads and stores (packing)"),
    # Differs from the reference (cost 1 whatever the size): memset touches every line.
    Kernel("MemsetZero", PrimKind.FILL, _memset_check,
           lambda s, t: t.costs.scalar_op + move_cost(s.operands[0], t), 0, _memset_emit,
           "memset (fills with zero)"),
    Kernel("ValueFill", PrimKind.FILL, _value_fill_check,
           lambda s, t: t.costs.scalar_op + _io(s, t), 0, _value_fill_emit, "scalar = value",
           scalar=True),
    Kernel("VectorFill", PrimKind.FILL, _vector_fill_check,
           lambda s, t: _vecs(s.operands[0]) * t.costs.vector_move, 0, _vector_fill_emit,
           "vector registers = value", needs_vrf=True),
)

TABLE = KernelTable("avx2", KERNELS, VECTOR_TYPES)
BY_NAME = TABLE.by_name
