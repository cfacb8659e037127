"""Search: find the cheapest Impl of a Spec under the affine cost model.

The work is split at the Python/Cython boundary (see ``morello._dp``): Python owns the
*logical graph* -- Specs without memory limits, each compiled once into integer template
rows by enumerating and expanding its actions -- and the Cython ``Solver`` runs the
memoized DP over (logical id, limits) pairs. Impls are rebuilt by replaying action indices.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from morello import _dp
from morello.cost import Cost
from morello.errors import SpecError
from morello.memory import LEVELS, MemoryLimits, Target
from morello.rewrites import actions
from morello.specs import Spec

NL = len(LEVELS)
UNBOUNDED = MemoryLimits(tuple(1 << 40 for _ in LEVELS))


def logical(spec: Spec) -> Spec:
    """The Spec with its limits erased (the key of the logical graph)."""
    if spec.limits is UNBOUNDED:
        return spec
    return Spec(spec.kind, spec.shape, spec.operands, spec.serial_only, UNBOUNDED)


@dataclass(frozen=True, slots=True)
class Solution:
    """The optimum for one Spec: its cost and the index of the action achieving it."""

    cost: Cost
    action: int


@dataclass
class SearchStats:
    logical_specs: int = 0
    specs_solved: int = 0
    rows_evaluated: int = 0
    seconds: float = 0.0


class Engine:
    """A logical graph plus its DP solver: one per target, reused across queries."""

    def __init__(self, target: Target, progress: Callable | None = None) -> None:
        self.target = target
        self.ids: dict[Spec, int] = {}
        self.specs: list[Spec] = []
        self.progress = progress
        self._t0 = time.perf_counter()
        self._last = 0.0
        self.solver = _dp.Solver(self._compile, [l.counts_registers for l in LEVELS])

    def id_of(self, spec: Spec) -> int:
        key = logical(spec)
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.specs)
            self.specs.append(key)
        return i

    def _compile(self, i: int) -> list[int]:
        """Template rows of logical Spec ``i``, flattened for the core (see ``_dp``):
        ``[n_rows, (index, const, own * L, n_children, (child, coef) * n_children) * n_rows]``.
        """
        spec = self.specs[i]
        flat = [0]
        rows = 0
        id_of = self.id_of
        target = self.target
        for idx, act in enumerate(actions(spec, target)):
            exp = act.expand(spec, target)
            if exp is None:
                continue
            rows += 1
            flat.append(idx)
            flat.append(exp.const)
            flat.extend(exp.own)
            flat.append(len(exp.children))
            for c, k in zip(exp.children, exp.coefs):
                flat.append(id_of(c))
                flat.append(k)
        flat[0] = rows
        if self.progress is not None:
            now = time.perf_counter() - self._t0
            if now - self._last > 0.5:
                self._last = now
                self.progress(self.solver.compiled_ids, len(self.specs),
                              self.solver.specs_solved, now)
        return flat

    def solve(self, goal: Spec) -> tuple[Solution | None, SearchStats]:
        """Solve ``goal`` (and everything it depends on)."""
        if not goal.is_canonical:
            raise SpecError(f"search needs a canonical Spec, got {goal}")
        t0 = time.perf_counter()
        self._t0 = t0
        before = (self.solver.specs_solved, self.solver.rows_evaluated)
        self.solver.solve(self.id_of(goal), goal.limits.units)
        stats = SearchStats(
            len(self.specs),
            self.solver.specs_solved - before[0],
            self.solver.rows_evaluated - before[1],
            time.perf_counter() - t0,
        )
        return self.lookup(goal), stats

    def lookup(self, spec: Spec) -> Solution | None:
        """The stored optimum of ``spec`` (None if unsatisfiable); KeyError if unsolved."""
        found = self.solver.lookup(self.id_of(spec), spec.limits.units)
        if found is None:
            raise KeyError(str(spec))
        main, peaks, depth, action = found
        if action < 0:
            return None
        return Solution(Cost(main, tuple(peaks), depth), action)


def stderr_progress(compiled: int, seen: int, solved: int, elapsed: float) -> None:
    rate = solved / elapsed if elapsed else 0.0
    print(f"\rsearch: {compiled} Specs compiled ({seen} seen), {solved} solved, "
          f"{rate:,.0f} Specs/s, {elapsed:.1f} s", end="", file=sys.stderr, flush=True)
