"""Element types: f32 and bf16 floats, u8, s8, s16, s32 integers.

Operands of one Spec may differ in dtype (bf16 weights, f32 activations and output). A
Spec *computes* in its output's dtype (``compute_dtype``): every input must widen into it
exactly (``widens``: bf16 → f32, u8/s8 → s16 → s32), and a Move may widen on the way
(``morello.rewrites.move``). So a bf16×f32 matmul is an f32 matmul of exactly widened
inputs, and a u8×s8 → s32 matmul is exact integer arithmetic (numpy's, in int32).

numpy interop: bf16 arrays are ``ml_dtypes.bfloat16``; the compiled callables also take
``uint16`` views of bf16 data (``accepts``). ml_dtypes is imported when a bf16 numpy dtype
is first needed (its import takes longer than the rest of morello's).
"""
from __future__ import annotations

import enum
import functools

import numpy as np


class Dtype(enum.Enum):
    """An element type: its short name, size in bytes, C type and numpy type."""

    U8 = ("u8", 1, "uint8_t", "uint8")
    S8 = ("s8", 1, "int8_t", "int8")
    S16 = ("s16", 2, "int16_t", "int16")
    S32 = ("s32", 4, "int32_t", "int32")
    BF16 = ("bf16", 2, "uint16_t", "bfloat16")
    F32 = ("f32", 4, "float", "float32")

    def __init__(self, short: str, size: int, c_type: str, np_name: str) -> None:
        self.short = short
        self.size = size
        self.c_type = c_type
        self.np_name = np_name

    @property
    def np(self) -> np.dtype:
        return _numpy(self.np_name)

    @property
    def code(self) -> int:
        """Stable integer id used in coordinates (the declaration order)."""
        return _CODES[self]

    @property
    def is_float(self) -> bool:
        return self in (Dtype.F32, Dtype.BF16)

    def __str__(self) -> str:
        return self.short


@functools.cache
def _numpy(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


_CODES = {d: i for i, d in enumerate(Dtype)}
BY_NAME = {d.short: d for d in Dtype}
# Other spellings: numpy's names and the i-prefixed integer names.
ALIASES = {"i8": Dtype.S8, "i16": Dtype.S16, "i32": Dtype.S32, "int8": Dtype.S8,
           "int16": Dtype.S16, "int32": Dtype.S32, "uint8": Dtype.U8,
           "float32": Dtype.F32, "bfloat16": Dtype.BF16}
SUPPORTED = tuple(Dtype)

# What each dtype widens into exactly (itself excluded).
_WIDER: dict[Dtype, tuple[Dtype, ...]] = {
    Dtype.BF16: (Dtype.F32,),
    Dtype.U8: (Dtype.S16, Dtype.S32),
    Dtype.S8: (Dtype.S16, Dtype.S32),
    Dtype.S16: (Dtype.S32,),
    Dtype.F32: (),
    Dtype.S32: (),
}


def widens(src: Dtype, dst: Dtype) -> bool:
    """Whether every value of ``src`` is exactly a value of ``dst`` (or they are equal)."""
    return src is dst or dst in _WIDER[src]


def wider(src: Dtype) -> tuple[Dtype, ...]:
    """The dtypes ``src`` widens into, narrowest first."""
    return _WIDER[src]


def accepts(want: np.dtype, got: np.dtype) -> bool:
    """Whether an array of dtype ``got`` may stand for an operand of dtype ``want``: the
    same dtype, or a uint16 view for bf16."""
    return got == want or (got == np.dtype(np.uint16) and want.name == "bfloat16"
                           and want == Dtype.BF16.np)


def parse_dtype(name) -> Dtype:
    """A dtype from its short name (``"f32"``, ``"bf16"``, ``"s8"``; ``"i8"`` too), a
    numpy dtype or type (``np.float32``, ``ml_dtypes.bfloat16``) or a Dtype."""
    from morello.errors import SpecError

    if isinstance(name, Dtype):
        return name
    if isinstance(name, str) and (name in BY_NAME or name in ALIASES):
        return BY_NAME.get(name) or ALIASES[name]
    try:
        npd = np.dtype(name)
    except (TypeError, ValueError, SyntaxError):
        npd = None
    found = _BY_NP_NAME.get(npd.name) if npd is not None and npd.isnative else None
    if found is not None and found.np != npd:  # e.g. another library's "bfloat16"
        found = None
    if found is None and npd is not None:
        hint = " (bf16 arrays are ml_dtypes.bfloat16)" if npd == np.uint16 else ""
        raise SpecError(f"dtype {npd} is not one of morello's: {', '.join(BY_NAME)}{hint}")
    if found is None:
        shown = repr(name) if len(repr(name)) <= 40 else repr(name)[:37] + "..."
        raise SpecError(f"unknown dtype {shown}; known: {', '.join(BY_NAME)} (or their "
                        "numpy types, e.g. numpy.float32)")
    return found


_BY_NP_NAME = {d.np_name: d for d in Dtype}
