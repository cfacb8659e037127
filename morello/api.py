"""The embedding API: build a Spec, synthesize it, get C and a callable kernel."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from morello import db as dbmod
from morello import layouts
from morello.dtypes import SUPPORTED, Dtype, parse_dtype
from morello.errors import MorelloError, SpecError
from morello.impl import Impl, reconstruct, replay
from morello.memory import Level, Target, parse_target
from morello.search import Engine, SearchStats
from morello.specs import PrimKind, Spec, operand_shapes
from morello.tensorspec import fresh


def _size(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise SpecError(f"{name} must be an integer, got {v!r}")
    if v < 1:
        raise SpecError(f"{name} must be >= 1, got {v}")
    return int(v)


def matmul(m: int, k: int, n: int, *, batch: int = 1, dtype: str | Dtype = "f32",
           serial: bool = True, target: str | Target = "avx2") -> Spec:
    """The Spec of ``out[b] = lhs[b] @ rhs[b]`` with row-major operands in main memory.

    ``lhs`` is ``batch×m×k``, ``rhs`` is ``batch×k×n``, ``out`` is ``batch×m×n``.
    ``serial=False`` lets the search use parallel loops.
    """
    shape = (_size("batch", batch), _size("m", m), _size("k", k), _size("n", n))
    dt = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    if dt not in SUPPORTED:
        raise SpecError(f"dtype {dt} is not supported yet for matmul (supported: "
                        f"{', '.join(d.short for d in SUPPORTED)})")
    tgt = parse_target(target) if isinstance(target, str) else target
    ops = tuple(
        fresh(s, dt, Level.GL, layouts.row_major(3))
        for s in operand_shapes(PrimKind.MATMUL, shape)
    )
    return Spec(PrimKind.MATMUL, shape, ops, serial, tgt.max_limits())


class _Session:
    """One (target, database) in this process: its roots, and its Engine once needed."""

    def __init__(self, target: Target, db_path: Path | None) -> None:
        self.target = target
        self.db_path = db_path
        self.roots = dbmod.load_roots(db_path, target.db_key) if db_path is not None else {}
        self._engine: Engine | None = None

    def engine(self, progress) -> Engine:
        if self._engine is None:
            tables = dbmod.load(self.db_path, self.target.db_key) if self.db_path else {}
            self._engine = Engine(self.target, tables=tables)
        self._engine.progress = progress
        return self._engine

    def save(self) -> int:
        if self._engine is not None:
            self._engine.persist()
        tables = ({k: t.to_arrays() for k, t in self._engine.tables.items()}
                  if self._engine is not None else dbmod.load(self.db_path, self.target.db_key))
        return dbmod.save(self.db_path, self.target.db_key, tables, self.roots)


_SESSIONS: dict[tuple[str, str | None], _Session] = {}


def _session(target: Target, db_path: Path | None) -> _Session:
    key = (target.db_key, None if db_path is None else str(db_path))
    if key not in _SESSIONS:
        _SESSIONS[key] = _Session(target, db_path)
    return _SESSIONS[key]


def _replay_root(sess: _Session, spec: Spec) -> Impl | None:
    """The stored optimum of a Spec asked for before, if its trace still replays to it."""
    root = sess.roots.get(str(spec))
    if root is None:
        return None
    try:
        impl = replay(spec, sess.target, root["trace"])
    except (MorelloError, IndexError, StopIteration, TypeError, KeyError):
        return None
    return impl if impl.cost.main == root["cost"] else None


@dataclass
class Program:
    """A synthesized program: the Spec, its optimal Impl, cost and C source."""

    spec: Spec
    target: Target
    impl: Impl
    stats: SearchStats
    synthesis_seconds: float
    _c: str | None = field(default=None, repr=False)

    @property
    def cost(self) -> int:
        return self.impl.cost.main

    @property
    def c_source(self) -> str:
        if self._c is None:
            from morello.codegen import emit_c

            self._c = emit_c(self.impl, threads=self.target.processors)
        return self._c

    def compile(self):
        """Build the C with the host compiler; return a callable ``fn(lhs, rhs, out=None)``."""
        from morello.codegen import CompiledKernel, compile_c

        src = self.c_source
        path = compile_c(src, self.target.cflags, openmp="#pragma omp" in src)
        ops = self.spec.operands
        return CompiledKernel(path, [o.shape for o in ops], [o.dtype.np for o in ops],
                              len(ops) - 1)

    def reference(self, *inputs) -> np.ndarray:
        """What the program computes, by numpy."""
        lhs, rhs = inputs
        return np.matmul(lhs, rhs)


def synthesize(spec: Spec, target: str | Target = "avx2", *, db=None,
               progress=None, threads: int = 1, calibration: str | None = None) -> Program:
    """Find the cheapest Impl of ``spec``.

    ``db``: None uses the default database (``$XDG_CACHE_HOME/morello/<target>.db``), a path
    uses that file, False keeps results in memory only. ``progress(seen, solved, seconds)``
    is called about twice a second during long searches, and ``progress.saving(path)``, if
    the callback has it, before the database is written. ``threads``: processors the cost
    model assumes for parallel loops (used when ``spec`` is not serial) and OpenMP threads.
    ``calibration``: the cost constants, ``"builtin"`` or a calibration file (default: see
    ``morello.memory.parse_target``).
    """
    tgt = parse_target(target, threads, calibration) if isinstance(target, str) else target
    db_path = None if db is False else Path(db) if db is not None else dbmod.default_path(tgt.db_key)
    if db_path is not None:
        dbmod.check_writable(db_path)
    spec = spec.canonical()
    t0 = time.perf_counter()
    sess = _session(tgt, db_path)
    impl = _replay_root(sess, spec)
    if impl is not None:
        return Program(spec, tgt, impl, SearchStats(), time.perf_counter() - t0)
    eng = sess.engine(progress)
    try:
        sol, stats = eng.solve(spec)
    except KeyboardInterrupt:
        # Every result stored so far is complete: keep them for the next run.
        if db_path is not None:
            sess.save()
        raise
    if sol is None:
        raise SpecError(f"no implementation of {spec} fits the memory limits")
    impl = reconstruct(spec, tgt, eng.lookup)
    seconds = time.perf_counter() - t0
    sess.roots[str(spec)] = {"trace": impl.trace(), "cost": impl.cost.main}
    if db_path is not None:
        saving = getattr(progress, "saving", None)
        if saving is not None and stats.specs_solved:
            saving(db_path)
        sess.save()
    return Program(spec, tgt, impl, stats, seconds)
