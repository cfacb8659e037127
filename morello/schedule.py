"""Manual scheduling: choose some actions by hand, let the search fill in the rest.

``schedule(spec, steps)`` applies ``steps`` to the holes of a partial program in pre-order
(the order ``Impl.trace`` lists them): the first step implements ``spec`` itself, the next
one its first hole, and so on depth first. ``None`` as a step leaves that hole (and all of
its subtree) to the search; so does running out of steps. The result is an ordinary
``Program``: its cost under the same model, its Impl tree, C, a compiled kernel. So a
schedule written by hand (a BLAS-like blocking, a streaming order) can be priced and timed
next to the one the search chose::

    from morello import Move, Split, TileOut, ToAccum, schedule, matmul
    from morello.memory import Level
    spec = matmul(1, 2048, 16384)
    prog = schedule(spec, [ToAccum(), None, Split(8), TileOut(2, 32)])
    prog.cost   # the model's price of streaming B eight rows at a time

A step that does not apply to its hole raises ``RewriteError`` naming the hole and the
actions that do apply there.
"""
from __future__ import annotations

import time

from morello.api import Program, _session, problem_target
from morello.cost import combine
from morello.errors import MorelloError, RewriteError, SpecError
from morello.impl import Impl, action_at, reconstruct
from morello.memory import Target, parse_target
from morello.rewrites import Action, actions
from morello.search import SearchStats
from morello.specs import Spec


def schedule(spec: Spec, steps: list[Action | None], target: str | Target = "avx2", *,
             db=False, threads: int = 1, calibration: str | None = None,
             progress=None) -> Program:
    """The program that takes ``steps`` (in pre-order, see the module docstring) and is
    optimal everywhere else. ``db`` as in ``synthesize`` (default: in memory only)."""

    from morello import db as dbmod

    tgt = parse_target(target, threads, calibration) if isinstance(target, str) else target
    tgt = problem_target(tgt, spec)
    db_path = dbmod.resolve(db)
    spec = spec.for_threads(tgt.processors).canonical()
    t0 = time.perf_counter()
    sess = _session(tgt, db_path)
    given: object = steps  # validated at run time: callers may pass anything
    if isinstance(given, (str, bytes)) or not hasattr(given, "__iter__"):
        raise SpecError(f"steps must be a list of actions (or None), got {steps!r}")
    todo = list(steps)
    bad = [x for x in todo if x is not None and not isinstance(x, Action.__args__)]
    if bad:
        raise SpecError(f"steps must be actions (TileOut, Split, Move, ToAccum, Select) or "
                        f"None, got {bad[0]!r}")
    searched = SearchStats()

    def search(s: Spec) -> Impl:
        nonlocal searched
        eng = sess.engine(progress)
        sol, stats = eng.solve(s)
        searched = SearchStats(
            stats.logical_specs, searched.specs_solved + stats.specs_solved,
            searched.rows_evaluated + stats.rows_evaluated,
            searched.seconds + stats.seconds)
        if sol is None:
            raise SpecError(f"no implementation of {s} fits the memory limits "
                            "after the given steps")
        return reconstruct(s, tgt, eng.lookup)

    def build(s: Spec) -> Impl:
        if not todo:
            return search(s)
        step = todo.pop(0)
        if step is None:
            return search(s)
        cands = actions(s, tgt)
        applicable = [a for a in cands if a.expand(s, tgt) is not None]
        if step not in applicable:
            shown = ", ".join(str(a) for a in applicable[:40])
            raise RewriteError(f"{step} does not apply to {s.logical_str()}; "
                               f"applicable here: {shown}")
        _, exp, at = action_at(s, tgt, cands.index(step))
        children = tuple(build(c) for c in exp.children)
        cost = combine(exp.const, exp.coefs, exp.own, [c.cost for c in children])
        return Impl(s, step, at, children, cost)

    with sess.lock:
        try:
            impl = build(spec)
        except (MorelloError, KeyboardInterrupt):
            raise
        except BaseException:
            sess.drop_engine()
            raise
        if todo:
            raise RewriteError(f"{len(todo)} steps left over: the schedule has fewer holes "
                               f"than steps (first unused: {todo[0]})")
        if db_path is not None:
            sess.save()
    return Program(spec, tgt, impl, searched, time.perf_counter() - t0)
