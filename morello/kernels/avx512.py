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

from morello.cost import move_cost
from morello.dtypes import Dtype
from morello.kernels import stream
from morello.kernels.avx2 import KERNELS, VECTOR_TYPES, quad_loop_emit, quad_rows, s32_tile
from morello.kernels.base import MEM, VRF, Kernel, KernelTable, Reason, VecType
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec

VECTOR_TYPES_512 = (
    VecType(Dtype.F32, 16, "__m512", "_mm512_loadu_ps", "_mm512_storeu_ps",
            "_mm512_setzero_ps", "_mm512_set1_ps", "_mm512_fmadd_ps", "_mm512_add_ps",
            "_mm512_mul_ps", "_mm512_max_ps"),
    *VECTOR_TYPES,
)


def _dpbusd_check(spec: Spec, target: Target) -> Reason:
    lhs, rhs, out = spec.operands
    b, m, k, n = spec.shape
    if b != 1 or k % 4 or n % 8 or n > 32:
        return "needs b = 1, k a multiple of 4, n a multiple of 8 up to 32"
    if lhs.dtype is not Dtype.U8 or rhs.dtype is not Dtype.S8 or out.dtype is not Dtype.S32:
        return "u8 x s8 -> s32 only"
    if lhs.level.counts_registers or lhs.contig < 1 or lhs.stream_dim != 2:
        return "lhs rows must be contiguous in memory"
    if rhs.level.counts_registers or not quad_rows(rhs):
        return "rhs must be in memory, in quads of rows"
    # Beyond accumulators and rhs vectors: the broadcast and one to spare.
    return s32_tile(out, m, n, 2, target)


def _dpbusd_emit(w, spec, ops, vt) -> None:
    quad_loop_emit(w, spec, ops, lambda x, b, c: f"morello_dpbusd8({c}, {x}, {b})")


def _dpbusd_cost(s: Spec, t: Target) -> int:
    m, k, n = s.shape[1], s.shape[2], s.shape[3]
    c = t.costs
    lhs, rhs = s.operands[0], s.operands[1]
    # One vpdpbusd (an FMA's port and latency) per 32 multiply-adds; operands outside
    # L1 pay their lines.
    mem = sum(move_cost(x, t) for x in (lhs, rhs) if x.level is not Level.L1)
    return ((k // 4) * (m * (n // 8) * c.fma + (n // 8) * c.vector_move + m * c.broadcast)
            + mem)


AVX512_KERNELS = (
    # Not in the reference: exact u8 x s8 there is a dot-product loop over bytes.
    Kernel("DpbusdLoop", PrimKind.MATMUL_ACCUM, _dpbusd_check, _dpbusd_cost, 2,
           _dpbusd_emit, "out (s32 vectors) += u8 rows times s8 quads of rows, all of k "
           "(vpdpbusd: four exact products summed into each s32, wrapping as numpy's "
           "int32 does)", unit_dims=(0,), needs_vrf=True, levels=(MEM, MEM, VRF)),
)

TABLE = KernelTable("avx512", (*KERNELS, *stream.rows(stream.AVX512), *AVX512_KERNELS),
                    VECTOR_TYPES_512)
BY_NAME = TABLE.by_name
