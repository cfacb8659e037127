"""Kernels of the softmax family, in one f32 vector type or another (``rows(vt)``): the
exps of a row against its maximum (summed, stored, normalized, or merged online into a
running maximum and denominator) and the division by the denominator.
"""
from __future__ import annotations

from morello.kernels.base import (
    L1,
    RL,
    Kernel,
    Reason,
    all_f32,
    io_cost,
    rf_or_l1,
    same_contiguous_f32,
)
from morello.kernels.stream import (
    in_l1,
    next_tile,
    offset_ptr,
    pass_cost,
    prefetch_lines,
    scalar_and_row_check,
    stream_emit,
)
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec
from morello.targets.vector import VecType

SCALAR_EXP_OPS = 13  # morello_expf of a tail element, in scalar ops


# --- The softmax family: SoftmaxDenomAccum, SoftmaxComplete ----------------------------
#
# ``morello_exp8_neg`` / ``morello_exp16_neg`` (vectors; the kernels' inputs are
# x - max <= 0, so they have no branch and results below 9.3e-39 are 0) and
# ``morello_expf`` (tails), in codegen/partials/prelude.c: range reduction and a
# degree-5 polynomial, the same steps in either width. Measured against exp in double
# precision over every f32 bit pattern in [-104, 89] (``tests/test_softmax.py`` checks a
# sample): max relative error 1.79e-7 over normal results (numpy's float32 exp: 2.1e-7;
# degree 6, one FMA more: 7.7e-8), subnormal results within that and half their ulp (1.53
# ulps at most); inf above 88.72, 0 below -103.97, NaN propagates.

def _row_stats_check(spec: Spec, target: Target, n_stats: int) -> Reason:
    """src (and dst) contiguous rows in L1; the ``n_stats`` per-row scalars (max, denom)
    scalars in RF or L1."""
    ops = spec.operands
    stats = ops[1:1 + n_stats]
    if any(t.volume != 1 or not rf_or_l1(t) for t in stats):
        return "max and denom must be scalars in RF or L1 (rows tiled to one)"
    rows = [ops[0]] + list(ops[1 + n_stats:])
    if reason := in_l1(*rows):
        return reason
    for t in rows[1:]:
        if reason := same_contiguous_f32(rows[0], t):
            return reason
    if not rows[0].contiguous:
        return "src is not contiguous"
    return all_f32(spec)


def _exp_sum_loop(w, v: VecType, src, mx, n: int, store: str | None, fold: str,
                  den: str) -> None:
    """``den fold sum(exp(src - max))`` over a contiguous row of ``n``, with two vector
    accumulators; with ``store``, each exp is also written there (a local pointer)."""
    lanes = v.lanes
    n2, n1 = n // (2 * lanes) * 2 * lanes, n // lanes * lanes
    w.line(f"const float *restrict p0 = {src.ptr(0)};")
    nxt = next_tile(w, src, "p0") if n2 > 2 * lanes else None
    w.line(f"const float m = {mx.lval()};")
    w.line("float r = 0.0f;")
    if n1:
        w.line(f"const {v.c_type} mv = {v.splat('m')};")
        w.line(f"{v.c_type} acc0 = {v.zeros}, acc1 = {v.zeros};")

        def step(acc: str, off: int | str) -> None:
            e = f"{v.exp_neg}({v.op('sub')}({v.loadu(offset_ptr('p0', off))}, mv))"
            if store is None:
                w.line(f"{acc} = {v.op('add')}({acc}, {e});")
            else:
                w.line(f"{{ {v.c_type} e = {e}; {v.storeu(offset_ptr(store, off), 'e')} "
                       f"{acc} = {v.op('add')}({acc}, e); }}")
        if n2 > 2 * lanes:
            with w.block(f"for (long q = 0; q < {n2}; q += {2 * lanes}) {{"):
                prefetch_lines(w, nxt, "q", 2 * lanes)
                step("acc0", "q")
                step("acc1", f"q + {lanes}")
        elif n2:
            step("acc0", 0)
            step("acc1", lanes)
        if n1 > n2:
            step("acc0", n2)
        w.line(f"r = {v.hreduce('sum')}({v.op('add')}(acc0, acc1));")
    if n > n1:
        with w.block(f"for (long q = {n1}; q < {n}; q++) {{"):
            w.line("const float e = morello_expf(p0[q] - m);")
            if store is not None:
                w.line(f"{store}[q] = e;")
            w.line("r += e;")
    w.line(f"{den} {fold} r;")


def _exp_sum_emit(v: VecType):
    def emit(w, spec, ops, vt) -> None:
        src, mx, den = ops
        with w.block("{"):
            _exp_sum_loop(w, v, src, mx, src.spec.volume, None, "+=", den.lval())
    return emit


def _exp_sum_cost(v: VecType):
    def cost(s: Spec, t: Target) -> int:
        n = s.operands[0].volume
        return (pass_cost(n, t, 1, v.exp_ops + 2, SCALAR_EXP_OPS + 2, v.lanes)
                + (t.costs.hsum if n >= v.lanes else 0) + io_cost(s, t))
    return cost


def _exp_normalize_emit(v: VecType):
    def emit(w, spec, ops, vt) -> None:
        src, mx, den, dst = ops
        n = spec.volume
        with w.block("{"):
            w.line(f"const float *restrict p0 = {src.ptr(0)};")
            w.line(f"float *restrict p3 = {dst.ptr(0)};")
            w.line(f"const float m = {mx.lval()}, inv = 1.0f / {den.lval()};")
            if n >= v.lanes:
                w.line(f"const {v.c_type} mv = {v.splat('m')}, iv = {v.splat('inv')};")
            stream_emit(w, v, n, ["p0"], "p3",
                         lambda x: f"{v.op('mul')}({v.exp_neg}({v.op('sub')}({x[0]}, mv)), iv)",
                         lambda x: f"morello_expf({x[0]} - m) * inv",
                         (src, "p0"))
    return emit


def _exp_normalize_cost(v: VecType):
    return lambda s, t: (pass_cost(s.volume, t, 2, v.exp_ops + 2, SCALAR_EXP_OPS + 2, v.lanes)
                         + t.costs.scalar_op + io_cost(s, t))


def _exp_row_emit(v: VecType):
    def emit(w, spec, ops, vt) -> None:
        src, mx, dst = ops
        with w.block("{"):
            w.line(f"const float *restrict p0 = {src.ptr(0)};")
            w.line(f"float *restrict p2 = {dst.ptr(0)};")
            w.line(f"const float m = {mx.lval()};")
            if spec.volume >= v.lanes:
                w.line(f"const {v.c_type} mv = {v.splat('m')};")
            stream_emit(w, v, spec.volume, ["p0"], "p2",
                         lambda x: f"{v.exp_neg}({v.op('sub')}({x[0]}, mv))",
                         lambda x: f"morello_expf({x[0]} - m)",
                         (src, "p0"))
    return emit


def _exp_row_cost(v: VecType):
    return lambda s, t: (pass_cost(s.volume, t, 2, v.exp_ops + 1, SCALAR_EXP_OPS + 1, v.lanes)
                         + io_cost(s, t))


def _unscaled_check(spec: Spec, target: Target) -> Reason:
    """src and dst contiguous f32 rows in L1; max and denom scalars in RF or L1."""
    src, mx, dst, den = spec.operands
    if any(t.volume != 1 or not rf_or_l1(t) for t in (mx, den)):
        return "max and denom must be scalars in RF or L1 (rows tiled to one)"
    if reason := in_l1(src, dst):
        return reason
    if reason := same_contiguous_f32(src, dst):
        return reason
    if not src.contiguous:
        return "src is not contiguous"
    return all_f32(spec)


def _unscaled_emit(v: VecType, accumulate: bool):
    def emit(w, spec, ops, vt) -> None:
        src, mx, dst, den = ops
        with w.block("{"):
            w.line(f"float *restrict p2 = {dst.ptr(0)};")
            _exp_sum_loop(w, v, src, mx, spec.volume, "p2", "+=" if accumulate else "=",
                          den.lval())
    return emit


def _unscaled_cost(v: VecType):
    def cost(s: Spec, t: Target) -> int:
        n = s.volume
        return (pass_cost(n, t, 2, v.exp_ops + 2, SCALAR_EXP_OPS + 2, v.lanes)
                + (t.costs.hsum if n >= v.lanes else 0) + io_cost(s, t))
    return cost


def _online_check(spec: Spec, target: Target) -> Reason:
    return _row_stats_check(spec, target, 2)


def _online_emit(v: VecType):
    """The online merge of one row: its max by a vector max, then the sum of exps
    against the new max; the old sum rescaled by exp(old max - new max)."""
    lanes = v.lanes

    def emit(w, spec, ops, vt) -> None:
        src, mx, den = ops
        n = spec.volume
        n1 = n // lanes * lanes
        with w.block("{"):
            w.line(f"const float *restrict p0 = {src.ptr(0)};")
            w.line(f"const float mo = {mx.lval()};")
            w.line("float t = p0[0];")
            if n1:
                w.line(f"{v.c_type} a0 = {v.loadu('p0')};")
                if n1 > lanes:
                    with w.block(f"for (long q = {lanes}; q < {n1}; q += {lanes}) {{"):
                        w.line(f"a0 = {v.op('max')}(a0, {v.loadu('p0 + q')});")
                w.line(f"t = {v.hreduce('max')}(a0);")
            if n > n1:
                with w.block(f"for (long q = {n1}; q < {n}; q++) {{"):
                    w.line("t = p0[q] > t ? p0[q] : t;")
            w.line("const float m = t > mo ? t : mo;")
            w.line("float r = 0.0f;")
            if n1:
                w.line(f"const {v.c_type} mv = {v.splat('m')};")
                w.line(f"{v.c_type} acc0 = {v.zeros};")
                with w.block(f"for (long q = 0; q < {n1}; q += {lanes}) {{"):
                    w.line(f"acc0 = {v.op('add')}(acc0, {v.exp_neg}({v.op('sub')}("
                           f"{v.loadu('p0 + q')}, mv)));")
                w.line(f"r = {v.hreduce('sum')}(acc0);")
            if n > n1:
                with w.block(f"for (long q = {n1}; q < {n}; q++) {{"):
                    w.line("r += morello_expf(p0[q] - m);")
            w.line(f"{den.lval()} = {den.lval()} * morello_expf(mo - m) + r;")
            w.line(f"{mx.lval()} = m;")

    return emit


def _online_cost(v: VecType):
    def cost(s: Spec, t: Target) -> int:
        n = s.operands[0].volume
        return (pass_cost(n, t, 2, v.exp_ops + 3, SCALAR_EXP_OPS + 3, v.lanes) + 2 * t.costs.hsum
                + SCALAR_EXP_OPS * t.costs.scalar_op + io_cost(s, t))
    return cost


def _div_scalar_emit(v: VecType):
    """DivReduced (``denom, dst``: in place) and DivReducedInto (``denom, src, dst``)."""
    def emit(w, spec, ops, vt) -> None:
        den, src, dst = ops[0], ops[1], ops[-1]
        in_place = len(ops) == 2
        with w.block("{"):
            w.line(f"{'' if in_place else 'const '}float *restrict p1 = {src.ptr(0)};")
            if not in_place:
                w.line(f"float *restrict p2 = {dst.ptr(0)};")
            w.line(f"const float inv = 1.0f / {den.lval()};")
            if spec.volume >= v.lanes:
                w.line(f"const {v.c_type} iv = {v.splat('inv')};")
            stream_emit(w, v, spec.volume, ["p1"], "p1" if in_place else "p2",
                         lambda x: f"{v.op('mul')}({x[0]}, iv)", lambda x: f"{x[0]} * inv")
    return emit


def div_into_check(spec: Spec, target: Target) -> Reason:
    """DivReducedInto's operands: a scalar denom, src and dst contiguous rows of one
    layout (dst in L1 here; ``VectorDivScalarStream`` takes it in main memory)."""
    if reason := scalar_and_row_check(spec, 0, 1):
        return reason
    src, dst = spec.operands[1:]
    if not dst.contiguous or dst.layout != src.layout:
        return "dst must be contiguous, of src's layout"
    return None


def _div_into_l1_check(spec: Spec, target: Target) -> Reason:
    if reason := div_into_check(spec, target):
        return reason
    return None if spec.operands[2].level is Level.L1 else "dst must be in L1"


def rows(v: VecType) -> tuple[Kernel, ...]:
    """The softmax family's kernels in vector type ``v``, in their fixed order (names end
    in ``v.suffix``)."""
    sfx = v.suffix
    return (
        Kernel(f"VectorExpSum{sfx}", PrimKind.SOFTMAX_DENOM_ACCUM,
               lambda s, t: _row_stats_check(s, t, 2), _exp_sum_cost(v), 5, _exp_sum_emit(v),
               "denom += sum of exp(src - max) over a contiguous L1 row (two vector sums)",
               levels=(L1, RL, RL)),
        Kernel(f"VectorExpNormalize{sfx}", PrimKind.SOFTMAX_COMPLETE,
               lambda s, t: _row_stats_check(s, t, 2), _exp_normalize_cost(v), 4,
               _exp_normalize_emit(v), "dst = exp(src - max) / denom over contiguous L1 rows",
               levels=(L1, RL, RL, L1)),
        Kernel(f"VectorExp{sfx}", PrimKind.SOFTMAX_EXP, lambda s, t: _row_stats_check(s, t, 1),
               _exp_row_cost(v), 2, _exp_row_emit(v),
               "dst = exp(src - max) over contiguous L1 rows", levels=(L1, RL, L1)),
        Kernel(f"VectorOnlineDenomMax{sfx}", PrimKind.SOFTMAX_DENOM_MAX_ACCUM, _online_check,
               _online_cost(v), 3, _online_emit(v),
               "online softmax merge of a contiguous L1 row into scalar max and denom",
               levels=(L1, RL, RL)),
        Kernel(f"VectorExpStoreSum{sfx}", PrimKind.SOFTMAX_UNSCALED, _unscaled_check,
               _unscaled_cost(v), 3, _unscaled_emit(v, False),
               "dst = exp(src - max) over a contiguous L1 row, denom = its sum",
               levels=(L1, RL, L1, RL)),
        Kernel(f"VectorExpStoreSumAccum{sfx}", PrimKind.SOFTMAX_UNSCALED_ACCUM, _unscaled_check,
               _unscaled_cost(v), 3, _unscaled_emit(v, True),
               "dst = exp(src - max) over a contiguous L1 row, denom += its sum",
               levels=(L1, RL, L1, RL)),
        Kernel(f"VectorDivScalar{sfx}", PrimKind.DIV_REDUCED,
               lambda s, t: scalar_and_row_check(s, 0, 1),
               lambda s, t: (pass_cost(s.volume, t, 2, 1, lanes=v.lanes) + t.costs.scalar_op
                             + io_cost(s, t)), 1,
               _div_scalar_emit(v), "dst *= 1 / denom over a contiguous L1 row", levels=(RL, L1)),
        Kernel(f"VectorDivScalarInto{sfx}", PrimKind.DIV_REDUCED_INTO,
               _div_into_l1_check,
               lambda s, t: (pass_cost(s.volume, t, 2, 1, lanes=v.lanes) + t.costs.scalar_op
                             + io_cost(s, t)), 1,
               _div_scalar_emit(v), "dst = src * (1 / denom), contiguous L1 rows",
               levels=(RL, L1, L1)),
    )
