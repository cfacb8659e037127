"""The embedding API: build a Spec, synthesize it, get C and a callable kernel."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from morello import db as dbmod
from morello import layouts
from morello.dtypes import SUPPORTED, Dtype, parse_dtype
from morello.errors import SpecError
from morello.impl import Impl, reconstruct
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


_ENGINES: dict[tuple[str, str | None], Engine] = {}


def _engine(target: Target, db_path: Path | None, progress) -> Engine:
    key = (target.name, None if db_path is None else str(db_path))
    eng = _ENGINES.get(key)
    if eng is None:
        tables = dbmod.load(db_path, target.name) if db_path is not None else {}
        eng = _ENGINES[key] = Engine(target, tables=tables)
    eng.progress = progress
    return eng


def _save(eng: Engine, db_path: Path) -> int:
    return dbmod.save(db_path, eng.target.name,
                      {k: t.to_arrays() for k, t in eng.tables.items()})


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

            self._c = emit_c(self.impl)
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
               progress=None) -> Program:
    """Find the cheapest Impl of ``spec``.

    ``db``: None uses the default database (``$XDG_CACHE_HOME/morello/<target>.db``), a path
    uses that file, False keeps results in memory only. ``progress(seen, solved, seconds)``
    is called about twice a second during long searches.
    """
    tgt = parse_target(target) if isinstance(target, str) else target
    db_path = None if db is False else Path(db) if db is not None else dbmod.default_path(tgt.name)
    if db_path is not None:
        dbmod.check_writable(db_path)
    spec = spec.canonical()
    t0 = time.perf_counter()
    eng = _engine(tgt, db_path, progress)
    try:
        sol, stats = eng.solve(spec)
    except KeyboardInterrupt:
        # Every result stored so far is complete: keep them for the next run.
        if db_path is not None:
            eng.solver.persist()
            _save(eng, db_path)
        raise
    if sol is None:
        raise SpecError(f"no implementation of {spec} fits the memory limits")
    impl = reconstruct(spec, tgt, eng.lookup)
    seconds = time.perf_counter() - t0
    if db_path is not None and stats.specs_solved:
        _save(eng, db_path)
    return Program(spec, tgt, impl, stats, seconds)
