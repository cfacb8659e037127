"""TileOut and Split: loops over one dim of a Spec.

``TileOut(dim, size, parallel)`` tiles output dim ``dim`` by ``size``::

    Matmul[1,m,k,n]  ->  for i in 0..n//size: Matmul[1,m,k,size]   (+ one boundary
                                                                    Matmul[1,m,k,n%size])

``Split(size)`` does the same over the reduction dim of an accumulating kind (k of a
MatmulAccum, the reduced dim of a MaxAccum or SumAccum)::

    MatmulAccum[1,m,k,n]  ->  for p in 0..k//size: MatmulAccum[1,m,size,n]  (+ boundary)

A parallel loop (only for non-serial Specs whose operands are all in L1/GL) runs its
iterations across processors; its bodies are serial.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from morello.cost import loop_iterations, run_bytes, run_cost, sweep_saving
from morello.kinds import fixed_dims
from morello.memory import NLEVELS, Level, Target
from morello.nodes import Loop
from morello.rewrites.base import Expansion
from morello.specs import Spec, operand_shapes, output_dims, reduction_dims


def spec_dim_of_output(spec: Spec, out_dim: int) -> int | None:
    """The Spec dim that output dim ``out_dim`` is (None: a constant dim)."""
    return output_dims(spec.kind, len(spec.shape), spec.params)[out_dim]


# Tile sizes the search tries, ascending: powers of two, as in the reference, for every dim.
TILE_SIZES = tuple(1 << i for i in range(31))


@functools.lru_cache(maxsize=64)
def tile_size_table(target: Target) -> tuple[tuple[int, bool], ...]:
    """Every tile size with whether it is a row-only size, ascending; the core
    (morello._dp) enumerates this same table.

    Row-only sizes (``target.row_tile_sizes``, e.g. 6 for the 6×16 AVX2 register tile:
    12 accumulators hide the FMA latency that 4×16's 8 barely cover) tile only the
    kind's ``row_dim`` (output dim 1 of Matmul and MatmulAccum). Offering 6 and 12 for
    every dim doubled the 64^3 search; offering them for rows only keeps the search near
    the powers of two."""
    rows = set(target.row_tile_sizes) - set(TILE_SIZES)
    return tuple(sorted([(s, False) for s in TILE_SIZES] + [(s, True) for s in rows]))


def _sizes(limit: int, target: Target, rows: bool = False):
    for s, row_only in tile_size_table(target):
        if s >= limit:
            return
        if row_only and not rows:
            continue
        yield s


def _tiled_spec(spec: Spec, sdim: int, size: int, serial: bool) -> Spec | None:
    dims = list(spec.shape)
    dims[sdim] = size
    shape = tuple(dims)
    ops = []
    for o, s in zip(spec.operands, operand_shapes(spec.kind, shape, spec.params)):
        if not o.valid_tile_shape(s):
            return None
        ops.append(o.tile(s))
    return Spec(spec.kind, shape, tuple(ops), serial, spec.limits, spec.params)


def loop_expansion(spec: Spec, sdim: int, size: int, parallel: bool, target: Target):
    extent = spec.shape[sdim]
    if not 1 <= size < extent:
        return None
    if parallel and (spec.serial_only or not all(
        o.level.can_parallel_tile for o in spec.operands
    )):
        return None
    serial = spec.serial_only or parallel
    body = _tiled_spec(spec, sdim, size, serial)
    if body is None:
        return None
    full, rem = divmod(extent, size)
    children, coefs = [body], [loop_iterations(full, parallel, target)]
    if rem:
        boundary = _tiled_spec(spec, sdim, rem, serial)
        if boundary is None:
            return None
        children.append(boundary)
        coefs.append(1)
    const = 0
    if parallel:
        const = target.parallel_setup_cost + target.parallel_iter_cost * coefs[0]
    elif full > 1:
        const = -stream_discount(spec, body, sdim, full, target)
    return Expansion(tuple(children), tuple(coefs), const, (0,) * NLEVELS)


def stream_discount(spec: Spec, body: Spec, sdim: int, full: int, target: Target) -> int:
    """Run starts the ``full`` iterations of a serial loop do not pay again.

    Main memory charges every contiguous run a tile touches its start (``cost.run_cost``:
    the prefetchers lose the stream there). A loop along the dim in which an operand's
    memory runs continue (its innermost, unpacked dim), over tiles with no more rows than
    the prefetchers follow, continues each row's stream from one iteration to the next:
    only the first iteration starts them, as runs ``full`` times as long (which may then
    pay the ramp of a long run, ``gl_ramp``, that a tile's short runs did not), and for
    a few such runs side by side their lines cost less (``cost.sweep_saving``). Every
    iteration's body pays for its tile's runs when it views or copies the tile, so the
    discount never exceeds what the bodies charged."""
    disc = 0
    for i, (parent, tile) in enumerate(zip(spec.operands, body.operands)):
        if parent.level is not Level.GL:
            continue
        d = spec.operand_dim(i, sdim)
        if d is not None and parent.stream_dim == d and tile.blocks <= target.prefetch_streams:
            run = run_bytes(tile)
            start = run_cost(run, target)
            disc += ((full - 1) * start - (run_cost(run * full, target) - start)) * tile.blocks
            # And the lines of a few whole rows read side by side (``cost.sweep_saving``),
            # less what the body's own loops saved on them already. Whole rows (the
            # parent one contiguous run): no enclosing loop can come back to other rows
            # between their pages (rows swept in pieces ran slower: docs/model-notes.md).
            if parent.blocks == 1:
                disc += (sweep_saving(run * full, tile.blocks, parent.dtype, target)
                         - full * sweep_saving(run, tile.blocks, parent.dtype, target))
    return disc


@dataclass(frozen=True, slots=True)
class TileOut:
    """Loop over output dim ``dim`` in tiles of ``size`` (see module docstring)."""

    dim: int
    size: int
    parallel: bool = False

    def spec_dim(self, spec: Spec) -> int | None:
        out = output_dims(spec.kind, len(spec.shape), spec.params)
        return out[self.dim] if 0 <= self.dim < len(out) else None

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        sdim = self.spec_dim(spec)
        if sdim is None or sdim in fixed_dims(spec.kind, len(spec.shape), spec.params):
            return None
        return loop_expansion(spec, sdim, self.size, self.parallel, target)

    def apply(self, spec: Spec, target: Target) -> Loop:
        sdim = self.spec_dim(spec)
        assert sdim is not None  # apply follows a successful expand
        return Loop(sdim, self.size, self.parallel)

    def __str__(self) -> str:
        return f"TileOut{'Par' if self.parallel else ''}(dim={self.dim}, size={self.size})"


@dataclass(frozen=True, slots=True)
class Split:
    """Loop over a reduction dim of an accumulating kind in chunks of ``size``.

    ``dim`` is the Spec dim; None (what the search enumerates for kinds with one reduction
    dim) means the kind's first reduction dim."""

    size: int
    dim: int | None = None

    def spec_dim(self, spec: Spec) -> int | None:
        red = reduction_dims(spec.kind, len(spec.shape), spec.params)
        if self.dim is None:
            return red[0] if red else None
        return self.dim if self.dim in red else None

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        sdim = self.spec_dim(spec)
        if not spec.kind.info.accumulates or sdim is None:
            return None
        return loop_expansion(spec, sdim, self.size, False, target)

    def apply(self, spec: Spec, target: Target) -> Loop:
        sdim = self.spec_dim(spec)
        assert sdim is not None  # apply follows a successful expand
        return Loop(sdim, self.size)

    def __str__(self) -> str:
        return f"Split({'' if self.dim is None else f'dim={self.dim}, '}size={self.size})"


def tile_actions(spec: Spec, target: Target):
    out_dims = output_dims(spec.kind, len(spec.shape), spec.params)
    top = max(spec.output.shape)
    row_dim = spec.kind.info.row_dim

    def sizes(d: int):
        return _sizes(top, target, rows=d == row_dim)

    # A scan kind's scan dim is never tiled (its output depends on all of it).
    fixed = fixed_dims(spec.kind, len(spec.shape), spec.params)
    dims = [d for d in range(len(out_dims))
            if out_dims[d] is not None and out_dims[d] not in fixed]
    acts = [TileOut(d, s) for d in dims for s in sizes(d)]
    if not spec.serial_only:
        acts += [TileOut(d, s, True) for d in dims for s in sizes(d)]
    return acts


def split_actions(spec: Spec, target: Target):
    """Split actions of an accumulating Spec: per reduction dim, every size below it."""
    if not spec.kind.info.accumulates:
        return []
    red = reduction_dims(spec.kind, len(spec.shape), spec.params)
    return [Split(s, None if j == 0 else d) for j, d in enumerate(red)
            for s in _sizes(spec.shape[d], target)]
