"""The embedding API: synthesize a Spec, get C and a callable kernel.

``synthesize`` returns a ``Program`` that can be emitted, compiled, verified against the
kind's numpy reference (``morello.kinds``) and timed; it keeps one session (a database and
its Engine) per target and database in this process. The Spec constructors (``matmul``,
``add``, ``mul``, ``relu``, ``fill``, ``broadcast``, ``reduce_max``, ``reduce_sum``, ...)
live in ``morello.constructors`` and are importable from here too."""
from __future__ import annotations

import atexit
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from morello import db as dbmod
from morello import layouts, limits
from morello.constructors import *  # noqa: F403 (re-exported: they were defined here)
from morello.constructors import (  # noqa: F401 (the same)
    _dim,
    _dtypes,
    _elementwise,
    _lift,
    _reduction,
    _shape,
    _short_repr,
    _size,
    _spec,
    _target,
)
from morello.coords import spec_key
from morello.cost import MAX_COST
from morello.dtypes import Dtype
from morello.errors import DatabaseError, MorelloError, SpecError
from morello.impl import Impl, reconstruct, replay
from morello.kinds import PrimKind
from morello.memory import Target
from morello.search import Engine, SearchStats
from morello.specs import Spec
from morello.tensorspec import fresh
from morello.verify import compare


class DatabaseWarning(UserWarning):
    """A database can be read but not written: new results stay in this process."""


# A session's Engine is dropped after a save once it holds this many logical Specs: the
# store keeps every result, so a long-lived process does not grow without bound.
ENGINE_MAX_SPECS = 2_000_000


class _Session:
    """One (target, database) in this process: its store, and its Engine once needed.

    Calls are serialized by ``lock`` (the Engine and the store's connection are not
    thread-safe), so threads may share a session."""

    def __init__(self, target: Target, db_path: Path | None) -> None:
        self.target = target
        self.db_path = db_path
        self.lock = threading.RLock()
        self.store = dbmod.Store(db_path, target) if db_path is not None else None
        # (table family, Spec text) -> (trace, cost), not yet saved
        self.roots: dict[tuple[str, str], tuple[list, int]] = {}
        self._engine: Engine | None = None
        if self.store is not None and not self.store.writable:
            warnings.warn(f"database {db_path} is read-only: it answers what it holds, "
                          "and new results are kept in this process only",
                          DatabaseWarning, stacklevel=4)
        # The shipped database answers what the user's does not (read-only, under it).
        self.base = None
        shipped = dbmod.shipped_path() if db_path is not None else None
        if shipped is not None and shipped.resolve() != db_path.resolve():  # type: ignore[union-attr]
            try:
                self.base = dbmod.Store(shipped, target, readonly=True)
            except DatabaseError as e:
                warnings.warn(f"the shipped database is unusable, ignored: {e}",
                              DatabaseWarning, stacklevel=4)

    def root(self, spec: Spec) -> tuple[list, int] | None:
        family, text = _root_key(spec)
        found = self.roots.get((family, text))
        for store in (self.store, self.base):
            if found is None and store is not None:
                found = store.root(family, text)
        return found

    def engine(self, progress) -> Engine:
        if self._engine is None:
            self._engine = Engine(self.target, store=self.store, base=self.base)
        self._engine.progress = progress
        return self._engine

    def drop_engine(self) -> None:
        """Forget the Engine (after an error inside it, or when it has grown large)."""
        self._engine = None

    def save(self, stats: dict | None = None) -> int:
        """Write what the Engine found (and the new roots) to the store; the pages
        written. Without a writable store, results stay in the Engine's working memo."""
        if self.store is None or not self.store.writable:
            return 0
        eng = self._engine
        try:
            if eng is None:
                written = self.store.save(None, [], self.roots, stats)
            else:
                written = self.store.save(eng.pages, eng.table_keys, self.roots, stats,
                                          eng.store_ids, eng.persist)
        except BaseException:
            self.drop_engine()  # its pages may claim versions the file does not hold
            raise
        if eng is not None and eng.graph.n_ids > ENGINE_MAX_SPECS:
            self.drop_engine()
        self.roots.clear()
        return written


def _root_key(spec: Spec) -> tuple[str, str]:
    """Where a root is stored: its Spec's table family (whose context holds it) and text."""
    return spec_key(spec)[0], str(spec)


_SESSIONS: dict[tuple[str, str | None], _Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(target: Target, db_path: Path | None) -> _Session:
    key = (target.db_key, None if db_path is None else str(db_path.absolute()))
    with _SESSIONS_LOCK:
        if key not in _SESSIONS:
            _SESSIONS[key] = _Session(target, db_path)
        return _SESSIONS[key]


@atexit.register
def close_sessions() -> None:
    """Close every open database of this process (later calls open them again)."""
    with _SESSIONS_LOCK:
        for sess in _SESSIONS.values():
            for store in (sess.store, sess.base):
                if store is not None:
                    store.close()
        _SESSIONS.clear()


def _replay_root(sess: _Session, spec: Spec) -> Impl | None:
    """The stored optimum of a Spec asked for before, if its trace still replays to it."""
    root = sess.root(spec)
    if root is None:
        return None
    trace, cost = root
    try:
        impl = replay(spec, sess.target, trace)
    except (MorelloError, IndexError, StopIteration, TypeError, KeyError):
        return None
    return impl if impl.cost.main == cost else None


@dataclass
class Program:
    """A synthesized program: the Spec, its optimal Impl, cost and C source."""

    spec: Spec
    target: Target
    impl: Impl
    stats: SearchStats
    synthesis_seconds: float
    _c: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (f"<Program {self.spec.logical_str()} on {self.target.name}: cost "
                f"{self.cost}, {sum(1 for _ in self.impl.walk())} Impl nodes>")

    @property
    def cost(self) -> int:
        return self.impl.cost.main

    def operand_bytes(self) -> int:
        """Bytes of the Spec's operands (what a caller allocates)."""
        return sum(o.bytes for o in self.spec.operands)

    def buffer_bytes(self) -> int:
        """Bytes of the heap buffers the program allocates, summed over every buffer
        of the tree (an upper bound of what is live at once)."""
        total = 0
        for node in self.impl.walk():
            applied = node.action.apply(node.spec, self.target)
            for alloc in getattr(applied, "allocs", ()):
                if not alloc.level.counts_registers:
                    total += alloc.bytes
        return total

    def too_large_to_run(self) -> str | None:
        """Why this program cannot run on this machine (its operands, a numpy
        reference and its buffers do not fit in available memory), or None."""
        return limits.too_large_to_run(self.memory_to_run())

    def memory_to_run(self) -> int:
        """Bytes that running and verifying it needs: the operands, a numpy reference
        of the output, random inputs drawn in float64, and the program's buffers."""
        return self.operand_bytes() * 3 + self.buffer_bytes()

    @property
    def c_source(self) -> str:
        if self._c is None:
            from morello.codegen import emit_c

            self._c = emit_c(self.impl, self.target, threads=self.target.processors)
        return self._c

    def compile(self):
        """Build the C with the host compiler; return a callable ``fn(*inputs, out=None)``
        (inputs in operand order, e.g. ``fn(lhs, rhs)`` for a matmul)."""
        from morello.codegen import CompiledProgram, compile_c
        from morello.targets import host_lacks

        reason = host_lacks(self.target)
        if reason:
            raise MorelloError(reason)
        src = self.c_source
        path = compile_c(src, self.target.cflags, openmp="#pragma omp" in src)
        ops = self.spec.operands
        if self.spec.kind.info.output != len(ops) - 1:
            raise MorelloError(f"{self.spec.kind.title}: only programs whose output is "
                               "the last operand can be called")
        return CompiledProgram(path, [o.shape for o in ops], [o.dtype.np for o in ops],
                               len(ops) - 1, self.spec.kind.info.operands,
                               [_memory_order(o, self.spec) for o in ops])

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs, one per operand before the output (``random_array``)."""
        limits.check_runnable(self.memory_to_run(), self.spec.logical_str())
        rng = np.random.default_rng(seed)
        return [random_array(rng, o.shape, o.dtype) for o in self.spec.operands[:-1]]

    def reference(self, *inputs) -> np.ndarray:
        """What the program computes, by numpy (the kind's reference)."""
        out = self.spec.output
        return self.spec.kind.info.reference(self.spec.params, list(inputs),
                                               np.zeros(out.shape, out.dtype.np))

    def verify(self, fn=None, seed: int = 0) -> tuple[bool, float]:
        """Run the compiled program (``fn``, or a fresh ``compile()``) on random inputs
        and compare with ``reference``. Returns (matches, max abs error)."""
        fn = self.compile() if fn is None else fn
        ins = self.random_inputs(seed)
        out = fn(*ins)
        kind = self.spec.kind
        if isinstance(kind, PrimKind) and kind.info.accumulates and len(kind.info.writes) == 1:
            # An accumulating kind reads its output: both start from the same random one.
            o = self.spec.output
            start = random_array(np.random.default_rng(seed + 1), o.shape, o.dtype)
            np.copyto(out, start)
            fn(*ins, out=out)
            return compare(self.spec, out, kind.info.reference(self.spec.params, list(ins),
                                                               start))
        return compare(self.spec, out, self.reference(*ins))


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: Dtype) -> np.ndarray:
    """Floats uniform in [-1, 1) (rounded to bf16 for bf16); integers uniform over the
    whole range of an 8-bit dtype, and over [-256, 256) for s16 and s32 (so that a matmul's
    int32 sums cannot overflow below k = 2^15)."""
    if dtype.is_float:
        return rng.uniform(-1, 1, size=shape).astype(np.float32).astype(dtype.np)
    info = np.iinfo(dtype.np)
    lo, hi = (info.min, info.max + 1) if dtype.size == 1 else (-256, 256)
    return rng.integers(lo, hi, size=shape).astype(dtype.np)


def _memory_order(t, spec: Spec) -> tuple[int, ...] | None:
    """The order of ``t``'s dims in memory for the callable: None for row-major, the
    permutation for another order of unpacked dims (column-major)."""
    if not t.level.has_layout:
        return None
    if t.layout == fresh(t.shape, t.dtype, t.level, layouts.row_major(len(t.shape))).layout:
        return None
    dims = t.layout.dims
    if not t.contiguous or any(d.pack is not None for d in dims) \
            or sorted(d.dim for d in dims) != [d for d in range(len(t.shape)) if t.shape[d] > 1]:
        raise MorelloError(f"{spec.logical_str()}: only row- and column-major operands can "
                           "be called")
    order = [d.dim for d in dims]
    ones = [d for d in range(len(t.shape)) if t.shape[d] == 1]
    full = sorted(ones + order, key=lambda d: (d not in ones, order.index(d)
                                               if d in order else d))
    return tuple(full)


def problem_target(tgt: Target, spec: Spec) -> Target:
    """The variant of ``tgt`` that prices ``spec``'s main memory where it lives: within
    the last-level cache ``Target.in_llc``; beyond it, for a memory-bound kind,
    ``Target.in_dram``; else ``tgt``."""
    if not tgt.streams_from_dram(spec):
        return tgt.in_llc()
    if spec.kind.info.staging == "views":
        # Memory-bound kinds only: a matmul's programs changed under the write-back
        # pricing to no gain (docs/model-notes.md).
        return tgt.in_dram()
    return tgt


def synthesize(spec: Spec, target: str | Target = "avx2", *, db=None,
               progress=None, threads: int = 1, calibration: str | None = None) -> Program:
    """Find the cheapest Impl of ``spec``.

    ``db``: None uses the default database (``$XDG_CACHE_HOME/morello/results-v12.sqlite``),
    a path uses that file (read-only files answer what they hold, with a
    ``DatabaseWarning``), False keeps results in memory only. ``progress(seen, solved, seconds)``
    is called about twice a second during long searches, and ``progress.saving(path)``, if
    the callback has it, before the database is written. ``threads``: processors the cost
    model assumes for parallel loops and OpenMP threads; with more than one, a Spec
    made serial by a constructor's default is searched parallel (``Spec.for_threads``),
    one made with ``serial=True`` stays serial.
    ``calibration``: the cost constants, ``"builtin"`` or a calibration file (default: see
    ``morello.memory.parse_target``). A Spec whose main-memory operands fit the
    last-level cache is searched for the target's LLC variant (``Target.in_llc``: runs of
    main memory start from L3); a memory-bound one (softmax, elementwise, ...) whose
    operands exceed it, for its DRAM variant (``Target.in_dram``): outputs written there
    cost their write-back, and may be stored past the caches (``problem_target``).
    """
    if not isinstance(spec, Spec):
        raise SpecError(f"synthesize takes a Spec (from morello.matmul, morello.add, ...), "
                        f"got {type(spec).__name__}")
    limits.check_threads(threads)
    if calibration is not None and not isinstance(calibration, str):
        raise SpecError(f"calibration must be 'builtin' or a file path (str), got "
                        f"{_short_repr(calibration)}")
    if progress is not None and not callable(progress):
        raise SpecError(f"progress must be callable, got {_short_repr(progress)}")
    tgt = problem_target(_target(target, threads, calibration), spec)
    limits.check_points(spec.kind.title, spec.shape)
    db_path = dbmod.resolve(db)
    spec = spec.for_threads(threads).canonical()
    t0 = time.perf_counter()
    sess = _session(tgt, db_path)
    with sess.lock:
        impl = _replay_root(sess, spec)
        if impl is not None:
            return Program(spec, tgt, impl, SearchStats(), time.perf_counter() - t0)
        eng = sess.engine(progress)
        before = (eng.solver.table_hits, eng.pages.stats())
        try:
            sol, stats = eng.solve(spec)
        except KeyboardInterrupt:
            # Every result stored so far is complete: keep them for the next run.
            sess.save()
            sess.drop_engine()
            raise
        except BaseException:
            sess.drop_engine()  # its state is not to be trusted after an error
            raise
        if sol is None:
            if sess.store is not None and Engine(tgt).solve(spec)[0] is not None:
                sess.drop_engine()
                raise _corrupt(db_path, spec, "they claim it has no implementation")
            raise SpecError(f"no implementation of {spec} fits the memory limits")
        try:
            impl = reconstruct(spec, tgt, eng.lookup)
        except (MorelloError, KeyError) as e:
            if sess.store is None:
                raise
            sess.drop_engine()
            reason = f"a sub-Spec has no result: {e}" if isinstance(e, KeyError) else str(e)
            raise _corrupt(db_path, spec, reason[:300]) from None
        if impl.cost.main >= MAX_COST:
            raise SpecError(f"the cost of {spec.logical_str()} overflows the cost model "
                            "(saturated at 2^62): refused")
        if impl.cost.main != sol.cost.main:
            sess.drop_engine()
            raise _corrupt(db_path, spec, "the program they give does not cost what they "
                           "claim")
        seconds = time.perf_counter() - t0
        sess.roots[_root_key(spec)] = (impl.trace(), impl.cost.main)
        if sess.store is not None:
            saving = getattr(progress, "saving", None)
            if saving is not None and stats.specs_solved and sess.store.writable:
                saving(db_path)
            sess.save(_search_stats(stats, eng, before))
        return Program(spec, tgt, impl, stats, seconds)


def _corrupt(db_path, spec: Spec, reason: str) -> DatabaseError:
    return DatabaseError(f"the stored results of {db_path} do not rebuild a program for "
                         f"{spec.logical_str()} ({reason}); the database is corrupt: delete "
                         "it or pass another --db")


def _search_stats(stats: SearchStats, eng: Engine, before: tuple[int, dict]) -> dict:
    """What ``morello db stats`` reports of the last search: (Spec, limits) pairs solved
    and answered by the database, and how its pages were found."""
    hits0, pages0 = before
    pages = eng.pages.stats()
    d = {k: pages[k] - pages0[k] for k in ("hits", "loads", "evictions", "absent")}
    answered = eng.solver.table_hits - hits0
    asked = answered + stats.specs_solved
    return {"specs_solved": stats.specs_solved, "seconds": round(stats.seconds, 3),
            "answered_by_database": answered,
            "database_hit_rate": round(answered / asked, 4) if asked else 0.0,
            "page_cache_hit_rate": round(d["hits"] / (d["hits"] + d["loads"]), 4)
            if d["hits"] + d["loads"] else 0.0,
            **{f"page_{k}": v for k, v in d.items()}}
