"""Search: find the cheapest Impl of a Spec under the affine cost model.

The work is split at the Python/Cython boundary (see ``morello._dp``): Python owns the
*logical graph* -- Specs without memory limits, each compiled once into integer template
rows by enumerating and expanding its actions -- and the Cython ``Solver`` runs the
memoized DP over (logical id, limits) pairs. Impls are rebuilt by replaying action indices.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable

from morello import _dp
from morello._memo import MemoTable
from morello.coords import operand_coords, point_len
from morello.cost import Cost, move_cost
from morello.errors import MorelloError, SpecError
from morello.kernels.avx2 import kernels_for
from morello.memory import LEVELS, Level, MemoryLimits, Target
from morello.rewrites import actions
from morello.rewrites.move import operand_moves
from morello.rewrites.tile import tile_size_table
from morello.specs import READS, WRITES, PrimKind, Spec, operand_shapes
from morello.tensorspec import TensorSpec

NL = len(LEVELS)
# A memo value: main cost per unit volume (numerator, denominator), peaks, depth, action.
NVALUES = 2 + NL + 2
UNBOUNDED = MemoryLimits(tuple(1 << 40 for _ in LEVELS))


def table_keys() -> list[tuple]:
    """The persistent tables, in the order the core indexes them (Matmul, Move, Zero).

    TODO(bf16, int paths): one table per dtype combination once other dtypes exist.
    """
    return [("Matmul", ("f32",) * 3, 4), ("Move", ("f32",) * 2, 3), ("Zero", ("f32",), 3)]


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
    """A logical graph plus its DP solver: one per target, reused across queries.

    With ``native=True`` (the default) the Cython core enumerates actions itself from
    per-operand transform tables that this class fills on demand (``tile``, ``moves``,
    ``select``); with ``native=False`` every logical Spec is expanded here in Python (the
    slow path, kept as a parity reference).
    """

    def __init__(self, target: Target, progress: Callable | None = None,
                 native: bool = True, tables: dict | None = None) -> None:
        self.target = target
        self.progress = progress
        self._t0 = time.perf_counter()
        self._last = 0.0
        self.solver = _dp.Solver(self._compile, [l.counts_registers for l in LEVELS])
        self.native = native
        self.tensors: list[TensorSpec] = []
        self.tids: dict[TensorSpec, int] = {}
        self._specs: list[Spec] = []  # decoded logical Specs, by id (cache)
        if native:
            self._configure()
        self.tables = {key: MemoTable(point_len(key), NVALUES) for key in table_keys()}
        for key, arrays in (tables or {}).items():
            if key not in self.tables:
                raise MorelloError(f"unknown memo table {key}")
            self.tables[key] = MemoTable.from_arrays(*arrays)
        self.solver.attach_tables([self.tables[k] for k in table_keys()],
                                  any(len(t) for t in self.tables.values()))

    # -- identities ----------------------------------------------------------------
    def tid_of(self, t: TensorSpec) -> int:
        i = self.tids.get(t)
        if i is None:
            i = self.tids[t] = len(self.tensors)
            self.tensors.append(t)
            self.solver.set_tensor(i, t.level.can_parallel_tile, t.level is Level.VRF,
                                   t.stream_dim if t.level is Level.GL else -1, t.blocks)
            self.solver.set_tensor_coords(i, operand_coords(t, self.target))
        return i

    def id_of(self, spec: Spec) -> int:
        tids = [self.tid_of(o) for o in spec.operands] + [-1] * (3 - len(spec.operands))
        shape = list(spec.shape) + [0] * (4 - len(spec.shape))
        return self.solver.intern(
            (int(spec.kind), len(spec.shape), *shape, *tids, int(spec.serial_only)))

    def spec_of(self, i: int) -> Spec:
        while len(self._specs) <= i:
            self._specs.append(None)
        spec = self._specs[i]
        if spec is None:
            kind, rank, *rest = self.solver.record(i)
            shape, tids, serial = rest[:rank], rest[4:7], rest[7]
            ops = tuple(self.tensors[t] for t in tids if t >= 0)
            spec = self._specs[i] = Spec(PrimKind(kind), tuple(shape), ops, bool(serial),
                                         UNBOUNDED)
        return spec

    @property
    def specs(self) -> list[Spec]:
        return [self.spec_of(i) for i in range(self.solver.n_specs)]

    # -- native callbacks ----------------------------------------------------------
    def _configure(self) -> None:
        kinds = list(PrimKind)
        nops = [len(operand_shapes(k, (1, 1, 1, 1) if k <= 1 else (1, 1, 1))) for k in kinds]
        reads = [sum(1 << i for i in READS[k]) for k in kinds]
        writes = [sum(1 << i for i in WRITES[k]) for k in kinds]
        units = [[sum(1 << d for d in kn.unit_dims) for kn in kernels_for(k)] for k in kinds]
        vrf = [[int(kn.needs_vrf) for kn in kernels_for(k)] for k in kinds]
        t = self.target
        self.solver.configure(self, nops, reads, writes, units, vrf, t.processors,
                              t.parallel_setup_cost, t.parallel_iter_cost,
                              tile_size_table(t), t.costs.gl_run, t.prefetch_streams)

    def tile(self, tid: int, shape: tuple[int, ...]) -> int:
        t = self.tensors[tid]
        if not t.valid_tile_shape(shape):
            return -1
        return self.tid_of(t.tile(shape))

    def moves(self, kind: int, op: int, tid: int) -> list[int]:
        t = self.tensors[tid]
        flat = []
        acts = operand_moves(PrimKind(kind), op, t, self.target)
        for m in acts:
            dest = m.destination_of(t)
            if dest is None:
                flat.extend((0, 0, 0, 0, 0, 0))
                continue
            new, view = dest
            flat.extend((1, self.tid_of(new), int(m.level), m.units(new, self.target),
                         move_cost(t, self.target) + move_cost(new, self.target), int(view)))
        return [len(acts)] + flat

    def select(self, i: int) -> list[int]:
        spec = self.spec_of(i)
        flat = []
        for pos, k in enumerate(kernels_for(spec.kind)):
            if k.applies_to(spec, self.target):
                flat.extend((pos, k.cost(spec, self.target), k.vrf_regs))
        self._tick()
        return flat

    def _tick(self) -> None:
        if self.progress is not None:
            now = time.perf_counter() - self._t0
            if now - self._last > 0.5:
                self._last = now
                self.progress(self.solver.n_specs, self.solver.specs_solved, now)

    def _compile(self, i: int) -> list[int]:
        """Template rows of logical Spec ``i``, expanded in Python (``native=False``):
        ``[n_rows, (index, const, own * L, n_children, (child, coef) * n_children) * n_rows]``.
        """
        spec = self.spec_of(i)
        flat = [0]
        rows = 0
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
                flat.append(self.id_of(logical(c)))
                flat.append(k)
        flat[0] = rows
        self._tick()
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
            self.solver.n_specs,
            self.solver.specs_solved - before[0],
            self.solver.rows_evaluated - before[1],
            time.perf_counter() - t0,
        )
        return self.lookup(goal), stats

    def persist(self) -> int:
        """Write new results into the compressed tables (before saving them)."""
        return self.solver.persist()

    def lookup(self, spec: Spec) -> Solution | None:
        """The stored optimum of ``spec`` (None if unsatisfiable); KeyError if unsolved."""
        found = self.solver.lookup(self.id_of(spec), spec.limits.units)
        if found is None:
            raise KeyError(str(spec))
        main, peaks, depth, action = found
        if action < 0:
            return None
        return Solution(Cost(main, tuple(peaks), depth), action)


def stderr_progress(seen: int, solved: int, elapsed: float) -> None:
    """Progress line on stderr: Specs reached, (Spec, limits) pairs solved, rate."""
    rate = solved / elapsed if elapsed else 0.0
    print(f"\rsearch: {seen:,} Specs reached, {solved:,} solved, {rate:,.0f}/s, "
          f"{elapsed:.1f} s ", end="", file=sys.stderr, flush=True)


def _stderr_saving(path) -> None:
    print(f"\nsaving results to {path} ...", end="", file=sys.stderr, flush=True)


# A progress callback may also offer ``saving(path)``: synthesize calls it before writing
# the database (a few seconds after a large search).
stderr_progress.saving = _stderr_saving
