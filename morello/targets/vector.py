"""A target's vector types, and the operations kernel emitters speak through them.

A ``VecType`` is one register type of a target for (dtype, lanes): its C type and the
intrinsics every kernel needs on it (``load``, ``store``, ``zero``, ``set1``, ``fma``,
``add``, ``mul``, ``max``: intrinsic names, None where it has none). Beyond those, an f32
vector type carries the operations the width-generic emitters use (``morello.kernels``):
expressions spelled from its intrinsic prefix (``op``, ``loadu``, ``storeu``, ``splat``),
the prelude's per-width helpers (``hreduce``, ``exp_neg``), the NaN-flag strategy of
running maxima, bf16 pairs widened into their even and odd elements, the even/odd split
of two vectors and its inverse, non-temporal stores, and the row suffix and exp price of
the stream kernels made in this width (``kernels.stream.rows``).

The base class spells AVX2 (256-bit ``__m256``, and the narrower types by their own
prefixes); a target whose vectors are spelled otherwise subclasses it and overrides
what differs (``morello.targets.avx512.Zmm``: mask registers, two-source permutes).
Emitters never branch on a width: what differs is here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from morello.dtypes import Dtype
from morello.memory import Level


@dataclass(frozen=True, slots=True)
class VecType:
    """One vector type of a target: its C type and the intrinsics kernels use on it."""

    dtype: Dtype
    lanes: int
    c_type: str
    load: str
    store: str
    zero: str
    set1: str | None = None
    fma: str | None = None
    add: str | None = None
    mul: str | None = None
    max: str | None = None
    # Names the stream kernel rows made in this width (``kernels.stream.rows``); the
    # widest-but-one type of a table has none.
    suffix: str = ""
    # One vector exp's cost in vector ops (``fma`` each; ``kernels.softmax``).
    exp_ops: int = 0

    # --- Spelled from the intrinsic prefix ---------------------------------------------

    @property
    def prefix(self) -> str:
        """The intrinsics' prefix: ``_mm256`` for ``_mm256_loadu_ps``."""
        return self.load.split("_load", 1)[0]

    @property
    def bits(self) -> int:
        return self.lanes * self.dtype.size * 8

    @property
    def int_type(self) -> str:
        """The integer vector C type of the same width (bf16 pairs, masks)."""
        return self.c_type.rstrip("di") + "i"

    @property
    def si(self) -> str:
        """The integer intrinsics' suffix of this width (``si256``)."""
        return f"si{self.bits}"

    def op(self, name: str) -> str:
        """The f32 intrinsic ``name`` of this width (``op("add")``: ``_mm256_add_ps``)."""
        return f"{self.prefix}_{name}_ps"

    def loadu(self, ptr: str) -> str:
        return f"{self.load}({ptr})"

    def storeu(self, ptr: str, value: str) -> str:
        """The statement storing ``value`` at ``ptr``."""
        return f"{self.store}({ptr}, {value});"

    def splat(self, value: str) -> str:
        return f"{self.set1}({value})"

    @property
    def zeros(self) -> str:
        return f"{self.zero}()"

    # --- Past the caches and ahead of them (x86 spelling for every width) --------------

    def prefetch(self, ptr: str, level: Level | str) -> str:
        """The statement asking the line at ``ptr`` (a C pointer expression) into
        ``level`` (or with the hint ``level`` names already, ``hint``)."""
        h = level if isinstance(level, str) else self.hint(level)
        return f"_mm_prefetch((const char *){ptr}, {h});"

    @staticmethod
    def hint(level: Level) -> str:
        """The prefetch hint that asks a line into ``level`` (L1 or L2)."""
        return {Level.L1: "_MM_HINT_T0", Level.L2: "_MM_HINT_T1"}[level]

    # Completes the non-temporal stores before it (``Kernel.nontemporal``).
    fence: ClassVar[str] = "_mm_sfence();"

    def stream_store(self, ptr: str, value: str) -> str:
        """The statement storing ``value`` at ``ptr`` past the caches (aligned)."""
        return f"{self.op('stream')}({ptr}, {value});"

    # --- The prelude's per-width helpers (``codegen/partials/prelude.c``) --------------

    def hreduce(self, op: str) -> str:
        """The prelude's horizontal ``op`` ("sum", "max") of one vector."""
        return f"morello_h{op}{self.lanes}"

    @property
    def exp_neg(self) -> str:
        return f"morello_exp{self.lanes}_neg"

    # --- bf16 pairs: each 32-bit lane of loaded bf16 holds an even and an odd element ---

    def load_bits(self, ptr: str) -> str:
        """A vector of raw bits (bf16 pairs, bytes) loaded from ``ptr``."""
        return f"{self.prefix}_loadu_{self.si}((const {self.int_type} *)({ptr}))"

    def hi_mask(self, name: str = "hi") -> str:
        """The declaration of the mask of each lane's high half (``widen_odd``)."""
        return f"const {self.int_type} {name} = {self.prefix}_set1_epi32((int)0xFFFF0000u);"

    def widen_even(self, w: str) -> str:
        """The even bf16 elements of bits ``w`` as f32: each lane shifted left by 16."""
        p = self.prefix
        return f"{p}_cast{self.si}_ps({p}_slli_epi32({w}, 16))"

    def widen_odd(self, w: str, hi: str = "hi") -> str:
        """The odd bf16 elements of bits ``w`` as f32: each lane's low half masked off."""
        p = self.prefix
        return f"{p}_cast{self.si}_ps({p}_and_{self.si}({w}, {hi}))"

    # --- The even/odd split of two vectors and its inverse -----------------------------

    # Whether two vectors' lanes can be picked by an index vector in one op (AVX-512's
    # vpermt2ps); kernels with a schedule for either choose by it.
    permutes_two: ClassVar[bool] = False

    def split_setup(self) -> tuple[str, ...]:
        """Declarations ``even`` and ``odd`` need (index vectors), before their loops."""
        return ()

    def even(self, l: str, h: str) -> str:
        """The even elements of the ``2 * lanes`` in ``l`` then ``h``, in order."""
        return self._split(l, h, "0x88")

    def odd(self, l: str, h: str) -> str:
        return self._split(l, h, "0xDD")

    def _split(self, l: str, h: str, imm: str) -> str:
        p = self.prefix
        return (f"{p}_castpd_ps({p}_permute4x64_pd({p}_castps_pd("
                f"{p}_shuffle_ps({l}, {h}, {imm})), 0xD8))")

    def interleave_setup(self) -> tuple[str, ...]:
        """Declarations ``interleave`` needs (index vectors)."""
        return ()

    def interleave(self, l: str, h: str, half: int) -> str:
        """Half ``half`` (0, 1) of the even/odd interleaving whose unpacked halves are
        ``l = unpacklo(e, o)`` and ``h = unpackhi(e, o)``: per 128-bit lane they hold the
        elements in order, so each half is a lane permute of the two."""
        return f"{self.prefix}_permute2f128_ps({l}, {h}, {('0x20', '0x31')[half]})"

    # --- NaN in running maxima ---------------------------------------------------------
    # ``max_ps(a, b)`` returns b where either is NaN, so a running vector maximum drops a
    # NaN of one side or the other: the maxima carry a flag that stays set in any lane
    # that has seen a NaN. Here a vector, all ones where set, merged by a chain of or.

    def nan_flag_init(self, f: str) -> str:
        """The declaration of a clear flag ``f``."""
        return f"{self.c_type} {f} = {self.zeros};"

    def nan_flag_step(self, f: str, *xs: str) -> str:
        """The statement that sets flag ``f`` where any of the vectors ``xs`` (names) is
        NaN: per two vectors one "unordered" compare."""
        terms = [f"{self.op('cmp')}({x}, {y}, _CMP_UNORD_Q)" for x, y in pairs(xs)]
        while len(terms) > 1:
            terms = [f"{self.op('or')}({terms[0]}, {terms[1]})"] + terms[2:]
        return f"{f} = {self.op('or')}({f}, {terms[0]});"

    def nan_flag_set(self, f: str) -> str:
        """A C condition: some lane of flag ``f`` is set."""
        return f"{self.op('movemask')}({f})"

    def nan_flag_apply(self, f: str, x: str) -> str:
        """The vector ``x`` with NaN in the lanes flag ``f`` has set."""
        return f"{self.op('or')}({x}, {f})"

    def fmax(self, a: str, b: str) -> str:
        """The lanes' maxima of vectors ``a`` and ``b``, NaN ignored (np.fmax): two ops more
        than ``max_ps``."""
        return (f"{self.op('blendv')}({self.op('max')}({b}, {a}), {b}, "
                f"{self.op('cmp')}({a}, {a}, _CMP_UNORD_Q))")

    def max_nan(self, a: str, b: str) -> str:
        """The lanes' maxima of vectors ``a`` and ``b``, NaN where either is (as numpy's
        maximum): two ops more than ``max_ps``."""
        return (f"{self.op('or')}({self.op('max')}({b}, {a}), "
                f"{self.op('cmp')}({a}, {b}, _CMP_UNORD_Q))")


def pairs(xs: tuple[str, ...]) -> list[tuple[str, str]]:
    """``xs`` two by two, the last alone paired with itself."""
    return [(xs[i], xs[min(i + 1, len(xs) - 1)]) for i in range(0, len(xs), 2)]
