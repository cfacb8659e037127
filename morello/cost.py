"""The affine cost model.

A Cost is ``(main, peaks, depth)`` ordered lexicographically (ties then go to the lowest
action index). Every action's cost is an affine rule over its children (a ``Rule``):

    main  = const + sum(coef_i * child_main_i)          (saturating at MAX_COST)
    peaks = snap_up(own + max_i child_peaks_i)           (per level)
    depth = 1 + max_i child_depth_i

Loops weight their main body by its iteration count and boundary bodies by 1; moves add
the cost of touching source and destination; kernels have no children. This is the only
form the DP core (``morello._dp``) evaluates.
"""
from __future__ import annotations

from dataclasses import dataclass

from morello.dtypes import Dtype
from morello.memory import LEVELS, Level, Target, snap_peaks
from morello.tensorspec import TensorSpec

MAX_COST = 1 << 62


@dataclass(frozen=True, slots=True, order=True)
class Cost:
    main: int
    peaks: tuple[int, ...]
    depth: int

    def __str__(self) -> str:
        return f"{self.main}"


def sat(x: int) -> int:
    return x if x < MAX_COST else MAX_COST


# Runs of main memory this long (a page) or longer pay all of ``gl_ramp`` at their start,
# beyond ``gl_run``, shorter ones their share of it: the prefetchers follow a run only
# after they have ramped up on it.
RAMP_BYTES = 4096

# Runs at least this long, read side by side by a loop, save ``Target.sweep_line_saving``
# per line (``sweep_saving``).
SWEEP_BYTES = 8192


# Runs of an L1 tensor this long or longer cost no more than a contiguous tensor's lines
# in a problem beyond the LLC (``move_cost``): each continues a stream from main memory.
# Within the LLC such strips ran slower than a row at a time, so there the rule is off.
LONG_RUN_BYTES = 2048


def run_bytes(t: TensorSpec) -> int:
    """Bytes of each contiguous run of ``t``."""
    return t.bytes // max(1, t.blocks)


def run_cost(nbytes: int, target: Target) -> int:
    """The start of a run of ``nbytes`` in main memory: ``gl_run``, and ``gl_ramp`` more
    for a run of ``RAMP_BYTES`` or longer, its share of it for a shorter one (so that
    cutting a run in two never makes it cheaper): the prefetchers restart on every run,
    which costs more than an isolated strided line (``gl_run``) alone."""
    run, ramp = target.run_costs()
    return run + ramp * min(nbytes, RAMP_BYTES) // RAMP_BYTES


def sweep_saving(run: int, blocks: int, dtype: Dtype, target: Target) -> int:
    """What a loop saves on the lines of ``blocks`` runs of ``run`` bytes of main memory
    that it reads side by side from start to end (``rewrites.tile.stream_discount``; every
    kernel prices its lines as one stream's, ``gl_line``): ``Target.sweep_line_saving``
    per line, for runs of ``SWEEP_BYTES`` or longer, of ``Target.sweep_dtypes``, and at
    most half the runs the prefetchers follow: the kernel that reads such rows,
    WidenAxpyLoop, prefetches as many rows below (``kernels.axpy.axpy_emit``). f32
    weights (no prefetch below) gain nothing from it, so they are not swept."""
    save = target.sweep_line_saving()
    if save <= 0 or dtype not in target.sweep_dtypes or run < SWEEP_BYTES \
            or not 2 <= blocks <= target.prefetch_streams // 2:
        return 0
    return save * blocks * (run // target.line_bytes)


def move_cost(t: TensorSpec, target: Target) -> int:
    """Cost of touching every line of ``t`` once.

    In main memory every separate contiguous run of ``t`` also pays its start
    (``run_cost``): the hardware prefetchers follow a run, and each new one starts with a
    miss (this is what ranks streaming a matrix row by row above walking it column block
    by column block).
    In L1, lines of a non-contiguous tensor cost ``strided_factor`` times more, unless its
    runs are ``LONG_RUN_BYTES`` or longer in a problem beyond the LLC (``gl_in_dram``:
    each then continues a stream from main memory, as a contiguous tensor's lines do).
    """
    hit = target.hit_cost[t.level]
    if hit == 0:
        return 0
    c = hit * t.units(target)
    if t.level is Level.GL:
        return c + run_cost(run_bytes(t), target) * t.blocks
    if t.contiguous or (target.gl_in_dram and run_bytes(t) >= LONG_RUN_BYTES):
        return c
    return target.costs.strided_factor * c


def move_pair_cost(src: TensorSpec, dst: TensorSpec, view: bool, target: Target) -> int:
    """What a Move from ``src`` to ``dst`` costs beyond its children: touching both, but
    for a cache view out of L2 only its lines in L2. Their touch in L1 is the loads of
    the kernel that reads the view, which its own cost counts; charging it again priced
    a panel of B streamed from L2 through the register tile (hidden under its FMAs) above
    the tile's FMAs, and kept B in L1 at the price of reloading C tiles."""
    if view and src.level is Level.L2:
        return move_cost(src, target)
    return move_cost(src, target) + move_cost(dst, target)


def writeback_cost(t: TensorSpec, written: bool, target: Target) -> int:
    """What writing the lines of ``t`` costs on top of touching them: nothing while main
    memory is the last-level cache, but for a problem in DRAM (``Target.in_dram``) each
    written line of main memory goes back to it, a second transfer (a store that misses
    first reads the line, then writes it back). Non-temporal stores (kernels marked
    ``Kernel.nontemporal``) avoid both the read and this cost; views of an output pay it."""
    if not (written and target.gl_in_dram and t.level is Level.GL):
        return 0
    return target.costs.gl_line * t.units(target)


def stream_cost(t: TensorSpec, target: Target, streams: int) -> int:
    """``move_cost`` of ``t`` when a kernel reads it from main memory as ``streams``
    runs side by side (a matvec's weight rows): on some hosts one stream does not reach
    the memory's bandwidth and several do, on others side by side is slower. A line costs
    ``gl_line`` for one stream and ``gl_line_parallel`` for the target's
    ``prefetch_streams`` (both measured by ``morello calibrate``), in between as
    ``_stream_line`` says. Only for kernels that read such streams themselves: loops over
    tiles keep ``move_cost`` (a read-and-write stream such as a relu measured no faster
    for it).
    """
    if t.level is not Level.GL:
        return move_cost(t, target)
    return (_stream_line(target, streams) * t.units(target)
            + run_cost(run_bytes(t), target) * max(t.blocks, streams))


def _stream_line(target: Target, streams: int) -> int:
    """The cost of a line of main memory read as one of ``streams`` runs side by side.
    Where side by side is cheaper (``gl_line_parallel < gl_line``), the more runs the
    closer to ``gl_line_parallel``; where it is dearer, any two or more cost
    ``gl_line_parallel``: where measured, fewer runs were no cheaper (docs/model-notes.md)."""
    k = target.costs
    s = max(1, min(streams, target.prefetch_streams))
    if k.gl_line_parallel > k.gl_line:
        return k.gl_line if s == 1 else k.gl_line_parallel
    return k.gl_line_parallel + (k.gl_line - k.gl_line_parallel) // s


def stripes_read_cost(t: TensorSpec, target: Target, stripes: int) -> int:
    """What a kernel pays to read ``t`` (contiguous) as ``stripes`` equal runs side by
    side, each from its own part of ``t``: in main memory, a line of runs that long costs
    ``gl_line_streams`` (several long runs side by side, which can read faster than one:
    docs/model-notes.md), and page-long runs ``_stream_line``'s price, so
    a run pays the difference in proportion to its page starts; each run its start. Out
    of main memory as ``stream_cost``, in L1 as ``side_by_side_surcharge``."""
    if t.level is Level.L1:
        return side_by_side_surcharge(t, target, stripes)
    if t.level is not Level.GL:
        return move_cost(t, target)
    k = target.costs
    run = max(1, t.bytes // stripes)
    extra = max(0, _stream_line(target, stripes) - k.gl_line_streams)
    line = k.gl_line_streams + extra * min(run, RAMP_BYTES) // run
    return line * t.units(target) + run_cost(run, target) * stripes


def side_by_side_surcharge(t: TensorSpec, target: Target, streams: int) -> int:
    """What reading ``t`` (in L1) as ``streams`` runs side by side costs beyond one
    stream, if it came from main memory: the cost of a kernel that reads its columns side
    by side from an L1 tile, since that tile is often a view of main memory
    (``Move(view)``), priced by the view as one stream and first read by the kernel, in
    the kernel's order. 0 where side by side is no dearer (``gl_line_parallel <=
    gl_line``) or for one stream. (A tile copied into L1 and read again pays it too: the
    model does not tell the two apart.)"""
    return max(0, _stream_line(target, streams) - target.costs.gl_line) * t.units(target)


def combine(const: int, coefs, own, children: list[Cost]) -> Cost:
    main = const
    for c, ch in zip(coefs, children):
        main = sat(main + c * ch.main)
    peaks = tuple(
        own[i] + max((ch.peaks[i] for ch in children), default=0)
        for i in range(len(LEVELS))
    )
    depth = 1 + max((ch.depth for ch in children), default=0)
    return Cost(main, snap_peaks(peaks), depth)


def loop_iterations(full: int, parallel: bool, target: Target) -> int:
    return -(-full // target.processors) if parallel else full


def own_units(level: Level, units: int) -> tuple[int, ...]:
    own = [0] * len(LEVELS)
    own[level] = units
    return tuple(own)
