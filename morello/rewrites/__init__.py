"""Rewrites (actions) and their deterministic enumeration.

``actions(spec, target)`` lists candidate actions in a fixed order (moves, tiles, kernels,
ToAccum, splits); an action's position in that list is its identity in the memo table (the
action index), so ``morello.identity.family_fingerprint`` hashes everything the order
depends on. Each action offers
``expand(spec, target) -> Expansion | None``: the sub-Specs it leaves as holes and the affine
cost rule combining their costs (None when it does not apply). Impls are rebuilt by
replaying action indices (``morello.impl``).
"""
from __future__ import annotations

import functools

from morello.compose import Chain
from morello.memory import Target
from morello.rewrites import conv, depthwise
from morello.rewrites.accum import ToAccum
from morello.rewrites.base import Expansion, RewriteError
from morello.rewrites.bufferize import Bufferize, bufferize_actions
from morello.rewrites.conv import ConvLower, conv_actions
from morello.rewrites.decompose import Decompose, decompose_actions
from morello.rewrites.depthwise import DepthwiseLower, depthwise_actions
from morello.rewrites.move import Move, operand_moves
from morello.rewrites.select import Select, select_actions
from morello.rewrites.tile import Split, TileOut, split_actions, tile_actions
from morello.specs import Spec

# The kinds each family of lowered kinds is lowered to (``morello.identity.closure``).
LOWERED_TO = {"Conv": conv.LOWERED_TO, "Depthwise": depthwise.LOWERED_TO}

Action = (TileOut | Split | Move | ToAccum | Select | Decompose | Bufferize | ConvLower
          | DepthwiseLower)

__all__ = [
    "LOWERED_TO", "Action", "Bufferize", "ConvLower", "Decompose", "DepthwiseLower",
    "Expansion", "Move",
    "RewriteError", "Select", "Split", "TileOut", "ToAccum", "action_groups",
    "action_in_group", "actions", "group_makers", "lowerings",
]


def actions(spec: Spec, target: Target) -> list[Action]:
    """All candidate actions for ``spec`` in their canonical order."""
    out: list[Action] = []
    for group in action_groups(spec, target):
        out.extend(group)
    return out


def group_makers(spec: Spec, target: Target) -> list:
    """The groups of ``actions(spec)`` in order, each as a function that makes it: the
    moves of each operand in turn, tiles, kernels, ToAccum, splits, decompositions,
    bufferizations; for a kind implemented only by its lowerings (``KindInfo.lowered``),
    those alone. An action's place in its group, ``(group, index)``, finds it by making
    that group alone (``action_in_group``)."""
    kind = spec.kind
    if kind.info.lowered:
        return [functools.partial(lowerings, spec, target)]
    makers: list = [functools.partial(operand_moves, kind, i, t, target)
                    for i, t in enumerate(spec.operands)]
    makers.append(functools.partial(tile_actions, spec, target))
    makers.append(functools.partial(select_actions, spec, target))
    if kind.info.accum is not None:
        makers.append(_to_accum)
    makers.append(functools.partial(split_actions, spec, target))
    makers.append(functools.partial(decompose_actions, spec, target))
    makers.append(functools.partial(bufferize_actions, spec, target))
    if isinstance(kind, Chain) and kind.lowered:  # its first step a conv: lowered whole
        makers.append(functools.partial(lowerings, spec, target))
    return makers


def lowerings(spec: Spec, target: Target) -> list[ConvLower | DepthwiseLower]:
    """The lowerings of a conv, a depthwise conv, or a chain whose first step is one."""
    return [*conv_actions(spec, target), *depthwise_actions(spec, target)]


def _to_accum() -> tuple[ToAccum]:
    return (ToAccum(),)


def action_groups(spec: Spec, target: Target):
    """``actions(spec)`` in its groups (``group_makers``), in order, each made when it is
    reached (so the action at one index is found without making the groups after it)."""
    for make in group_makers(spec, target):
        yield make()


def action_in_group(spec: Spec, target: Target, group: int, index: int) -> Action | None:
    """Action ``index`` of group ``group`` of ``spec`` (None when there is none)."""
    makers = group_makers(spec, target)
    if not 0 <= group < len(makers):
        return None
    acts = makers[group]()
    return acts[index] if 0 <= index < len(acts) else None
