"""Register tiles of f32 matmuls: scalar and vector multiply-adds, and outer-product
loops over a whole register tile's k, spelled through the target's vector types.

Costs are formulas as in the published Morello, except where marked, over the target's
measured constants ``target.costs`` (see ``morello.costs``).
"""
from __future__ import annotations

from morello.dtypes import Dtype
from morello.kernels.base import (
    F32,
    L1,
    RL,
    VRF,
    Kernel,
    Reason,
    all_f32,
    fma_loop_cost,
    io_cost,
    lane_count,
    pin,
    rf_or_l1,
    vector_count,
)
from morello.kernels.moves import convert
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec

# Vectors per row of an outer-product loop's register tile, in two kernel rows: up to 2
# (needing 3 registers beyond out: a row of rhs and a broadcast; AVX2's 6x16) and 3 or 4
# (needing 5: AVX-512's 8x48 and 6x64).
OUTER_VECTORS = {"OuterProductLoop": (1, 2), "OuterProductLoopWide": (3, 4)}


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
        for j in range(vector_count(out.spec)):
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
    nv = n // lane_count(s.operands[2])
    return fma_loop_cost(t, k, m * nv, m + nv)


def _outer_emit(w, spec, ops, vt) -> None:
    from morello.codegen.affine import Affine, Var

    lhs, rhs, out = ops
    _, m, k, n = spec.shape
    vs = lane_count(out.spec)
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




ROWS: tuple[Kernel, ...] = (
    Kernel("MultAdd", PrimKind.MATMUL_ACCUM, _mult_add_check,
           lambda s, t: t.costs.scalar_op + io_cost(s, t), 0, _mult_add_emit,
           "out += lhs * rhs on scalars", scalar=True, levels=(RL, RL, RL)),
    # Differs from the reference (2·vc + 1): one FMA per vector plus one broadcast.
    Kernel("BroadcastVecMultAdd", PrimKind.MATMUL_ACCUM, _bvma_check,
           lambda s, t: vector_count(s.operands[2]) * t.costs.fma + t.costs.broadcast, 1,
           _bvma_emit,
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
)
