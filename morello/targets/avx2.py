"""AVX2 with FMA: 16 vector registers of up to 32 bytes (Haswell, Zen and later).

Its rows: the vector types (spelled by ``VecType``'s own AVX2 spelling), the ISA (kernel
table ``morello.kernels.avx2``, the host flags), the ``Target`` the search prices, and
the built-in cost constants (``avx2.json``, a calibration file with its provenance).
"""
from __future__ import annotations

from pathlib import Path

from morello.costs import load
from morello.dtypes import Dtype
from morello.memory import Target
from morello.targets.isa import Isa
from morello.targets.vector import VecType

# Vector ops of one exp, priced as FMAs: the clamp and range test, the reduction (3), the
# polynomial (5 FMAs), the scale (2: a shift and a multiply).
EXP_OPS = 12

YMM = VecType(Dtype.F32, 8, "__m256", "_mm256_loadu_ps", "_mm256_storeu_ps",
              "_mm256_setzero_ps", "_mm256_set1_ps", "_mm256_fmadd_ps", "_mm256_add_ps",
              "_mm256_mul_ps", "_mm256_max_ps", exp_ops=EXP_OPS)
XMM = VecType(Dtype.F32, 4, "__m128", "_mm_loadu_ps", "_mm_storeu_ps", "_mm_setzero_ps",
              "_mm_set1_ps", "_mm_fmadd_ps", "_mm_add_ps", "_mm_mul_ps", "_mm_max_ps")

VECTOR_TYPES = (
    YMM,
    XMM,
    # Integer and bf16 vectors: one 256-bit register each.
    VecType(Dtype.BF16, 16, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256"),
    VecType(Dtype.U8, 32, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256"),
    VecType(Dtype.S16, 16, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256", add="_mm256_add_epi16"),
    VecType(Dtype.S32, 8, "__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256",
            "_mm256_setzero_si256", add="_mm256_add_epi32", max="_mm256_max_epi32"),
)

ISA = Isa("avx2", VECTOR_TYPES, "morello.kernels.avx2", host_flags=("avx2", "fma"))

# Built in: one development host's calibration (``avx2.json`` names it).
COSTS = load(Path(__file__).with_name("avx2.json"), "avx2")

TARGET = Target(
    name="avx2",
    # 16 scalar and 16 vector registers; L1d of 32 KiB (512 lines); the model may fill
    # half of a 512 KiB L2 (4096 lines), as BLAS libraries size the block of A kept there.
    capacity=(16, 16, 512, 4096, 1 << 25),
    costs=COSTS,
    vector_bytes=(16, 32),
    line_bytes=64,
    l1_ways=8,
    row_tile_sizes=(6,),
    pack_sizes=(8, 16),
    prefetch_streams=8,
    processors=1,
    cflags=("-mavx2", "-mfma"),
    # bf16 weights: WidenAxpyLoop prefetches the rows below its sweep (``cost.sweep_saving``).
    sweep_dtypes=(Dtype.BF16,),
)
