"""Impl trees: a Spec, the action chosen for it, and the Impls of its holes.

An Impl is rebuilt from the memo table by replaying action indices: re-enumerate
``actions(spec)``, take the stored index, expand it, recurse into its sub-Specs. A stored
root keeps each action as its place in its group (``Impl.trace``): replaying it
makes only that group of each Spec's actions, not every group before it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from morello.cost import Cost, combine
from morello.errors import MorelloError
from morello.memory import Target
from morello.rewrites import Action, action_groups, action_in_group, actions
from morello.specs import Spec


@dataclass(frozen=True, slots=True)
class Impl:
    spec: Spec
    action: Action
    at: tuple[int, int]  # (group, index in the group) of the action (``group_makers``)
    children: tuple[Impl, ...]
    cost: Cost

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def trace(self) -> list[list[int]]:
        """Each node's ``[group, index]`` in pre-order: replaying them rebuilds this Impl."""
        return [list(n.at) for n in self.walk()]

    def pformat(self) -> str:
        lines: list[str] = []
        stack = [(self, 0)]
        while stack:
            node, depth = stack.pop()
            lines.append(f"{'  ' * depth}{node.action}  {node.spec.logical_str()}"
                         f"  cost={node.cost.main}")
            stack.extend((c, depth + 1) for c in reversed(node.children))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.pformat()


def action_at(spec: Spec, target: Target, index):
    """The action of ``spec`` at ``index`` (its index in ``actions(spec)``, as the memo
    stores it, or its ``[group, index]`` in ``group_makers``), its expansion and its
    ``(group, index)``; a clear error when the index is stale (out of range, or an action
    that does not apply: a result stored by a morello with another action table)."""
    act, at = None, (-1, -1)
    if _is_index(index):
        rest = index
        for g, group in enumerate(action_groups(spec, target)):
            if rest < len(group):
                act, at = group[rest], (g, rest)
                break
            rest -= len(group)
    elif isinstance(index, (list, tuple)) and len(index) == 2 and all(map(_is_index, index)):
        at = (index[0], index[1])
        act = action_in_group(spec, target, *at)
    if act is None:
        raise MorelloError(f"stale action index {index!r} for {spec.logical_str()} "
                           f"({len(actions(spec, target))} actions): the result was "
                           "stored under another action table")
    exp = act.expand(spec, target)
    if exp is None:
        raise MorelloError(f"stale action index {index!r} for {spec.logical_str()}: {act} "
                           "does not apply (the result was stored under another action "
                           "table)")
    return act, exp, at


def _is_index(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def reconstruct(spec: Spec, target: Target, lookup) -> Impl:
    """Rebuild the optimal Impl of ``spec``; ``lookup(spec)`` returns its Solution."""
    sol = lookup(spec)
    if sol is None:
        raise MorelloError(f"no implementation exists for {spec}")
    act, exp, at = action_at(spec, target, sol.action)
    children = tuple(reconstruct(c, target, lookup) for c in exp.children)
    cost = combine(exp.const, exp.coefs, exp.own, [c.cost for c in children])
    return Impl(spec, act, at, children, cost)


def replay(spec: Spec, target: Target, trace: list) -> Impl:
    """Rebuild an Impl from a pre-order trace of action indices or ``[group, index]``
    pairs (``Impl.trace``)."""
    it = iter(trace)

    def build(s: Spec) -> Impl:
        idx = next(it, None)
        if idx is None:
            raise MorelloError(f"the trace ends before {s.logical_str()}")
        act, exp, at = action_at(s, target, idx)
        children = tuple(build(c) for c in exp.children)
        return Impl(s, act, at, children,
                    combine(exp.const, exp.coefs, exp.own, [c.cost for c in children]))

    return build(spec)


def trace_json(impl: Impl) -> str:
    return json.dumps(impl.trace())
