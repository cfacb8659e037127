"""Specs: a primitive operation over operands, with memory limits and a serial flag.

One tagged record (``Spec``) covers every primitive; per-kind behaviour lives in the kind
table (``morello.kinds``), which this module re-exports. A Spec's operand shapes derive
from its ``shape`` and ``params`` through the kind's operand map.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from morello.errors import SpecError
from morello.kinds import (
    KINDS,
    PrimKind,
    check_dtypes,
    operand_dim,
    operand_shapes,
    output_dims,
    reduction_dims,
)
from morello.memory import MemoryLimits
from morello.tensorspec import TensorSpec

if TYPE_CHECKING:
    from morello.compose import Chain

__all__ = [
    "KINDS", "PrimKind", "Spec", "operand_dim", "operand_shapes", "output_dims",
    "reduction_dims",
]


def _param_str(kind: PrimKind | Chain, params: tuple) -> str:
    if not params:
        return ""
    parts = []
    for name, v in zip(kind.info.params, params):
        if name == "value":
            v = "-inf" if v == -math.inf else f"{v:g}"
        parts.append(f"{name}={v}")
    return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class Spec:
    """A primitive Spec. Canonical when every operand TensorSpec is canonical.

    ``params`` are the kind's parameters (``kind.info.params``: a reduced or broadcast
    dim, a fill value)."""

    kind: PrimKind | Chain  # a primitive kind, or a Compose chain (morello.compose)
    shape: tuple[int, ...]
    operands: tuple[TensorSpec, ...]
    serial_only: bool
    limits: MemoryLimits
    params: tuple = ()
    # Whether the caller chose ``serial_only`` (not a constructor's default): a default
    # serial root is searched parallel when more threads are asked for (``synthesize``).
    serial_given: bool = field(default=True, repr=False, compare=False)
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # Specs are dict keys in the hot path of the search: hash once.
        h = self._hash
        if not h:
            h = hash((self.kind, self.shape, self.operands, self.serial_only, self.limits,
                      self.params))
            object.__setattr__(self, "_hash", h)
        return h

    def __reduce__(self):
        # The cached hash is per-process (str hashing is salted): never pickle it.
        return (type(self), (self.kind, self.shape, self.operands, self.serial_only,
                             self.limits, self.params, self.serial_given))

    def __post_init__(self) -> None:
        info = self.kind.info
        reason = info.check_params(len(self.shape), self.params)
        if reason:
            raise SpecError(reason)
        expected = operand_shapes(self.kind, self.shape, self.params)
        if len(expected) != len(self.operands):
            raise SpecError(f"{info.title} takes {len(expected)} operands")
        for i, (o, s) in enumerate(zip(self.operands, expected)):
            if o.shape != s:
                raise SpecError(
                    f"operand {i} of {info.title} has shape {o.shape}, expected {s}"
                )
        reason = check_dtypes(self.kind, tuple(o.dtype for o in self.operands))
        if reason:
            raise SpecError(reason)

    @property
    def info(self):
        return self.kind.info

    @property
    def volume(self) -> int:
        return math.prod(self.shape)

    @property
    def output(self) -> TensorSpec:
        return self.operands[self.kind.info.output]

    @property
    def is_canonical(self) -> bool:
        return all(o.canonical() == o for o in self.operands)

    def canonical(self) -> Spec:
        ops = tuple(o.canonical() for o in self.operands)
        return self if ops == self.operands else replace(self, operands=ops)

    def with_operand(self, i: int, t: TensorSpec, limits: MemoryLimits | None = None) -> Spec:
        ops = list(self.operands)
        ops[i] = t
        return Spec(self.kind, self.shape, tuple(ops), self.serial_only,
                    self.limits if limits is None else limits, self.params, self.serial_given)

    def with_limits(self, limits: MemoryLimits) -> Spec:
        if limits is self.limits:
            return self
        return Spec(self.kind, self.shape, self.operands, self.serial_only, limits,
                    self.params, self.serial_given)

    def for_threads(self, threads: int) -> Spec:
        """The root to search on ``threads`` processors: parallel when more than one is
        asked for and serial was only a constructor's default, else this Spec."""
        if threads > 1 and self.serial_only and not self.serial_given:
            return replace(self, serial_only=False)
        return self

    def operand_dim(self, operand: int, sdim: int) -> int | None:
        return operand_dim(self.kind, operand, sdim, len(self.shape), self.params)

    def flops(self) -> int:
        """The arithmetic the Spec stands for: a chain's, its components' summed."""
        components = getattr(self.kind, "components", None)
        if components is None:
            return self.kind.info.flops_per_point * self.volume
        return sum(c.kind.info.flops_per_point * math.prod(self.shape[d] for d in c.dims)
                   for c in components)

    def logical_str(self) -> str:
        ops = ", ".join(str(o) for o in self.operands)
        return (f"{self.kind.title}{_param_str(self.kind, self.params)}"
                f"({ops}{', serial' if self.serial_only else ''})")

    def __str__(self) -> str:
        return f"{self.logical_str()} {self.limits}"
