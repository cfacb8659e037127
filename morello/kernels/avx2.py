"""The AVX2 kernel table: one entry per leaf microkernel.

Each entry says when it applies (``check`` returns a reason or None), what it costs under
the affine model (formulas as in the published Morello, except where marked, over the
target's measured constants ``target.costs``, see ``morello.costs``), how many
vector registers it needs beyond its operands, and how it is written in C. Emitters speak to
operands through the codegen's operand protocol:

- ``o.lval()``    C lvalue of a one-element tensor;
- ``o.ptr(off)``  C pointer to the element ``off`` positions after the tile origin, for a
  contiguous tensor in memory;
- ``o.vec(j)``    name of the j-th vector register variable of a VRF tensor.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from morello.cost import move_cost
from morello.dtypes import Dtype
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec
from morello.tensorspec import TensorSpec

Reason = str | None


@dataclass(frozen=True)
class Kernel:
    name: str
    kind: PrimKind
    check: Callable[[Spec, Target], Reason]
    cost: Callable[[Spec, Target], int]
    vrf_regs: int
    emit: Callable  # (writer, spec, operands) -> None
    doc: str = ""
    # Cheap necessary conditions the search core checks before asking ``check``:
    # Spec dims that must be 1, and whether some operand must be in VRF.
    unit_dims: tuple[int, ...] = ()
    needs_vrf: bool = False

    def applies_to(self, spec: Spec, target: Target) -> bool:
        return spec.kind is self.kind and self.check(spec, target) is None


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


# C spellings per vector width (elements of f32).
_V = {
    8: dict(t="__m256", load="_mm256_loadu_ps", store="_mm256_storeu_ps",
            zero="_mm256_setzero_ps", set1="_mm256_set1_ps", fma="_mm256_fmadd_ps"),
    4: dict(t="__m128", load="_mm_loadu_ps", store="_mm_storeu_ps",
            zero="_mm_setzero_ps", set1="_mm_set1_ps", fma="_mm_fmadd_ps"),
}


# --- MatmulAccum ---------------------------------------------------------------------

def _mult_add_check(spec: Spec, target: Target) -> Reason:
    if any(o.volume != 1 for o in spec.operands):
        return "operands are not scalars"
    if not all(_rf_or_l1(o) for o in spec.operands):
        return "operands must be in RF or L1"
    return _all_f32(spec)


def _mult_add_emit(w, spec, ops) -> None:
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


def _bvma_emit(w, spec, ops) -> None:
    lhs, rhs, out = ops
    v = _V[out.spec.vector_size]
    with w.block("{"):
        w.line(f"const {v['t']} a = {v['set1']}({lhs.lval()});")
        for j in range(_vecs(out.spec)):
            w.line(f"{out.vec(j)} = {v['fma']}(a, {rhs.vec(j)}, {out.vec(j)});")


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


def _dot_emit(w, spec, ops) -> None:
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


def _assign_emit(w, spec, ops) -> None:
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


def _vassign_emit(w, spec, ops) -> None:
    src, dst = ops
    vs = (src.spec.vector_size or dst.spec.vector_size)
    v = _V[vs]
    for j in range(spec.volume // vs):
        if src.spec.level is Level.VRF and dst.spec.level is Level.VRF:
            w.line(f"{dst.vec(j)} = {src.vec(j)};")
        elif dst.spec.level is Level.VRF:
            w.line(f"{dst.vec(j)} = {v['load']}({src.ptr(j * vs)});")
        else:
            w.line(f"{v['store']}({dst.ptr(j * vs)}, {src.vec(j)});")


def _vcopy_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if src.level is not Level.L1 or dst.level is not Level.L1:
        return "both operands must be in L1"
    if reason := _same_contiguous_f32(src, dst):
        return reason
    if spec.volume % 8:
        return "volume is not a multiple of 8"
    return None


def _vcopy_emit(w, spec, ops) -> None:
    src, dst = ops
    v = _V[8]
    for j in range(0, spec.volume, 8):
        w.line(f"{v['store']}({dst.ptr(j)}, {v['load']}({src.ptr(j)}));")


# --- Zero ----------------------------------------------------------------------------

def _memset_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if dst.level.counts_registers:
        return "destination is in registers"
    if not dst.contiguous:
        return "destination is not contiguous"
    return None


def _memset_emit(w, spec, ops) -> None:
    (dst,) = ops
    w.line(f"memset({dst.ptr(0)}, 0, {spec.volume * dst.spec.dtype.size});")


def _value_zero_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if dst.volume != 1 or not _rf_or_l1(dst):
        return "not a scalar in RF or L1"
    return None


def _value_zero_emit(w, spec, ops) -> None:
    w.line(f"{ops[0].lval()} = 0;")


def _vector_zero_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if dst.level is not Level.VRF or not dst.contiguous:
        return "not a contiguous VRF tensor"
    if dst.dtype is not Dtype.F32:
        return "only f32"
    return None


def _vector_zero_emit(w, spec, ops) -> None:
    (dst,) = ops
    v = _V[dst.spec.vector_size]
    for j in range(_vecs(dst.spec)):
        w.line(f"{dst.vec(j)} = {v['zero']}();")


KERNELS: tuple[Kernel, ...] = (
    Kernel("MultAdd", PrimKind.MATMUL_ACCUM, _mult_add_check,
           lambda s, t: t.costs.scalar_op + _io(s, t), 0, _mult_add_emit,
           "out += lhs * rhs on scalars", unit_dims=(0, 1, 2, 3)),
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
           unit_dims=(0, 1, 2)),
    Kernel("VectorAssign", PrimKind.MOVE, _vassign_check,
           lambda s, t: t.costs.vector_move * (
               s.volume // (s.operands[0].vector_size or s.operands[1].vector_size)),
           0, _vassign_emit, "vector loads/stores between VRF and memory", needs_vrf=True),
    # Not in the reference: packing copies there go element by element.
    Kernel("VectorCopy", PrimKind.MOVE, _vcopy_check,
           lambda s, t: 2 * t.costs.vector_move * (s.volume // 8) + _io(s, t), 0, _vcopy_emit,
           "contiguous copy in L1 by vector loads and stores (packing)"),
    # Differs from the reference (cost 1 whatever the size): memset touches every line.
    Kernel("MemsetZero", PrimKind.ZERO, _memset_check,
           lambda s, t: t.costs.scalar_op + move_cost(s.operands[0], t), 0, _memset_emit,
           "memset"),
    Kernel("ValueZero", PrimKind.ZERO, _value_zero_check,
           lambda s, t: t.costs.scalar_op + _io(s, t), 0, _value_zero_emit, "scalar = 0",
           unit_dims=(0, 1, 2)),
    Kernel("VectorZero", PrimKind.ZERO, _vector_zero_check,
           lambda s, t: _vecs(s.operands[0]) * t.costs.vector_move, 0, _vector_zero_emit,
           "vector registers = 0",
           needs_vrf=True),
)

BY_NAME = {k.name: k for k in KERNELS}


def kernels_for(kind: PrimKind) -> tuple[Kernel, ...]:
    return tuple(k for k in KERNELS if k.kind is kind)
