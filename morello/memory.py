"""Memory levels, targets and per-level memory limits.

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
from typing import TYPE_CHECKING

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


# Built in: the median, constant by constant, of three `morello calibrate --dry-run --json`
# runs on 2026-11-29 on the development machine (AMD EPYC, 2 vCPUs under KVM; one vector
# FMA = 0.17 ns = 4 units). The earlier hand-set values (L1 line 2, GL line 20, in FMA
# units) gave kernels that measured the same within noise at 64^3..1024^3; these also
# stream the matvec in longer runs (8 KiB instead of 2 KiB: 8-9.5 -> 9.7-10.5 GB/s).
# l2_line came later the same day, from one `morello calibrate` (the median of its 3 runs).
# gl_line_parallel (a line read as one of 8 runs of a page side by side, `cal_streams`,
# on huge pages as numpy's weights are) came on 2026-12-03 from this development machine:
# 1.30x the time per line of one run read alike (the median of 5 measurements, 1.24-1.32),
# so 162 = 1.30 * gl_line. (2 runs side by side took 2.0-2.9x; 8 runs of 32 MiB each 0.86x.
# An Intel Xeon host read 8 long runs at 0.53-0.77x; page runs were not measured there.
# Where page runs side by side are cheaper, `morello calibrate` says so, and the search
# may then read adjacent weight rows side by side: DotProductLoop.)
# gl_line_parallel is net of its runs' starts since gl_ramp came (the model charges them
# apart): 162 - (404 + 1130) / 64 = 138.
# gl_ramp (what a run of a page or longer costs to start beyond gl_run, shorter runs their
# share; `cal_rows`) was not measured there: 1130 is derived from that host's x.W kernel
# timed over column blocks of 4096 and 16384 (1.09-1.13x for the longer runs at 4.0 ms:
# about 65 ns a run start, less gl_run's 17 ns). `cal_rows` measured 1660-2010 on a Zen 3
# host (3 runs).
# gl_line_streams (a line read as one of 8 runs of 32 MiB side by side, `cal_streams`) is
# that host's 0.86x the time per line of one run, measured on 2026-12-03 with
# gl_line_parallel: 0.86 * 125 = 108. (A Zen 3 host: 0.70x, as `calibrate` measures it now, over
# runs of 8 MiB; runs of 32 MiB read no faster there than page-long ones.)
AVX2_COSTS = CostConstants(
    l1_line=10, l2_line=17, gl_line=125, gl_line_parallel=138, gl_line_streams=108,
    gl_run=404, gl_ramp=1130,
    strided_factor=4,
    fma=4, broadcast=5,
    vector_move=9, scalar_op=1, hsum=172, parallel_setup=23_940, parallel_iter=12,
    # Measured on a later Zen 4 KVM host (morello calibrate: 256 lines read 1.09-1.11x
    # faster than none in cal_stripes).
    gl_prefetch=256,
    # The same later host: a line read at a 4 KiB stride over 8 MiB (in L3) against one
    # read in sequence, 81 units (4 MiB: 64); over 256 MiB 299, as its gl_run. The ramp
    # there: 6 units (4 MiB: none), against 2193 from DRAM.
    llc_run=81,
)


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
    isa: str = "avx2"              # the kernel table and vector types (``morello.kernels``)
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
        read of the line first. With such stores a softmax of 4096x4096 (64 MiB in, 64 MiB
        out) ran 1.22x faster on a Zen 3 host (relu and add 1.21-1.39x), but a 4 MiB
        softmax (in L3) 0.94-0.97x as fast, 0.73x on a Zen 4 host: so it is a variant of
        the target (named ``...-dram``, with results of its own), chosen by the size of the
        problem, not a choice every Spec could make."""
        if self.gl_in_dram:
            return self
        return replace(self, name=f"{self.name}-dram", gl_in_dram=True)

    def in_llc(self) -> Target:
        """This target for a problem whose main-memory operands all fit the last-level
        cache (not ``needs_dram``): a run of main memory then starts from L3, at
        ``llc_run`` and with no ramp (``run_costs``), where beyond it a run start waits
        for DRAM and its prefetchers ramp up. Priced as from DRAM, a 64-column strip read
        as 8 short runs cost x.W 1x512x1024 its fastest program (the 16-lane axpy over
        Split(8), 1.19x the one the search took) and matmul+bias+relu 256^3 its unfused
        one. A variant of the target (``...-llc``, results of its own), as ``in_dram``."""
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
        targets whose kernels measured it (``sweep_dtypes``). x.W bf16, 4 weight rows
        per sweep against 8, the two targets' programs alternated in the same rounds (41,
        Zen 4): avx2 1x2048x16384 1.07x, 1x2048x12288 1.12x, 1x2048x7168 1.03x,
        1x4096x8192 0.99x; avx512 (zmm) 0.99x, 1.02x, 0.89x, 0.97x."""
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
        only in part (it is shared with other cores, and a victim cache on AMD). bf16
        matvecs on a Zen 4 host with 32 MiB, priced and emitted as from DRAM against as
        from L3, paired (benchmarks/ab_programs.py, 7 rounds), avx2 and avx512, x.W and
        W[N x K]: 24-29 MB (1x4096x3072, 1x2048x7168, 1x3000x5000) 1.20-1.62x; 16-22 MB
        0.74-1.04x, so they stay in L3, as do f32 matmuls (20-24 MiB: 0.97-1.04x) and
        softmaxes (1536x1536, 18 MiB in all: 0.71-0.79x)."""
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


AVX2 = Target(
    name="avx2",
    # 16 scalar and 16 vector registers; L1d is 32 KiB per core here (512 lines). L2 is
    # 512 KiB; the model may fill half of it (4096 lines), as BLAS libraries size the block
    # of A they keep there, leaving room for B panels and C. (With all of it, the
    # search picked 512 KiB A blocks and 512^3 ran slower.)
    capacity=(16, 16, 512, 4096, 1 << 25),
    costs=AVX2_COSTS,
    vector_bytes=(16, 32),
    line_bytes=64,
    l1_ways=8,
    row_tile_sizes=(6,),
    pack_sizes=(8, 16),
    prefetch_streams=8,
    processors=1,
    cflags=("-mavx2", "-mfma"),
    # bf16 weights: WidenAxpyLoop prefetches the rows below its sweep (``cost.sweep_saving``).
    sweep_dtypes=(Dtype.BF16,),
)

# AVX-512 (F, BW, VL and VNNI: Ice Lake, Sapphire Rapids, Zen 4 and later; not
# Skylake-SP): the same caches and costs per vector op, 32 vector registers of up to 64
# bytes (``morello.kernels.avx512``). Emitted anywhere; run only where the host has it.
AVX512 = Target(
    name="avx512",
    capacity=(16, 32, 512, 4096, 1 << 25),
    costs=AVX2_COSTS,
    vector_bytes=(16, 32, 64),
    line_bytes=64,
    l1_ways=8,
    row_tile_sizes=(6, 12),
    # Panels of up to 4 zmm vectors feed the 6x64 register tile (OuterProductLoopWide).
    # Paired against panels of 8 and 16 (benchmarks/ab_programs.py, 9 rounds): 256^3
    # 1.05x, 1024^3 1.09x, 200^3 0.96x; the cold 1024^3 search 29 s against 24 s.
    pack_sizes=(16, 32, 64),
    # A Matmul's B panel of 64 columns (the 6x64 register tile's width) may be viewed in
    # L2 (``KindInfo.l2_panels``): the whole k of a column panel of B stays there, reused
    # by every row tile of A, and C tiles stay in registers over all of k (no packing,
    # no C reloads). Paired against the programs without it (benchmarks/ab_programs.py,
    # 7-9 rounds): 1024^3 1.12-1.18x, 512^3 1.13-1.14x, 256^3 1.09-1.11x, 200^3 0.97x
    # (rows 800 bytes apart: half of them straddle lines); the cold 1024^3 search of
    # this target 1.1-1.3x longer (3 alternating runs), peak RSS 504 -> 548 MiB.
    l2_panel_cols=64,
    prefetch_streams=8,
    processors=1,
    cflags=("-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni"),
    isa="avx512",
    byte_dots=True,
)

TARGETS = {AVX2.name: AVX2, AVX512.name: AVX512}

# The /proc/cpuinfo flags a target's code needs.
HOST_FLAGS = {"avx2": ("avx2", "fma"),
               "avx512": ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni")}


def _host_flags() -> list[str] | None:
    """The CPU flags /proc/cpuinfo lists, or None where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].split() for line in f
                         if line.startswith("flags")), None)
    except OSError:
        return None


def native_name() -> str:
    """The widest target this host runs (``--target native``): avx512 where /proc/cpuinfo
    lists its flags, else avx2 (also where the flags cannot be read)."""
    flags = _host_flags()
    return AVX512.name if flags is not None and host_lacks(AVX512, flags) is None \
        else AVX2.name


def host_lacks(target: Target, flags: list[str] | None = None) -> str | None:
    """Why this host (or a CPU with these ``flags``) cannot run ``target``'s code (the
    CPU flags it lacks), or None; None too where /proc/cpuinfo cannot be read (the
    compiler or the CPU will say)."""
    if flags is None:
        flags = _host_flags()
    if flags is None:
        return None
    missing = [x for x in HOST_FLAGS.get(target.isa, ()) if x not in flags]
    if not missing:
        return None
    return (f"this CPU cannot run {target.isa} code (no {', '.join(missing)} in "
            "/proc/cpuinfo): emit it for another machine, or use --target avx2")


def target_named(name: str) -> Target:
    """The built-in target ``name`` (``"native"``: ``native_name()``); SpecError if none."""
    from morello.errors import SpecError

    try:
        return TARGETS[native_name() if name == "native" else name]
    except KeyError:
        raise SpecError(f"unknown target {name!r}; known: {', '.join(TARGETS)}, native") \
            from None


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
        path = hostfit.auto_path(target_named(name).name)
        if not path.exists():
            why = hostfit.cannot_fit(target_named(name))
            return f"built-in cost constants ({why} to fit them to this host)"
        choice = str(path)
    if choice == "builtin":
        return "built-in cost constants (one development host's; see `morello calibrate`)"
    if choice == str(hostfit.auto_path(target_named(name).name)):
        return f"cost constants fitted to this host on first use ({choice})"
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
