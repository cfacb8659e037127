"""AVX-512: the AVX2 kernel table, with 16-lane f32 vectors and 32 vector registers.

The register-tile kernels (``BroadcastVecMultAdd``, ``VectorAssign``, ``VectorFill``) emit
through the target's vector types, so a Move into VRF may take 64-byte vectors here
(``rewrites.move`` picks the widest vector that tiles the row) and the 32 zmm registers
hold larger register tiles. The memory-bound kinds have their AVX2 kernels and the same
in 16 lanes (``morello.kernels.stream``, names ending in 16): the search picks per Spec
(16 lanes for long rows; 8 where a row of 8 would be a scalar tail in 16-lane code).
Host support: ``morello.memory.host_lacks``.
"""
from __future__ import annotations

from morello.dtypes import Dtype
from morello.kernels import stream
from morello.kernels.avx2 import KERNELS, VECTOR_TYPES
from morello.kernels.base import KernelTable, VecType

VECTOR_TYPES_512 = (
    VecType(Dtype.F32, 16, "__m512", "_mm512_loadu_ps", "_mm512_storeu_ps",
            "_mm512_setzero_ps", "_mm512_set1_ps", "_mm512_fmadd_ps", "_mm512_add_ps",
            "_mm512_mul_ps", "_mm512_max_ps"),
    *VECTOR_TYPES,
)

TABLE = KernelTable("avx512", (*KERNELS, *stream.rows(stream.AVX512)), VECTOR_TYPES_512)
BY_NAME = TABLE.by_name
