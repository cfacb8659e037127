"""AVX-512 (F, BW, VL and VNNI: Ice Lake, Sapphire Rapids, Zen 4 and later; not
Skylake-SP): AVX2's caches and costs per vector op, 32 vector registers of up to 64 bytes.

Its rows: the 512-bit f32 vector type ``ZMM`` (spelled by ``Zmm``: mask registers for the
NaN flags, two-source permutes for the even/odd split) beside AVX2's types, the ISA
(kernel table ``morello.kernels.avx512``), the ``Target`` and its built-in constants
(``avx512.json``). Emitted anywhere; run only where the host has the flags.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from morello.costs import load
from morello.dtypes import Dtype
from morello.memory import Target
from morello.targets import avx2
from morello.targets.isa import Isa
from morello.targets.vector import VecType, pairs

# The even (odd) lanes of two vectors, in order, as vpermt2ps indices.
_EVEN = ", ".join(str(2 * i) for i in reversed(range(16)))


@dataclass(frozen=True, slots=True)
class Zmm(VecType):
    """A 512-bit vector: mask registers and two-source permutes where AVX2 shuffles."""

    permutes_two = True

    def load_bits(self, ptr: str) -> str:
        return f"_mm512_loadu_si512((const void *)({ptr}))"

    def split_setup(self) -> tuple[str, ...]:
        return (f"const __m512i ev = _mm512_set_epi32({_EVEN});",
                "const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));")

    def even(self, l: str, h: str) -> str:
        return f"_mm512_permutex2var_ps({l}, ev, {h})"

    def odd(self, l: str, h: str) -> str:
        return f"_mm512_permutex2var_ps({l}, od, {h})"

    def interleave_setup(self) -> tuple[str, ...]:
        # Unpacked halves hold columns 0-3 | 8-11 | 16-19 | 24-27 and 4-7 | ...
        return ("const __m512i lo16 = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, "
                "19, 18, 17, 16, 3, 2, 1, 0);",
                "const __m512i hi16 = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, "
                "27, 26, 25, 24, 11, 10, 9, 8);")

    def interleave(self, l: str, h: str, half: int) -> str:
        return f"_mm512_permutex2var_ps({l}, {('lo16', 'hi16')[half]}, {h})"

    # NaN flags as masks of the lanes still free of NaN: masked compares, each clearing
    # the lanes where its pair holds NaN (cheaper than compares and-ed into the flag).

    def nan_flag_init(self, f: str) -> str:
        return f"__mmask16 {f} = (__mmask16)0xFFFF;"

    def nan_flag_step(self, f: str, *xs: str) -> str:
        return " ".join(f"{f} = _mm512_mask_cmp_ps_mask({f}, {x}, {y}, _CMP_ORD_Q);"
                        for x, y in pairs(xs))

    def nan_flag_set(self, f: str) -> str:
        return f"{f} != (__mmask16)0xFFFF"

    def nan_flag_apply(self, f: str, x: str) -> str:
        return f"_mm512_mask_mov_ps({x}, (__mmask16)~{f}, _mm512_set1_ps(NAN))"

    def fmax(self, a: str, b: str) -> str:
        return (f"_mm512_mask_mov_ps(_mm512_max_ps({b}, {a}), "
                f"_mm512_cmp_ps_mask({a}, {a}, _CMP_UNORD_Q), {b})")

    def max_nan(self, a: str, b: str) -> str:
        return (f"_mm512_mask_mov_ps(_mm512_max_ps({b}, {a}), "
                f"_mm512_cmp_ps_mask({b}, {b}, _CMP_UNORD_Q), {b})")


# A 16-lane exp is priced 20/14 of an 8-lane one, not twice: its integer ops have fewer
# 512-bit ports.
ZMM = Zmm(Dtype.F32, 16, "__m512", "_mm512_loadu_ps", "_mm512_storeu_ps",
          "_mm512_setzero_ps", "_mm512_set1_ps", "_mm512_fmadd_ps", "_mm512_add_ps",
          "_mm512_mul_ps", "_mm512_max_ps", suffix="16", exp_ops=avx2.EXP_OPS * 20 // 14)

VECTOR_TYPES = (ZMM, *avx2.VECTOR_TYPES)

ISA = Isa("avx512", VECTOR_TYPES, "morello.kernels.avx512",
          host_flags=("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"))

COSTS = load(Path(__file__).with_name("avx512.json"), "avx512")

TARGET = Target(
    name="avx512",
    capacity=(16, 32, 512, 4096, 1 << 25),
    costs=COSTS,
    vector_bytes=(16, 32, 64),
    line_bytes=64,
    l1_ways=8,
    row_tile_sizes=(6, 12),
    # Panels of up to 4 zmm vectors feed the 6x64 register tile (OuterProductLoopWide).
    pack_sizes=(16, 32, 64),
    # A Matmul's B panel of 64 columns (the 6x64 register tile's width) may be viewed in
    # L2 (``KindInfo.l2_panels``): reused by every row tile of A, C kept in registers.
    l2_panel_cols=64,
    prefetch_streams=8,
    processors=1,
    cflags=("-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni"),
    isa="avx512",
    byte_dots=True,
)
