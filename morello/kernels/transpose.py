"""Transposes: an element at a time, and 8x8 f32 blocks through eight vector registers
(a conv lowering's NHWC <-> NCHW copies, ``morello.rewrites.conv``).
"""
from __future__ import annotations

from morello.kernels.base import F32, L1, RL, Kernel, Reason, io_cost, scalar_check
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec

# The block of ``Transpose8x8``: eight rows of eight f32 lanes.
BLOCK = 8
# Its register work: 8 loads, 8 stores and the 24 shuffles of three interleaving rounds,
# with up to two rounds' 16 registers live.
BLOCK_OPS = 16 + 24
BLOCK_REGS = 16



def _scalar_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    w.line(f"{dst.lval()} = {src.lval()};")


def _block_check(spec: Spec, target: Target) -> Reason:
    if spec.shape != (1, BLOCK, BLOCK):
        return f"needs [1, {BLOCK}, {BLOCK}]"
    for t in spec.operands:
        if t.level is not Level.L1 or t.contig < 1 or t.stream_dim != 2:
            return "both operands' rows must be contiguous in L1"
    return None


def _block_emit(w, spec, ops, vt) -> None:
    src, dst = ops
    with w.block("{"):
        for r in range(BLOCK):
            at = src.ptr_at((0, r, 0)) if r else src.ptr(0)
            w.line(f"const __m256 xr{r} = _mm256_loadu_ps({at});")
        # Pairs of rows interleaved, then pairs of pairs, then the 128-bit halves.
        for j in range(0, BLOCK, 2):
            w.line(f"const __m256 xt{j} = _mm256_unpacklo_ps(xr{j}, xr{j + 1}), "
                   f"xt{j + 1} = _mm256_unpackhi_ps(xr{j}, xr{j + 1});")
        for j in (0, 4):
            for h in (0, 1):
                a, b = f"xt{j + h}", f"xt{j + h + 2}"
                w.line(f"const __m256 xu{j + 2 * h} = _mm256_shuffle_ps({a}, {b}, 0x44), "
                       f"xu{j + 2 * h + 1} = _mm256_shuffle_ps({a}, {b}, 0xEE);")
        for c in range(BLOCK):
            lo, sel = c % 4, "0x20" if c < 4 else "0x31"
            at = dst.ptr_at((0, c, 0)) if c else dst.ptr(0)
            w.line(f"_mm256_storeu_ps({at}, _mm256_permute2f128_ps(xu{lo}, xu{lo + 4}, {sel}));")


ROWS: tuple[Kernel, ...] = (
    Kernel("TransposeAssign", PrimKind.TRANSPOSE, scalar_check,
           lambda s, t: t.costs.scalar_op + io_cost(s, t), 0, _scalar_emit,
           "one element copied", scalar=True, levels=(RL, RL)),
    Kernel("Transpose8x8", PrimKind.TRANSPOSE, _block_check,
           lambda s, t: BLOCK_OPS * t.costs.vector_move + io_cost(s, t), BLOCK_REGS,
           _block_emit,
           "an 8x8 f32 block transposed in vector registers (unpack, shuffle, permute)",
           levels=(L1, L1), dtypes=(F32, F32)),
)
