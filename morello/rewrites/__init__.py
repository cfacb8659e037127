"""Rewrites (actions) and their deterministic enumeration.

``actions(spec, target)`` lists candidate actions in a fixed order (moves, tiles, kernels,
ToAccum, splits); an action's position in that list is its identity in the memo table (the
action index), so ``morello.search.actions_fingerprint`` hashes everything the order
depends on. Each action offers
``expand(spec, target) -> Expansion | None``: the sub-Specs it leaves as holes and the affine
cost rule combining their costs (None when it does not apply). Impls are rebuilt by
replaying action indices (``morello.impl``).
"""
from __future__ import annotations

from morello.memory import Target
from morello.rewrites.accum import ToAccum
from morello.rewrites.base import Expansion, RewriteError
from morello.rewrites.move import Move, move_actions
from morello.rewrites.select import Select, select_actions
from morello.rewrites.tile import Split, TileOut, split_actions, tile_actions
from morello.specs import KINDS, Spec

Action = TileOut | Split | Move | ToAccum | Select

__all__ = [
    "Action", "Expansion", "Move", "RewriteError", "Select", "Split", "TileOut",
    "ToAccum", "actions",
]


def actions(spec: Spec, target: Target) -> list[Action]:
    """All candidate actions for ``spec`` in their canonical order."""
    out: list[Action] = []
    out.extend(move_actions(spec, target))
    out.extend(tile_actions(spec, target))
    out.extend(select_actions(spec, target))
    if KINDS[spec.kind].accum is not None:
        out.append(ToAccum())
    out.extend(split_actions(spec, target))
    return out
