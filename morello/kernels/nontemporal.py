"""Stores past the caches, for problems larger than the last-level cache
(``Target.in_dram``): a buffer copied out, and elementwise ops and softmax's division
stored as computed. The emitter fences them (``Kernel.nontemporal``).
"""
from __future__ import annotations

from morello.cost import (
    move_cost,
    run_bytes,
    run_cost,
)
from morello.kernels import softmax, stream
from morello.kernels.base import (
    F32,
    L1,
    RL,
    Kernel,
    Reason,
    io_cost,
    same_contiguous_f32,
)
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec


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
    mid-line), is merged in main memory, which is slow (docs/model-notes.md). The emitter
    fences the stores (``Kernel.nontemporal``)."""
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
    return softmax.div_into_check(spec, target)


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




ROWS: tuple[Kernel, ...] = (
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
)
