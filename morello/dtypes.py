"""Element types. f32 is synthesized today; the others are declared for the bf16 and
u8×s8→s16 paths so coordinates and the text form are stable when they arrive."""
from __future__ import annotations

import enum

import numpy as np


class Dtype(enum.Enum):
    """An element type: its short name, size in bytes, C type and numpy type."""

    U8 = ("u8", 1, "uint8_t", "uint8")
    I8 = ("i8", 1, "int8_t", "int8")
    I16 = ("i16", 2, "int16_t", "int16")
    I32 = ("i32", 4, "int32_t", "int32")
    BF16 = ("bf16", 2, "uint16_t", "uint16")
    F32 = ("f32", 4, "float", "float32")

    def __init__(self, short: str, size: int, c_type: str, np_name: str) -> None:
        self.short = short
        self.size = size
        self.c_type = c_type
        self.np_name = np_name

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.np_name)

    @property
    def code(self) -> int:
        """Stable integer id used in coordinates."""
        return _CODES[self]

    def __str__(self) -> str:
        return self.short


_CODES = {d: i for i, d in enumerate(Dtype)}
BY_NAME = {d.short: d for d in Dtype}
SUPPORTED = (Dtype.F32,)


def parse_dtype(name) -> Dtype:
    """A dtype from its short name (``"f32"``), a numpy dtype or type (``np.float32``,
    ``"float32"``) or a Dtype."""
    from morello.errors import SpecError

    if isinstance(name, Dtype):
        return name
    if isinstance(name, str) and name in BY_NAME:
        return BY_NAME[name]
    try:
        npd = np.dtype(name)
    except (TypeError, ValueError, SyntaxError):
        npd = None
    found = _BY_NUMPY.get(npd.str) if npd is not None and npd.isnative else None
    if found is None and npd is not None:
        raise SpecError(f"dtype {npd} is not one of morello's: {', '.join(BY_NAME)}")
    if found is None:
        shown = repr(name) if len(repr(name)) <= 40 else repr(name)[:37] + "..."
        raise SpecError(f"unknown dtype {shown}; known: {', '.join(BY_NAME)} (or their "
                        "numpy types, e.g. numpy.float32)")
    return found


# numpy dtypes -> Dtype; bf16 has no numpy type of its own (uint16 means u16, not bf16).
_BY_NUMPY = {np.dtype(d.np_name).str: d for d in Dtype if d is not Dtype.BF16}
