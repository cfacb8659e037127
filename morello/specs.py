"""Specs: a primitive operation over operands, with memory limits and a serial flag.

One tagged record (``Spec``) covers every primitive; per-kind behaviour lives in the
tables below. Operand shapes derive from the Spec's ``shape``:

=============  ============  ====================================  ===========
kind           shape         operands                              output
=============  ============  ====================================  ===========
MATMUL         [b, m, k, n]  lhs [b,m,k], rhs [b,k,n], out [b,m,n]  out = lhs@rhs
MATMUL_ACCUM   [b, m, k, n]  same                                  out += lhs@rhs
MOVE           shape         src, dst                              dst = src
ZERO           shape         dst                                   dst = 0
=============  ============  ====================================  ===========
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace

from morello.errors import SpecError
from morello.memory import MemoryLimits
from morello.tensorspec import TensorSpec


class PrimKind(enum.IntEnum):
    MATMUL = 0
    MATMUL_ACCUM = 1
    MOVE = 2
    ZERO = 3

    @property
    def title(self) -> str:
        return _TITLES[self]


_TITLES = {
    PrimKind.MATMUL: "Matmul",
    PrimKind.MATMUL_ACCUM: "MatmulAccum",
    PrimKind.MOVE: "Move",
    PrimKind.ZERO: "Zero",
}

# Operands that are read (In or InOut) and written (Out or InOut), per kind.
READS = {
    PrimKind.MATMUL: (0, 1),
    PrimKind.MATMUL_ACCUM: (0, 1, 2),
    PrimKind.MOVE: (0,),
    PrimKind.ZERO: (),
}
WRITES = {
    PrimKind.MATMUL: (2,),
    PrimKind.MATMUL_ACCUM: (2,),
    PrimKind.MOVE: (1,),
    PrimKind.ZERO: (0,),
}


def operand_shapes(kind: PrimKind, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    if kind in (PrimKind.MATMUL, PrimKind.MATMUL_ACCUM):
        b, m, k, n = shape
        return ((b, m, k), (b, k, n), (b, m, n))
    if kind is PrimKind.MOVE:
        return (shape, shape)
    return (shape,)


def operand_dim(kind: PrimKind, operand: int, sdim: int) -> int | None:
    """The dim of operand ``operand`` that Spec dim ``sdim`` indexes (None: it has none)."""
    if kind in (PrimKind.MATMUL, PrimKind.MATMUL_ACCUM):
        return ((0, 1, 2, None), (0, None, 1, 2), (0, 1, None, 2))[operand][sdim]
    return sdim


def output_index(kind: PrimKind) -> int:
    return WRITES[kind][0]


def shape_for_output_tile(kind: PrimKind, shape: tuple[int, ...], out: tuple[int, ...]):
    """The Spec shape whose output is ``out`` (reductions keep their full extent)."""
    if kind in (PrimKind.MATMUL, PrimKind.MATMUL_ACCUM):
        return (out[0], out[1], shape[2], out[2])
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Spec:
    """A primitive Spec. Canonical when every operand TensorSpec is canonical."""

    kind: PrimKind
    shape: tuple[int, ...]
    operands: tuple[TensorSpec, ...]
    serial_only: bool
    limits: MemoryLimits
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # Specs are dict keys in the hot path of the search: hash once.
        h = self._hash
        if not h:
            h = hash((self.kind, self.shape, self.operands, self.serial_only, self.limits))
            object.__setattr__(self, "_hash", h)
        return h

    def __reduce__(self):
        # The cached hash is per-process (str hashing is salted): never pickle it.
        return (type(self), (self.kind, self.shape, self.operands, self.serial_only, self.limits))

    def __post_init__(self) -> None:
        expected = operand_shapes(self.kind, self.shape)
        if len(expected) != len(self.operands):
            raise SpecError(f"{self.kind.title} takes {len(expected)} operands")
        for i, (o, s) in enumerate(zip(self.operands, expected)):
            if o.shape != s:
                raise SpecError(
                    f"operand {i} of {self.kind.title} has shape {o.shape}, expected {s}"
                )

    @property
    def volume(self) -> int:
        return math.prod(self.shape)

    @property
    def output(self) -> TensorSpec:
        return self.operands[output_index(self.kind)]

    @property
    def is_canonical(self) -> bool:
        return all(o.canonical() == o for o in self.operands)

    def canonical(self) -> "Spec":
        ops = tuple(o.canonical() for o in self.operands)
        return self if ops == self.operands else replace(self, operands=ops)

    def with_operand(self, i: int, t: TensorSpec, limits: MemoryLimits | None = None) -> "Spec":
        ops = list(self.operands)
        ops[i] = t
        return Spec(self.kind, self.shape, tuple(ops), self.serial_only,
                    self.limits if limits is None else limits)

    def flops(self) -> int:
        if self.kind in (PrimKind.MATMUL, PrimKind.MATMUL_ACCUM):
            return 2 * self.volume
        return 0

    def logical_str(self) -> str:
        ops = ", ".join(str(o) for o in self.operands)
        return f"{self.kind.title}({ops}{', serial' if self.serial_only else ''})"

    def __str__(self) -> str:
        return f"{self.logical_str()} {self.limits}"
