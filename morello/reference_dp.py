"""Slow, obviously-correct references used by the tests only.

- ``exhaustive_main_cost``: plain recursion over every action of every Spec, no memo table
  of boxes, no compiled rows (each Spec's answer cached once found): the least main cost
  of any complete Impl.
- ``memoized_optimum``: the same recursion with a dict memo over (Spec, limits): the
  pure-Python DP that the Cython engine replaces (it finds the same cost and action).
"""
from __future__ import annotations

from morello.cost import MAX_COST
from morello.memory import Target
from morello.rewrites import actions
from morello.specs import Spec


def exhaustive_main_cost(spec: Spec, target: Target, seen: dict | None = None) -> int | None:
    """Least main cost over all Impls of ``spec`` (None if none exists).

    ``seen`` caches the answer of each Spec met (a pure function's cache, keyed by the
    whole Spec, limits included: the recursion still tries every action of every Spec,
    but a sub-Spec reached along several paths is solved once; without it, a random tiny
    Spec could take minutes)."""
    seen = {} if seen is None else seen
    if spec in seen:
        return seen[spec]
    best = None
    for act in actions(spec, target):
        exp = act.expand(spec, target)
        if exp is None:
            continue
        total = exp.const
        for child, coef in zip(exp.children, exp.coefs):
            c = exhaustive_main_cost(child, target, seen)
            if c is None:
                break
            total = min(MAX_COST, total + coef * c)
        else:
            if best is None or total < best:
                best = total
    seen[spec] = best
    return best


def memoized_optimum(spec: Spec, target: Target, memo: dict | None = None):
    """``(main, peaks, depth, action index)`` of the optimum of ``spec`` or None, by a
    memoized recursion in plain Python, with the search's tie-breaking order."""
    from morello.cost import combine

    memo = {} if memo is None else memo
    if spec in memo:
        return memo[spec]
    best = None
    for idx, act in enumerate(actions(spec, target)):
        exp = act.expand(spec, target)
        if exp is None:
            continue
        kids = [memoized_optimum(c, target, memo) for c in exp.children]
        if any(k is None for k in kids):
            continue
        from morello.cost import Cost

        cost = combine(exp.const, exp.coefs, exp.own,
                       [Cost(k[0], k[1], k[2]) for k in kids])
        key = (cost.main, cost.peaks, cost.depth, idx)
        if best is None or key < best:
            best = key
    memo[spec] = best
    return best
