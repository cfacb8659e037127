"""Bufferize: split a Compose at one intermediate, held in a level the search chooses.

::

    Compose(c0, ..., ci, ci+1, ..., cn)(operands)
        ->  alloc t @level                    (t = the input 0 of ci)
            Compose(ci+1, ..., cn)(..., t)    the inner part writes t
            Compose(c0, ..., ci)(..., t, ...) the outer part reads it

A part of one component is that primitive Spec. Bufferizing at the last index peels the
innermost component; at index 0 it computes everything below the head first. The
intermediate is a fresh row-major buffer in main memory, L1, or scalar registers (a
single element); a chain tiled by ``TileOut`` first keeps it small enough for L1 or for
registers, which is how the search fuses: a loop over rows of the output whose body
bufferizes one tile of every intermediate.

A chain with a lowered component (a conv first) may also hold an intermediate of the
output's shape in the output's layout (``same_layout``): a channels-last conv then
writes it in place, and the steps after it stream element for element into the output.
"""
from __future__ import annotations

from dataclasses import dataclass

from morello import compose
from morello.cost import own_units
from morello.memory import Level, Target
from morello.nodes import NEW, Block
from morello.rewrites.base import BUFFER_LEVELS, Expansion, allocate, new_buffer
from morello.specs import Spec, operand_shapes
from morello.tensorspec import fresh

# Where a chain's intermediate may live: Decompose's levels, and L2, which holds an
# intermediate too large for L1 that main memory would price as a round trip to memory
# (unfused through L2 beat row tiles fused through L1: docs/model-notes.md).
LEVELS = (BUFFER_LEVELS[0], Level.L2, *BUFFER_LEVELS[1:])


def _part(spec: Spec, lo: int, hi: int, ops, limits) -> Spec:
    ch = spec.kind
    assert isinstance(ch, compose.Chain)
    kind, params, dims = compose.sub_chain(ch, lo, hi)
    shape = tuple(spec.shape[d] for d in dims)
    return Spec(kind, shape, tuple(ops), spec.serial_only, limits, params)


@dataclass(frozen=True, slots=True)
class Bufferize:
    """Split the chain at the first input of component ``index`` (0 = the head), the
    intermediate in ``level``."""

    index: int
    level: Level
    same_layout: bool = False  # in the layout of the chain's output, not row-major

    def buffer(self, spec: Spec):
        ch = spec.kind
        if not isinstance(ch, compose.Chain) or not 0 <= self.index < len(ch.components) - 1:
            return None
        c = ch.components[self.index]
        shape = operand_shapes(c.kind, ch.component_shape(self.index, spec.shape),
                               c.params)[0]
        out = spec.operands[-1]
        new = new_buffer(shape, out.dtype, self.level)
        if not self.same_layout or new is None:
            return new
        if shape != out.shape or out.layout == new.layout:
            return None  # nothing a row-major buffer does not do
        return fresh(shape, out.dtype, self.level, out.layout)

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        new = self.buffer(spec)
        # L2 only for what L1 cannot hold (else each tile size of a chain offers both,
        # and matmul+bias+relu 256^3 searched twice as long for nothing).
        if new is not None and self.level is Level.L2 \
                and new.units(target) <= target.capacity[Level.L1]:
            return None
        fits = None if new is None else allocate(spec, new, target)
        if fits is None:
            return None
        units, limits = fits
        ch = spec.kind
        assert isinstance(ch, compose.Chain)
        inner_steps, outer_steps = compose.split_steps(ch, self.index, NEW)

        def ops(steps):
            return [new if a == NEW else spec.operands[a] for a in steps]

        inner = _part(spec, self.index + 1, len(ch.components), ops(inner_steps), limits)
        outer = _part(spec, 0, self.index + 1, ops(outer_steps), limits)
        return Expansion((inner, outer), (1, 1), 0, own_units(self.level, units))

    def apply(self, spec: Spec, target: Target) -> Block:
        new = self.buffer(spec)
        assert new is not None and isinstance(spec.kind, compose.Chain)
        return Block(compose.split_steps(spec.kind, self.index, NEW), (new,))

    def __str__(self) -> str:
        same = ", same layout" if self.same_layout else ""
        return f"Bufferize({self.index}, {self.level}{same})"


def bufferize_actions(spec: Spec, target: Target) -> list[Bufferize]:
    ch = spec.kind
    if not isinstance(ch, compose.Chain):
        return []
    out = [Bufferize(i, level) for i in range(len(ch.components) - 1) for level in LEVELS]
    if ch.lowered:
        out += [Bufferize(i, level, True) for i in range(len(ch.components) - 1)
                for level in LEVELS]
    return out


def identity(lowered: bool = False) -> list:
    """What action indices of bufferizing depend on (for the actions fingerprint), for
    chains with a lowered component or (``lowered=False``) without."""
    levels = [lvl.name for lvl in LEVELS]
    return levels + ["same layout", *levels] if lowered else levels
