"""The Impl vocabulary: what an action *is* as a program, independent of the action.

Each action's ``apply(spec, target)`` returns one node; the emitter (``codegen/emit.py``)
handles these nodes only, so a new action (a softmax decomposition, a bufferized
Compose) adds a rewrite and no emitter branch. A node's children are the Impl's children
(the Expansion's sub-Specs), in order.

- ``Loop(sdim, size, parallel)``: iterate Spec dim ``sdim`` in tiles of ``size``: child 0
  is the body, child 1 (if any) the boundary tile; every operand indexed by ``sdim``
  moves with the loop.
- ``Block(steps, allocs)``: declare the buffers ``allocs`` (TensorSpecs; none for a
  view), then run the children in order; ``steps[j]`` names child j's operands, each an
  operand of this Spec (its index) or ``buffer(i)``, the block's buffer ``allocs[i]``
  (``NEW`` and ``NEW2`` name the first two).
- ``KernelCall(kernel)``: the target kernel of that name implements the Spec.
- ``Nest(allocs, steps)``: declare the buffers ``allocs``, then run each child inside its
  own loop nest, its operands given as ``View`` s of this Spec's operands or of those
  buffers: a tile at an origin affine in the nest's loop indices, or a strided view (a
  child dim may step through memory by other than its extent: a conv's sliding windows
  seen as a matmul's rows).
"""
from __future__ import annotations

from dataclasses import dataclass

from morello.tensorspec import TensorSpec


def buffer(i: int) -> int:
    """In Block steps: the block's buffer ``allocs[i]``."""
    return -1 - i


NEW = buffer(0)  # the block's first buffer
NEW2 = buffer(1)  # its second


@dataclass(frozen=True, slots=True)
class Loop:
    sdim: int
    size: int
    parallel: bool = False


@dataclass(frozen=True, slots=True)
class Block:
    steps: tuple[tuple[int, ...], ...]
    allocs: tuple[TensorSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class KernelCall:
    kernel: str


# An origin coordinate in a Nest step: a constant plus ``(loop, coefficient)`` terms.
NestCoord = tuple[int, tuple[tuple[int, int], ...]]


@dataclass(frozen=True, slots=True)
class View:
    """A child operand in a ``Nest``: ``source`` is an operand of the Spec (>= 0) or the
    Nest's buffer ``-1 - source``; ``at`` its origin, per source dim; with ``strides``, the
    child's element ``x`` is the source's element at memory offset ``offset(at) +
    sum(x[d] * strides[d])`` (the source unpacked), else it is the tile of the source at
    ``at``."""

    source: int
    at: tuple[NestCoord, ...] | None = None  # None: the origin
    strides: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class NestStep:
    """One child of a Nest: the extents of its loops (outermost first; ``parallel``: the
    outermost loop runs across threads) and its operands."""

    loops: tuple[int, ...]
    operands: tuple[View, ...]
    parallel: bool = False


@dataclass(frozen=True, slots=True)
class Nest:
    allocs: tuple[TensorSpec, ...]
    steps: tuple[NestStep, ...]


Node = Loop | Block | KernelCall | Nest
