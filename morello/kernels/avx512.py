"""The AVX-512 kernel table: AVX2's rows, the width-generic families again in 16-lane
vectors (``morello.targets.avx512.ZMM``: stream kernels, bf16 dot products and axpy rows,
names ending in 16), and its one new kernel, VNNI's byte dot products.

The register-tile kernels emit through the target's vector types, so a Move into VRF may
take 64-byte vectors here (``rewrites.move`` picks the widest vector that tiles the row)
and the 32 zmm registers hold larger register tiles. The search picks per Spec between
widths (16 lanes for long rows; 8 where a row of 8 would be a scalar tail in 16-lane
code). Exact u8 x s8 -> s32 matmuls multiply four bytes at a time into s32 (vpdpbusd, in
256-bit vectors: ``DpbusdLoop``) instead of widening to s16 for vpmaddwd.
"""
from __future__ import annotations

from morello.dtypes import Dtype
from morello.kernels import avx2, axpy, dots, softmax, stream
from morello.kernels.base import MEM, VRF, Kernel, KernelTable, Reason
from morello.kernels.int8 import quad_loop_emit, quad_tile_check, quad_tile_cost
from morello.memory import Target
from morello.specs import PrimKind, Spec
from morello.targets.avx512 import VECTOR_TYPES, ZMM

__all__ = ["BY_NAME", "TABLE", "VECTOR_TYPES"]


def _dpbusd_check(spec: Spec, target: Target) -> Reason:
    # Beyond accumulators and rhs vectors: the broadcast and one to spare.
    return quad_tile_check(spec, target, 32, 2)


def _dpbusd_emit(w, spec, ops, vt) -> None:
    quad_loop_emit(w, spec, ops, lambda x, b, c: f"morello_dpbusd8({c}, {x}, {b})")


def _dpbusd_cost(s: Spec, t: Target) -> int:
    # One vpdpbusd (an FMA's port and latency) per 32 multiply-adds.
    return quad_tile_cost(s, t, t.costs.fma)


DPBUSD = Kernel(
    "DpbusdLoop", PrimKind.MATMUL_ACCUM, _dpbusd_check, _dpbusd_cost, 2, _dpbusd_emit,
    "out (s32 vectors) += u8 rows times s8 quads of rows, all of k (vpdpbusd: four exact "
    "products summed into each s32, wrapping as numpy's int32 does)", unit_dims=(0,),
    needs_vrf=True, levels=(MEM, MEM, VRF), dtypes=((Dtype.U8,), (Dtype.S8,), (Dtype.S32,)))

TABLE = KernelTable("avx512", (*avx2.KERNELS, *stream.rows(ZMM), *softmax.rows(ZMM),
                               *dots.wide_rows(ZMM),
                               *axpy.rows(ZMM, vrf_regs=8), DPBUSD), VECTOR_TYPES)
BY_NAME = TABLE.by_name
