"""Memory levels, what a target is to the search, and per-level memory limits.

The targets themselves are rows in ``morello.targets`` (one module per instruction set).

Levels are ordered fastest first: RF (scalar registers) and VRF (vector registers) count
registers; L1, L2 and GL count 64-byte cache lines. L1 and L2 are caches: data gets there
by views (an accounting of the lines kept), never by addressed copies, and L2 views are
offered only for the block of lhs that BLAS-like schedules keep there (``rewrites.move``).
Limits of cache levels are powers of two (snapped down after a subtraction); peaks of cache
levels snap up to powers of two, so the space of distinct limits stays small and results
can be reused across limits.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from morello.costs import CostConstants
from morello.dtypes import Dtype

if TYPE_CHECKING:
    from morello.specs import Spec


class Level(enum.IntEnum):
    """A memory level. The integer value is the level's coordinate."""

    RF = 0
    VRF = 1
    L1 = 2
    L2 = 3
    GL = 4

    @property
    def counts_registers(self) -> bool:
        return self in (Level.RF, Level.VRF)

    @property
    def has_layout(self) -> bool:
        return self is not Level.RF

    @property
    def is_cache(self) -> bool:
        """L1 and L2 are caches: a move into one with the same layout is a view (the
        accounting of lines kept there), not a copy."""
        return self in (Level.L1, Level.L2)

    @property
    def can_parallel_tile(self) -> bool:
        return self in (Level.L1, Level.L2, Level.GL)

    def __str__(self) -> str:
        return self.name


LEVELS = tuple(Level)
NLEVELS = len(LEVELS)

# Where a Move may take an operand from each level.
DESTINATIONS = {
    Level.GL: (Level.GL, Level.L2, Level.L1),
    Level.L2: (Level.L1,),
    Level.L1: (Level.L1, Level.VRF, Level.RF),
    Level.RF: (),
    Level.VRF: (),
}


# A matmul with fewer flops per byte of its main-memory operands reads them about once
# per call (``Target.streams_from_dram``): a matrix-vector product has 1 to 2.
STREAM_FLOPS_PER_BYTE = 8


@dataclass(frozen=True, slots=True)
class Target:
    """Everything target-specific the search and the cost model need, in one place."""

    name: str
    capacity: tuple[int, ...]      # per level: registers (RF, VRF) or cache lines
    costs: CostConstants           # the cost model's constants (``morello.costs``)
    vector_bytes: tuple[int, ...]  # widths of vector registers, ascending
    line_bytes: int
    l1_ways: int                   # associativity of L1 (see ``rewrites.move``)
    row_tile_sizes: tuple[int, ...]  # extra tile sizes for Matmul rows (``rewrites.tile``)
    pack_sizes: tuple[int, ...]    # panel widths of packing Moves (``rewrites.move``)
    prefetch_streams: int          # concurrent memory streams the prefetchers follow
    processors: int
    cflags: tuple[str, ...]
    isa: str = "avx2"              # its instruction set (``morello.targets.isa``)
    byte_dots: bool = False        # u8 x s8 four at a time into s32, exactly (VNNI)
    l2_panel_cols: int = 0         # width of the ``l2_panels`` panels viewed in L2 (0: none)
    llc_bytes: int = 32 << 20      # the last-level cache (``in_dram``, ``in_llc``)
    gl_in_dram: bool = False       # main-memory operands live in DRAM, not the LLC (``in_dram``)
    gl_in_llc: bool = False        # they all fit the LLC (``in_llc``)
    # Dtypes of main memory whose few whole rows swept side by side save on their lines
    # (``sweep_line_saving``, ``cost.sweep_saving``): where the target's kernels measured it.
    sweep_dtypes: tuple[Dtype, ...] = ()

    def in_dram(self) -> Target:
        """This target for a problem whose main-memory operands exceed the last-level
        cache (``needs_dram``): every line written to main memory then costs its write-back
        too, and kernels may store past the caches (non-temporal stores), which costs no
        read of the line first. Within the cache such stores lose, so this is a variant of
        the target (``...-dram``, results of its own) chosen by the problem's size."""
        if self.gl_in_dram:
            return self
        return replace(self, name=f"{self.name}-dram", gl_in_dram=True)

    def in_llc(self) -> Target:
        """This target for a problem whose main-memory operands all fit the last-level
        cache (not ``needs_dram``): a run of main memory then starts from L3, at
        ``llc_run`` and with no ramp (``run_costs``), where beyond it a run start waits
        for DRAM and its prefetchers ramp up (priced as from DRAM, in-cache programs lost
        their fastest forms). A variant of the target (``...-llc``), as ``in_dram``."""
        if self.gl_in_llc or self.gl_in_dram:
            return self
        return replace(self, name=f"{self.name}-llc", gl_in_llc=True)

    def run_costs(self) -> tuple[int, int]:
        """What a run of main memory costs to start, and the ramp a page-long one pays
        beyond that (``cost.run_cost``): from L3 within the LLC, else from DRAM."""
        if self.gl_in_llc:
            return self.costs.llc_run, 0
        return self.costs.gl_run, self.costs.gl_ramp

    def sweep_line_saving(self) -> int:
        """What a line of main memory costs less when a loop sweeps a few long runs side
        by side (``cost.sweep_saving``): ``gl_line`` less ``gl_line_streams``, beyond the
        LLC only (within it the lines come from L3, with no prefetcher to keep busy), for
        targets whose kernels gain from it (``sweep_dtypes``)."""
        if self.gl_in_llc or not self.sweep_dtypes:
            return 0
        return max(0, self.costs.gl_line - self.costs.gl_line_streams)

    def needs_dram(self, operand_bytes: int) -> bool:
        """Whether a problem whose main-memory operands take ``operand_bytes`` in all
        streams them through DRAM: more than the last-level cache holds."""
        return operand_bytes > self.llc_bytes

    def streams_from_dram(self, spec: Spec) -> bool:
        """Whether ``spec``'s main-memory operands stream from DRAM: ``needs_dram``, or,
        for a matmul that reads them about once per call (fewer than
        ``STREAM_FLOPS_PER_BYTE`` flops per byte of them: a matrix-vector product), more
        than three quarters of the last-level cache, which keeps that much between calls
        only in part (it is shared with other cores, and a victim cache on AMD)."""
        gl = sum(o.bytes for o in spec.operands if o.level is Level.GL)
        if self.needs_dram(gl):
            return True
        return (4 * gl > 3 * self.llc_bytes and spec.kind.info.staging == "full"
                and spec.flops() < STREAM_FLOPS_PER_BYTE * gl)

    @property
    def db_key(self) -> str:
        """Identity of the results computed for this target: its name and constants."""
        return f"{self.name}@{self.costs.fingerprint()}"

    @property
    def hit_cost(self) -> tuple[int, ...]:
        """Per level: the cost of touching one line (0 for registers)."""
        return (0, 0, self.costs.l1_line, self.costs.l2_line, self.costs.gl_line)

    @property
    def parallel_setup_cost(self) -> int:
        return self.costs.parallel_setup

    @property
    def parallel_iter_cost(self) -> int:
        return self.costs.parallel_iter

    def max_limits(self) -> MemoryLimits:
        return MemoryLimits(self.capacity)


def target_named(name: str) -> Target:
    """The built-in target ``name`` (``"native"``: the widest this host runs); SpecError
    if none (``morello.targets.get``)."""
    from morello import targets

    return targets.get(name)


# Names whose rows moved to ``morello.targets``, for callers that still import them here.
_MOVED = {"AVX2": lambda t: t.avx2.TARGET, "AVX512": lambda t: t.avx512.TARGET,
          "TARGETS": lambda t: t.all(),
          "HOST_FLAGS": lambda t: {x.isa: t.isa(x.isa).host_flags for x in t.all().values()},
          "host_lacks": lambda t: t.host_lacks, "native_name": lambda t: t.native_name}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from morello import targets

        return _MOVED[name](targets)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def calibration_choice(name: str, calibration: str | None = None) -> str:
    """The cost constants ``parse_target`` takes for target ``name``: ``calibration`` if
    given (``"builtin"`` or a calibration file's path), else ``$MORELLO_CALIBRATION`` if
    set, else the file ``morello calibrate`` wrote if it exists, else ``"host"``: this
    host's first-use calibration (``morello.hostfit``, measured when first needed)."""
    import os

    from morello import costs as costsmod

    if calibration is None:
        calibration = os.environ.get("MORELLO_CALIBRATION") or None
    if calibration is None:
        path = costsmod.default_path(target_named(name).name)
        calibration = str(path) if path.exists() else "host"
    return calibration


def resolved_calibration(name: str, calibration: str | None = None, say=None) -> str:
    """``calibration_choice`` with ``"host"`` made a file (measured now on first use) or,
    where this host cannot measure the target, ``"builtin"``."""
    from morello import hostfit

    choice = calibration_choice(name, calibration)
    if choice != "host":
        return choice
    path = hostfit.ensure(target_named(name), say)
    return "builtin" if path is None else str(path)


def calibration_source(name: str, calibration: str | None = None) -> str:
    """Which constants a search for target ``name`` uses, and where they came from, in
    words for reports."""
    from morello import hostfit

    choice = calibration_choice(name, calibration)
    if choice == "host":
        target = target_named(name)
        path = hostfit.auto_path(target.name)
        if path.exists():
            return f"cost constants fitted to this host on first use ({path})"
        why = hostfit.cannot_fit(target) or "its calibration failed"
        return f"built-in cost constants (not fitted to this host: {why})"
    if choice == "builtin":
        return "built-in cost constants (one development host's; see `morello calibrate`)"
    return f"cost constants of {choice}"


def parse_target(name: str, threads: int = 1, calibration: str | None = None) -> Target:
    """The target called ``name``, assuming ``threads`` processors for parallel loops;
    ``"native"`` is the widest one this host runs (``native_name``).

    ``calibration`` picks the cost constants: ``"builtin"``, a calibration file's path, or
    None for ``$MORELLO_CALIBRATION`` if set, else the file ``morello calibrate`` writes
    (``morello.costs.default_path``) if it exists, else this host's first-use calibration
    (``morello.hostfit``; measured on the first call that needs it).

    A multi-threaded variant is a different target (named e.g. ``avx2-2t``): parallel loop
    costs depend on the processor count, so its results live in their own database. So do
    results under other constants: ``Target.db_key`` includes their fingerprint.
    """
    from pathlib import Path

    from morello import costs as costsmod
    from morello.limits import check_threads

    base = target_named(name)
    check_threads(threads)
    calibration = resolved_calibration(base.name, calibration)
    tgt = base
    if calibration != "builtin":
        consts = costsmod.load(Path(calibration), base.name)
        if consts != base.costs:
            tgt = replace(base, costs=consts)
    if threads == 1:
        return tgt
    return replace(tgt, name=f"{tgt.name}-{threads}t", processors=threads)


def pow2_floor(x: int) -> int:
    return 0 if x <= 0 else 1 << (x.bit_length() - 1)


def pow2_ceil(x: int) -> int:
    return 0 if x <= 0 else 1 << (x - 1).bit_length()


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """Units still available per level (registers for RF/VRF, lines for L1/GL)."""

    units: tuple[int, ...]

    def __hash__(self) -> int:
        return hash(self.units)

    def __post_init__(self) -> None:
        from morello.errors import SpecError

        if len(self.units) != NLEVELS or any(u < 0 for u in self.units):
            raise SpecError(f"bad memory limits {self.units}")
        for lvl in (Level.L1, Level.L2, Level.GL):
            u = self.units[lvl]
            if u & (u - 1):
                raise SpecError(f"{lvl} limit {u} is not a power of two")

    def subtract(self, level: Level, amount: int) -> MemoryLimits | None:
        """Limits after allocating ``amount`` units at ``level``; None if it doesn't fit."""
        cur = self.units[level]
        if amount > cur:
            return None
        left = cur - amount
        if not level.counts_registers:
            left = pow2_floor(left)
        units = list(self.units)
        units[level] = left
        return MemoryLimits(tuple(units))

    def __str__(self) -> str:
        return "[" + ", ".join(f"{l}={u}" for l, u in zip(LEVELS, self.units)) + "]"


def snap_peaks(peaks: tuple[int, ...]) -> tuple[int, ...]:
    """Peaks of cache levels round up to powers of two (limits are powers of two)."""
    return tuple(
        p if lvl.counts_registers else pow2_ceil(p) for lvl, p in zip(LEVELS, peaks)
    )
