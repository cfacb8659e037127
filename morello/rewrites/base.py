"""What every rewrite returns: its holes and its affine cost rule."""
from __future__ import annotations

from dataclasses import dataclass

from morello import layouts
from morello.errors import RewriteError
from morello.memory import Level, MemoryLimits, Target
from morello.specs import Spec
from morello.tensorspec import TensorSpec, fresh

__all__ = ["BUFFER_LEVELS", "Expansion", "RewriteError", "allocate", "new_buffer"]

# Where a rewrite's intermediate buffer may live (Decompose, Bufferize), in the order the
# search enumerates them.
BUFFER_LEVELS = (Level.GL, Level.L1, Level.RF)


def new_buffer(shape: tuple[int, ...], dtype, level: Level) -> TensorSpec | None:
    """A fresh row-major intermediate in ``level`` (None in RF unless it is one element:
    scalar registers hold one value per buffer here)."""
    if level is Level.RF and any(s != 1 for s in shape):
        return None
    return fresh(shape, dtype, level, layouts.row_major(len(shape)))


def allocate(spec: Spec, new: TensorSpec, target: Target) -> tuple[int, MemoryLimits] | None:
    """The units ``new`` takes at its level (none in main memory) and the limits left
    for the Specs that use it; None if it does not fit."""
    units = 0 if new.level is Level.GL else new.units(target)
    limits = spec.limits.subtract(new.level, units)
    return None if limits is None else (units, limits)


@dataclass(frozen=True, slots=True)
class Expansion:
    """Sub-Specs (holes, in the order codegen nests them) and the cost rule.

    main = const + sum(coefs[i] * main(children[i])); peaks = own + max child peaks.
    """

    children: tuple[Spec, ...]
    coefs: tuple[int, ...]
    const: int
    own: tuple[int, ...]
