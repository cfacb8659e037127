"""A channels-last depthwise conv's register tiles (``PrimKind.TAPS_ACCUM``): pixels by
channel vectors, every tap of every pixel summed in the tile's registers.

``TapsLoop`` keeps an ``m x n`` output tile in vector registers (``n`` along the channels)
and, for each tap, loads that tap's weights (one vector per ``n / lanes``) and multiplies
them into each pixel's accumulators with the pixel's input vector read from memory (a
folded load). ``TapsSlide`` (stride 1) holds a filter row's weights instead and loads
each input vector of the row once: pixel ``i``'s tap ``q`` is pixel ``i + 1``'s tap
``q - 1``, so ``m + kw - 1`` loads serve ``m * kw`` multiply-adds, where ``TapsLoop``
makes one load per multiply-add. Output pixels stay in registers across all of ``kh x
kw``: one load and one store of the tile for ``kh * kw`` multiply-adds each, where a
matmul over one filter row at a time would store and reload it per row.
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
    scalar_check,
)
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec

# Vectors per output pixel, in two rows: up to 2 beside 2 weight vectors (AVX2's 16
# registers: 6 pixels x 2), and 3 or 4 (AVX-512's 32: 6 x 4 beside 4).
TAP_VECTORS = {"TapsLoop": (1, 2), "TapsLoopWide": (3, 4)}
# Vectors per pixel of ``TapsSlide`` (its registers are checked per Spec: the tile, a
# filter row's weights and one x vector per output vector).
SLIDE_VECTORS = 4
# Where the windows may be read from: the lowering holds a row's windows in L2 (or L1)
# and the loads hit L1 after the first tap touches a line (``rewrites.depthwise``).
X_LEVELS = (Level.L1, Level.L2)



def _scalar_emit(w, spec, ops, vt) -> None:
    x, wt, out = ops
    w.line(f"{out.lval()} += {x.lval()} * {wt.lval()};")


def _loop_check(vectors: tuple[int, int]):
    return lambda spec, target: _loop_why_not(spec, vectors)


def _loop_why_not(spec: Spec, vectors: tuple[int, int]) -> Reason:
    x, wt, out = spec.operands
    m, kh, kw, n = spec.shape
    if out.level is not Level.VRF or out.vector_size is None or n % out.vector_size:
        return "out must be a VRF tile whose rows are whole vectors"
    vs = out.vector_size
    if not vectors[0] <= n // vs <= vectors[1]:
        return f"needs {vectors[0]} to {vectors[1]} vectors per pixel"
    if reason := all_f32(spec):
        return reason
    # Each pixel's channels of a tap are contiguous in x and w.
    for t, run in ((x, (1, 1, 1, n)), (wt, (1, 1, n))):
        if t.layout.is_packed or t.stream_dim != len(run) - 1:
            return "x and w must be contiguous along the channels"
        if not t.valid_tile_shape(run) or not t.tile(run).contiguous:
            return "x and w must be contiguous along the channels"
    if any(out.layout.offset(out.shape, (i, 0)) % vs for i in range(m)):
        return "rows of out must start at a vector"
    return None


def _loop_cost(s: Spec, t: Target) -> int:
    """Per tap: ``m * nv`` FMAs against ``m * nv`` loads of x and ``nv`` of w."""
    m, kh, kw, n = s.shape
    nv = n // lane_count(s.operands[2])
    return fma_loop_cost(t, kh * kw, m * nv, m * nv + nv)


def _vectors(spec: Spec, out, vt):
    """``(lanes, vector type, vectors per pixel)`` of a tile whose output is ``out``."""
    vs = lane_count(out.spec)
    return vs, vt(Dtype.F32, vs), spec.shape[3] // vs


def _loop_emit(w, spec, ops, vt) -> None:
    from morello.codegen.affine import Affine, Var

    x, wt, out = ops
    m, kh, kw, n = spec.shape
    vs, v, nv = _vectors(spec, out, vt)
    p = Affine.var(Var("p", kh))
    q = Affine.var(Var("q", kw))
    with w.block(f"for (long p = 0; p < {kh}; p++) {{"), \
            w.block(f"for (long q = 0; q < {kw}; q++) {{"):
        for j in range(nv):
            w.line(f"const {v.c_type} w{j} = {v.load}({wt.at((p, q, j * vs)).ptr(0)});")
        for i in range(m):
            row = out.at((i, 0))
            for j in range(nv):
                at = x.at((i, p, q, j * vs)).ptr(0)
                w.line(f"{row.vec(j)} = {v.fma}({v.load}({at}), w{j}, {row.vec(j)});")


def _slide_why_not(spec: Spec, target: Target) -> Reason:
    """TapsSlide: ``TapsLoop``'s conditions, a stride of 1 (pixel ``i``'s tap ``q`` is
    pixel ``i + 1``'s tap ``q - 1``) and the registers for the tile, a filter row's
    weights and a vector of x per output vector."""
    if spec.params[0] != 1:
        return "needs stride 1"
    x, wt, out = spec.operands
    m, kh, kw, n = spec.shape
    if reason := _loop_why_not(spec, (1, SLIDE_VECTORS)):
        return reason
    nv = n // lane_count(out)
    if m * nv + (kw + 1) * nv > target.capacity[Level.VRF]:
        return f"needs {m * nv + (kw + 1) * nv} vector registers"
    return None


def _slide_cost(s: Spec, t: Target) -> int:
    """Per filter row: ``m * kw * nv`` FMAs against ``(m + kw - 1) * nv`` loads of x
    (each input vector once, for every pixel and tap that reads it) and ``kw * nv`` of w,
    ``kw`` dependent FMAs per accumulator."""
    m, kh, kw, n = s.shape
    nv = n // lane_count(s.operands[2])
    return fma_loop_cost(t, kh, m * kw * nv, (m + 2 * kw - 1) * nv, latency=kw)


def _slide_emit(w, spec, ops, vt) -> None:
    from morello.codegen.affine import Affine, Var

    x, wt, out = ops
    m, kh, kw, n = spec.shape
    vs, v, nv = _vectors(spec, out, vt)
    p = Affine.var(Var("p", kh))
    with w.block(f"for (long p = 0; p < {kh}; p++) {{"):
        for q in range(kw):
            for j in range(nv):
                w.line(f"const {v.c_type} w{q}_{j} = {v.load}({wt.at((p, q, j * vs)).ptr(0)});")
        # Input column ``col`` of the row is pixel i's tap col - i for every i that reads it.
        for col in range(m + kw - 1):
            i = min(col, m - 1)
            with w.block("{"):
                for j in range(nv):
                    at = x.at((i, p, col - i, j * vs)).ptr(0)
                    w.line(f"const {v.c_type} x{j} = {v.load}({at});")
                for q in range(kw):
                    if 0 <= col - q < m:
                        row = out.at((col - q, 0))
                        for j in range(nv):
                            w.line(f"{row.vec(j)} = {v.fma}(x{j}, w{q}_{j}, {row.vec(j)});")


ROWS: tuple[Kernel, ...] = (
    Kernel("TapMultAdd", PrimKind.TAPS_ACCUM, scalar_check,
           lambda s, t: t.costs.scalar_op + io_cost(s, t), 0, _scalar_emit,
           "out += x * w on scalars", scalar=True, levels=(RL, RL, RL)),
    *(Kernel(name, PrimKind.TAPS_ACCUM, _loop_check(vectors), _loop_cost, vectors[1],
             _loop_emit,
             f"out (an m x n VRF tile, {vectors[0]} to {vectors[1]} vectors a pixel) += "
             "the taps of x (m x kh x kw x n, L1 or L2) times w (kh x kw x n, L1): per tap "
             "n/vs weight vectors in registers, m * n/vs FMAs with x's vectors folded in",
             needs_vrf=True, levels=(X_LEVELS, L1, VRF), dtypes=(F32, F32, F32))
      for name, vectors in TAP_VECTORS.items()),
    Kernel("TapsSlide", PrimKind.TAPS_ACCUM, _slide_why_not, _slide_cost, 4, _slide_emit,
           "TapsLoop at stride 1: per filter row, its weights in registers and each input "
           "vector loaded once, multiplied into every pixel whose window holds it",
           needs_vrf=True, levels=(X_LEVELS, L1, VRF), dtypes=(F32, F32, F32)),
)
