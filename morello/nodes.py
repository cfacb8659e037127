"""The Impl vocabulary: what an action *is* as a program, independent of the action.

Each action's ``apply(spec, target)`` returns one node; the emitter (``codegen/emit.py``)
handles these nodes only, so a new action (a softmax decomposition, a bufferized
Compose) adds a rewrite and no emitter branch. A node's children are the Impl's children
(the Expansion's sub-Specs), in order.

- ``Loop(sdim, size, parallel)``: iterate Spec dim ``sdim`` in tiles of ``size``: child 0
  is the body, child 1 (if any) the boundary tile; every operand indexed by ``sdim``
  moves with the loop.
- ``Block(steps, alloc, alloc2)``: run the children in order; ``steps[j]`` names child
  j's operands, each an operand of this Spec (its index), ``NEW``, the buffer ``alloc``
  declares for the block (a TensorSpec; None when the block allocates nothing), or
  ``NEW2``, a second one (``alloc2``).
- ``KernelCall(kernel)``: the target kernel of that name implements the Spec.
"""
from __future__ import annotations

from dataclasses import dataclass

from morello.tensorspec import TensorSpec

NEW = -1  # in Block steps: the buffer the block allocates
NEW2 = -2  # in Block steps: its second buffer


@dataclass(frozen=True, slots=True)
class Loop:
    sdim: int
    size: int
    parallel: bool = False


@dataclass(frozen=True, slots=True)
class Block:
    steps: tuple[tuple[int, ...], ...]
    alloc: TensorSpec | None = None
    alloc2: TensorSpec | None = None


@dataclass(frozen=True, slots=True)
class KernelCall:
    kernel: str


Node = Loop | Block | KernelCall
