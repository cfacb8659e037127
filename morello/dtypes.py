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


def parse_dtype(name: str) -> Dtype:
    """Look up a dtype by its short name, e.g. ``"f32"``."""
    from morello.errors import SpecError

    try:
        return BY_NAME[name]
    except KeyError:
        raise SpecError(
            f"unknown dtype {name!r}; known: {', '.join(BY_NAME)}"
        ) from None
