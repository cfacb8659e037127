"""Slow, obviously-correct references used by the tests only.

- ``exhaustive_main_cost``: plain recursion over every action of every Spec, no memo table,
  no compiled rows: the least main cost of any complete Impl.
- ``solve_tables_py``: the Cython core's contract (``morello._dp.solve_tables``) in plain
  Python, for parity tests.
"""
from __future__ import annotations

from morello.cost import MAX_COST
from morello.memory import Target, pow2_ceil
from morello.rewrites import actions
from morello.specs import Spec


def exhaustive_main_cost(spec: Spec, target: Target) -> int | None:
    """Least main cost over all Impls of ``spec`` (None if none exists)."""
    best = None
    for act in actions(spec, target):
        exp = act.expand(spec, target)
        if exp is None:
            continue
        total = exp.const
        for child, coef in zip(exp.children, exp.coefs):
            c = exhaustive_main_cost(child, target)
            if c is None:
                break
            total = min(MAX_COST, total + coef * c)
        else:
            if best is None or total < best:
                best = total
    return best


def solve_tables_py(order, act_ptr, act_index, act_const, act_own, child_ptr, child_id,
                    child_coef, register_level, main, peaks, depth, action, preset):
    L = len(register_level)
    for s in order:
        if preset[s]:
            continue
        best = None
        for a in range(act_ptr[s], act_ptr[s + 1]):
            kids = child_id[child_ptr[a]:child_ptr[a + 1]]
            coefs = child_coef[child_ptr[a]:child_ptr[a + 1]]
            if any(action[c] < 0 for c in kids):
                continue
            m = int(act_const[a])
            for c, k in zip(kids, coefs):
                m = min(MAX_COST, m + min(MAX_COST, int(k) * int(main[c])))
            p = [int(act_own[a][l]) + max([int(peaks[c][l]) for c in kids], default=0)
                 for l in range(L)]
            p = [x if register_level[l] else pow2_ceil(x) for l, x in enumerate(p)]
            d = 1 + max([int(depth[c]) for c in kids], default=0)
            key = (m, tuple(p), d, int(act_index[a]))
            if best is None or key < best:
                best = key
        if best is None:
            action[s] = -1
            main[s] = 0
            depth[s] = 0
            peaks[s] = 0
        else:
            main[s], p, depth[s], action[s] = best[0], best[1], best[2], best[3]
            peaks[s] = p
