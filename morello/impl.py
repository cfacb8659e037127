"""Impl trees: a Spec, the action chosen for it, and the Impls of its holes.

An Impl is rebuilt from the memo table by replaying action indices: re-enumerate
``actions(spec)``, take the stored index, expand it, recurse into its sub-Specs.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from morello.cost import Cost, combine
from morello.errors import MorelloError
from morello.memory import Target
from morello.rewrites import Action, action_groups, actions
from morello.specs import Spec


@dataclass(frozen=True, slots=True)
class Impl:
    spec: Spec
    action: Action
    action_index: int
    children: tuple[Impl, ...]
    cost: Cost

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def trace(self) -> list[int]:
        """The action indices in pre-order: replaying them rebuilds this Impl."""
        return [n.action_index for n in self.walk()]

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


def action_at(spec: Spec, target: Target, index: int):
    """The action with index ``index`` of ``spec`` and its expansion; a clear error when
    the index is stale (out of range, or an action that does not apply: a result stored
    by a morello with another action table)."""
    act = None
    if not isinstance(index, bool) and isinstance(index, int) and index >= 0:
        rest = index
        for group in action_groups(spec, target):
            if rest < len(group):
                act = group[rest]
                break
            rest -= len(group)
    if act is None:
        raise MorelloError(f"stale action index {index!r} for {spec.logical_str()} "
                           f"({len(actions(spec, target))} actions): the result was "
                           "stored under another action table")
    exp = act.expand(spec, target)
    if exp is None:
        raise MorelloError(f"stale action index {index} for {spec.logical_str()}: {act} "
                           "does not apply (the result was stored under another action "
                           "table)")
    return act, exp


def reconstruct(spec: Spec, target: Target, lookup) -> Impl:
    """Rebuild the optimal Impl of ``spec``; ``lookup(spec)`` returns its Solution."""
    sol = lookup(spec)
    if sol is None:
        raise MorelloError(f"no implementation exists for {spec}")
    act, exp = action_at(spec, target, sol.action)
    children = tuple(reconstruct(c, target, lookup) for c in exp.children)
    cost = combine(exp.const, exp.coefs, exp.own, [c.cost for c in children])
    return Impl(spec, act, sol.action, children, cost)


def replay(spec: Spec, target: Target, trace: list[int]) -> Impl:
    """Rebuild an Impl from a pre-order action trace (see ``Impl.trace``)."""
    it = iter(trace)

    def build(s: Spec) -> Impl:
        idx = next(it, None)
        if idx is None:
            raise MorelloError(f"the trace ends before {s.logical_str()}")
        act, exp = action_at(s, target, idx)
        children = tuple(build(c) for c in exp.children)
        return Impl(s, act, idx, children,
                    combine(exp.const, exp.coefs, exp.own, [c.cost for c in children]))

    return build(spec)


def trace_json(impl: Impl) -> str:
    return json.dumps(impl.trace())
