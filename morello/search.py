"""Search: find the cheapest Impl of a Spec under the affine cost model.

The work is split at the Python/Cython boundary (see ``morello._dp``): Python owns the
*logical graph* -- Specs without memory limits, each compiled once into integer template
rows by enumerating and expanding its actions -- and the Cython ``Solver`` runs the
memoized DP over (logical id, limits) pairs. Impls are rebuilt by replaying action indices.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from morello._dp import Solver
from morello._expand import Expander
from morello._graph import SpecGraph
from morello._pages import PageCache
from morello._persist import persist
from morello.bridge import UNBOUNDED, Bridge, logical  # noqa: F401 (logical: re-exported)
from morello.compose import MAX_CHAIN_OPERANDS, MAX_CHAIN_RANK, Chain
from morello.coords import (
    exact_dims,
    key_params,
    merge_dims,
    operand_coords,
    page_blocks,
    point_len,
)
from morello.cost import RAMP_BYTES, SWEEP_BYTES, Cost, run_bytes
from morello.dtypes import Dtype
from morello.errors import MorelloError, SpecError
from morello.kernels import table_for
from morello.kinds import KINDS, PrimKind, form_facts
from morello.memory import LEVELS, Level, Target
from morello.rewrites.decompose import DECOMPOSITIONS
from morello.rewrites.tile import tile_size_table
from morello.specs import Spec
from morello.store.format import NVALUES  # a memo value is a stored box's value row
from morello.tensorspec import TensorSpec

_DTYPES = list(Dtype)


# Bytes of loaded clean pages an Engine keeps (``morello._pages``): $MORELLO_DB_CACHE_MB
# mebibytes, 512 by default. A loaded page costs about 800 bytes a box (a MemoTable), and a
# search of a shape like those already stored touches most pages of its tables: with too
# small a budget, a depth-first search reloads pages over and over (docs/model-notes.md).
def _cache_bytes() -> int:
    import os

    text = os.environ.get("MORELLO_DB_CACHE_MB", "512")
    try:
        mib = int(text)
    except ValueError:
        raise MorelloError(f"MORELLO_DB_CACHE_MB must be a whole number of MiB, got "
                           f"{text[:20]!r}") from None
    if not 0 <= mib <= 1 << 20:
        raise MorelloError(f"MORELLO_DB_CACHE_MB must be in 0..{1 << 20}, got {mib}")
    return mib << 20


@dataclass(frozen=True, slots=True)
class CostParams:
    """The target's cost constants the native rows apply (``morello._expand``), by name:
    the Expander reads them into its ``cost_params_t``, whose fields these are."""

    processors: int      # processors a parallel loop divides among
    par_setup: int       # constant cost of a parallel loop
    par_iter: int        # cost per parallel iteration
    gl_run: int          # cost of a main-memory run start
    gl_ramp: int         # more for a run of ramp_bytes or longer
    ramp_bytes: int      # (morello.cost.run_cost)
    streams: int         # runs the prefetchers follow at once
    sweep_save: int      # per line of a few long runs side by side (cost.sweep_saving)
    line_bytes: int      # bytes of a cache line
    sweep_bytes: int     # (morello.cost.SWEEP_BYTES)
    sweep_dtypes: int    # bit per dtype code of Target.sweep_dtypes

    @classmethod
    def of(cls, t: Target) -> CostParams:
        run, ramp = t.run_costs()
        return cls(processors=t.processors, par_setup=t.parallel_setup_cost,
                   par_iter=t.parallel_iter_cost, gl_run=run, gl_ramp=ramp,
                   ramp_bytes=RAMP_BYTES, streams=t.prefetch_streams,
                   sweep_save=t.sweep_line_saving(), line_bytes=t.line_bytes,
                   sweep_bytes=SWEEP_BYTES, sweep_dtypes=sum(1 << d.code for d in t.sweep_dtypes))


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

    Logical Specs are interned in a ``SpecGraph`` as records of a *form* (a kind with its
    parameters at one rank); this class packs each form's row of the kind table into the
    graph's integer tables when the form is first met. With ``native=True`` (the default)
    the compiled ``Expander`` enumerates actions from those tables and from per-operand
    transform tables that its ``morello.bridge.Bridge`` fills on demand (``tile``,
    ``moves``, ``select``); with ``native=False`` every logical Spec is expanded by the
    Python rewrites (``Bridge.compile``: the slow path, kept as a parity reference).
    """

    def __init__(self, target: Target, progress: Callable | None = None,
                 native: bool = True, store=None, cache_bytes: int | None = None,
                 base=None) -> None:
        self.target = target
        self.kernels = table_for(target)
        self.progress = progress
        self._t0 = time.perf_counter()
        self._last = 0.0
        self.native = native
        max_kernels = max(len(self.kernels.for_kind(k)) for k in PrimKind)
        self.graph = SpecGraph(max(MAX_CHAIN_RANK, *(i.ranks[1] for i in KINDS.values())),
                               max(MAX_CHAIN_OPERANDS, *(i.n_operands for i in KINDS.values())),
                               max_kernels, [lvl.counts_registers for lvl in LEVELS],
                               self._table_of)
        self.expander = Expander(self.graph, Bridge(self), native, CostParams.of(target),
                                 tile_size_table(target))
        self.solver = Solver(self.graph, self.expander)
        self.forms: dict[tuple, int] = {}
        self.form_keys: list[tuple] = []
        self.tensors: list[TensorSpec] = []
        self.tids: dict[TensorSpec, int] = {}
        self._specs: list[Spec | None] = []  # decoded logical Specs, by id (cache)
        # The persistent tables, split into pages (loaded from ``store`` on demand).
        self.store = store
        self.pages = PageCache(NVALUES, _cache_bytes() if cache_bytes is None else cache_bytes,
                               self._load_page)
        self.table_keys: list[tuple] = []
        self._table_index: dict[tuple, int] = {}
        self.store_ids: dict[tuple, int] = {}  # table key -> its id in the store
        # A read-only store under ``store`` (the shipped database): read when ``store``
        # does not answer, never written.
        self.base = base
        self.base_ids: dict[tuple, int] = {}
        self.solver.attach_pages(self.pages)

    # -- tables ---------------------------------------------------------------------
    def table_index(self, key: tuple) -> int:
        """The index of table ``key`` (declaring it, with its stored pages, if new)."""
        i = self._table_index.get(key)
        if i is not None:
            return i
        i = self._table_index[key] = len(self.table_keys)
        self.table_keys.append(key)
        found = self.store.table(key) if self.store is not None else None
        below = self.base.table(key) if self.base is not None else None
        if found is None and below is None:
            self.pages.set_table(i, point_len(key), page_blocks(key), merge_dims(key),
                                 exact_dims(key))
        else:
            # Its pages are asked for as the search meets them (no directory read).
            blocks = found[1] if found is not None else below[1]  # type: ignore[index]
            if found is not None:
                self.store_ids[key] = found[0]
            if below is not None and below[1] == blocks:  # (another geometry: unread)
                self.base_ids[key] = below[0]
            self.pages.set_table(i, point_len(key), blocks, merge_dims(key), exact_dims(key))
            self.pages.set_lazy(i)
        return i

    def _table_of(self, form: int, dtype_codes: tuple[int, ...]) -> int:
        """The persistent table of Specs of ``form`` over operands of these dtypes."""
        kind, params, rank = self.form_keys[form]
        return self.table_index((kind.info.family, key_params(kind, params),
                                 tuple(_DTYPES[c].short for c in dtype_codes), rank))

    def _load_page(self, i: int, page: tuple[int, ...]):
        key = self.table_keys[i]
        geo = self.pages.geometry(i)
        assert geo is not None
        parts: list = []
        for store, ids in ((self.store, self.store_ids), (self.base, self.base_ids)):
            tid = ids.get(key)
            if tid is not None and store is not None:
                parts.extend(store.load_page(tid, key, geo[1], page) or ())
        return parts or None

    def refresh(self) -> None:
        """See what other processes saved into the store since we last looked."""
        store = self.store
        if store is None or not store.changed():
            return
        missing = [k for k in self.table_keys if k not in self.store_ids]
        if missing:
            ids = store.table_ids()
            for key in missing:
                if key in ids:
                    found = store.table(key)
                    if found is None:
                        continue
                    tid, blocks = found
                    i = self._table_index[key]
                    if self.pages.geometry(i) != (point_len(key), blocks):
                        continue  # another geometry: keep our own pages
                    self.store_ids[key] = tid
                    self.pages.set_lazy(i)  # (pages saved since: below)
        for key, page, version in store.changes(self.store_ids):
            self.pages.register(self._table_index[key], page, version)

    # -- identities ----------------------------------------------------------------
    def form_of(self, kind: PrimKind | Chain, params: tuple, rank: int) -> int:
        """The form id of ``kind`` with ``params`` at ``rank``, packing its tables (and
        those of the forms its actions produce) into the graph on first use."""
        key = (kind, params, rank)
        f = self.forms.get(key)
        if f is not None:
            return f
        info = kind.info
        try:
            facts = form_facts(kind, params, rank)
        except ValueError as e:
            raise SpecError(str(e)) from None
        f = self.forms[key] = len(self.form_keys)
        self.form_keys.append(key)
        omap = facts.operand_map
        # The native expander handles operand dims that are one Spec dim or a constant;
        # sums of Spec dims (conv's h + fh - 1) are expanded by the Python rewrites.
        # So are scan kinds (their scan dim may not be tiled) and decompositions.
        native = facts.single_dims and not info.scan and kind not in DECOMPOSITIONS
        self.graph.add_form(
            f, rank=rank, native=native,
            member=-1 if info.member is None else info.member,
            reads=info.reads, writes=info.writes, out=info.output,
            outdims=list(facts.outdims),
            row_dim=-1 if info.row_dim is None else info.row_dim,
            accum=-1 if info.accum is None else self.form_of(info.accum, params, rank),
            fill=-1 if info.accum is None else self.form_of(PrimKind.FILL, (info.init,),
                                                             facts.out_rank),
            splits=list(facts.splits),
            moves=[f if kind is PrimKind.MOVE and len(d) == rank
                   else self.form_of(PrimKind.MOVE, (), len(d)) for d in omap],
            operand_dims=[[(sdims[0] if sdims else -1, c) for sdims, c in dims]
                          for dims in omap],
            kernels=[(k.unit_mask(rank), int(k.needs_vrf), k.level_masks(len(omap)),
                      k.dtype_masks(len(omap)))
                     for k in self.kernels.for_kind(kind)])
        return f

    def tid_of(self, t: TensorSpec) -> int:
        i = self.tids.get(t)
        if i is None:
            i = self.tids[t] = len(self.tensors)
            self.tensors.append(t)
            self.graph.set_tensor(i, t.level.can_parallel_tile, t.level is Level.VRF,
                                  t.stream_dim if t.level is Level.GL else -1, t.blocks,
                                  t.dtype.code, operand_coords(t, self.target),
                                  int(t.level), run_bytes(t) if t.level is Level.GL else 0)
        return i

    def id_of(self, spec: Spec) -> int:
        form = self.form_of(spec.kind, spec.params, len(spec.shape))
        return self.graph.intern_spec(form, spec.shape,
                                      [self.tid_of(o) for o in spec.operands],
                                      spec.serial_only)

    def spec_of(self, i: int) -> Spec:
        while len(self._specs) <= i:
            self._specs.append(None)
        spec = self._specs[i]
        if spec is None:
            form, shape, tids, serial = self.graph.record(i)
            kind, params, _ = self.form_keys[form]
            ops = tuple(self.tensors[t] for t in tids)
            spec = self._specs[i] = Spec(kind, shape, ops, serial, UNBOUNDED, params)
        return spec

    @property
    def specs(self) -> list[Spec]:
        return [self.spec_of(i) for i in range(self.graph.n_ids)]

    def _tick(self) -> None:
        if self.progress is not None:
            now = time.perf_counter() - self._t0
            if now - self._last > 0.5:
                self._last = now
                self.progress(self.graph.n_ids, self.solver.specs_solved, now)

    def solve(self, goal: Spec) -> tuple[Solution | None, SearchStats]:
        """Solve ``goal`` (and everything it depends on)."""
        if not goal.is_canonical:
            raise SpecError(f"search needs a canonical Spec, got {goal}")
        t0 = time.perf_counter()
        self._t0 = t0
        self.refresh()
        before = (self.solver.specs_solved, self.solver.rows_evaluated)
        self.solver.solve(self.id_of(goal), goal.limits.units)
        stats = SearchStats(
            self.graph.n_ids,
            self.solver.specs_solved - before[0],
            self.solver.rows_evaluated - before[1],
            time.perf_counter() - t0,
        )
        return self.lookup(goal), stats

    def persist(self, flush: Callable[[], None] | None = None) -> int:
        """Write new results into the pages, page by page, calling ``flush()`` after each
        (``Store.save`` writes them then)."""
        return persist(self.solver, flush)

    def lookup(self, spec: Spec) -> Solution | None:
        """The stored optimum of ``spec`` (None if unsatisfiable); KeyError if unsolved."""
        found = self.solver.lookup(self.id_of(spec), spec.limits.units)
        if found is None:
            raise KeyError(str(spec))
        main, peaks, depth, action = found
        if action < 0:
            return None
        return Solution(Cost(main, tuple(peaks), depth), action)


class StderrProgress:
    """Progress on stderr: one line rewritten in place (Specs reached, (Spec, limits)
    pairs solved, rate), then ``saving results to PATH``; ``close()`` ends the open line.

    ``synthesize`` calls the object about twice a second during long searches and
    ``saving(path)`` before it writes the database (a few seconds after a large search)."""

    def __init__(self) -> None:
        self.open = False

    def __call__(self, seen: int, solved: int, elapsed: float) -> None:
        rate = solved / elapsed if elapsed else 0.0
        print(f"\rsearch: {seen:,} Specs reached, {solved:,} solved, {rate:,.0f}/s, "
              f"{elapsed:.1f} s ", end="", file=sys.stderr, flush=True)
        self.open = True

    def saving(self, path) -> None:
        self.close()
        print(f"saving results to {path} ...", end="", file=sys.stderr, flush=True)
        self.open = True

    def close(self) -> None:
        if self.open:
            print(file=sys.stderr, flush=True)
            self.open = False
