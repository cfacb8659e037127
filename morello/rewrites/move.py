"""Move: place one operand in a faster level and/or a new layout.

``Move(operand, level, layout, vector_size)``::

    Matmul(lhs@GL, ...)  ->  alloc lhs' @level (layout, vector size)
                             Move(lhs -> lhs')            prologue, if the operand is read
                             Matmul(lhs'@level, ...)      body
                             Move(lhs' -> lhs)            epilogue, if the operand is written

A move into a cache (GL→L1, L2→L1, and GL→L2 for blocks of lhs) that keeps the layout is a
*cache view*: no copy and no logues, only the accounting of the lines it keeps there. A
view of a strided tensor is offered only when its rows are no more than L1's ways: the
row stride is not part of a Spec, and when it is a multiple of 4 KiB (any power-of-two matrix
of 1024 floats) every row falls in the same cache sets, so a taller view would be evicted while
the model counts it as resident. Taller strided tiles are tiled down first, or packed. Moves
into new layouts (packing) are allowed only along a fixed order of layouts, so a chain of
relayouts is finite. Inputs are packed into
GL buffers (any layout: a whole transposed or panelled copy) or, for packed layouts,
straight into L1 buffers (a B panel sized for L1, copied next to the microkernel that
streams it, as BLAS libraries do).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from morello import layouts
from morello.cost import move_pair_cost, own_units, writeback_cost
from morello.dtypes import Dtype
from morello.kernels import table_for
from morello.layouts import Layout
from morello.memory import DESTINATIONS, Level, Target
from morello.nodes import NEW, Block
from morello.rewrites.base import Expansion
from morello.specs import PrimKind, Spec
from morello.tensorspec import TensorSpec, fresh

# Bump when the rules of ``layout_candidates`` or ``operand_moves`` change: Move indices
# depend on them (``morello.identity.family_fingerprint``).
LAYOUT_SCHEME = 7

# The dtype an input of this dtype is widened into by a conversion Move: bf16 weights
# into f32 (a shift), 8-bit integers into s16 (the operands of vpmaddwd).
WIDEN_TO = {Dtype.BF16: Dtype.F32, Dtype.U8: Dtype.S16, Dtype.S8: Dtype.S16}


@functools.lru_cache(maxsize=1 << 12)
def layout_candidates(shape: tuple[int, ...], packs: tuple[int, ...]) -> list[Layout]:
    """Destination layouts for a relayout move, in their fixed order (deduplicated):
    row-major, column-major, then panels of each of ``packs`` (``Target.pack_sizes``)."""
    rank = len(shape)
    base = [layouts.row_major(rank)]
    if rank >= 2:
        base.append(layouts.col_major(rank))
    cands = list(base)
    if rank >= 2:
        for p in packs:
            for lay, dim in ((base[1], rank - 1), (base[0], rank - 2)):
                if shape[dim] > p and shape[dim] % p == 0:
                    cands.append(layouts.packed(lay, dim, p))
    out: list[Layout] = []
    for lay in cands:
        canon, _ = layouts.canonicalize(lay, shape, len(lay.dims))
        if canon not in out:
            out.append(canon)
    return out


@dataclass(frozen=True, slots=True)
class Move:
    """Move operand ``operand`` to ``level`` with ``layout`` (None keeps it: a cache view
    for L1) and ``vector_size`` (VRF only); ``dtype`` widens it on the way (None keeps
    its dtype; a view never converts)."""

    operand: int
    level: Level
    layout: Layout | None = None
    vector_size: int | None = None
    dtype: Dtype | None = None

    def destination(self, spec: Spec) -> tuple[TensorSpec, bool] | None:
        """The new operand TensorSpec and whether it is a cache view."""
        return self.destination_of(spec.operands[self.operand])

    def destination_of(self, t: TensorSpec) -> tuple[TensorSpec, bool] | None:
        if self.layout is None:
            if not self.level.is_cache or self.level >= t.level or self.dtype is not None:
                return None
            return replace(t, level=self.level), True
        if self.level is Level.VRF:
            if self.vector_size is None:  # a hand-built Move into registers needs one
                return None
            phys = self.layout.physical_shape(t.shape)
            if not phys or phys[-1] % self.vector_size:
                return None
        new = fresh(t.shape, self.dtype or t.dtype, self.level, self.layout,
                    self.vector_size)
        if new == t:
            return None
        return new, False

    def units(self, new: TensorSpec, target: Target) -> int:
        # GL is not a constrained resource: buffers there are not counted.
        return 0 if self.level is Level.GL else new.units(target)

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        dest = self.destination(spec)
        if dest is None:
            return None
        new, view = dest
        t = spec.operands[self.operand]
        units = self.units(new, target)
        limits = spec.limits.subtract(self.level, units)
        if limits is None:
            return None
        body = spec.with_operand(self.operand, new, limits)
        children = []
        info = spec.kind.info
        if not view and self.operand in info.reads:
            children.append(_move_spec(t, new, spec, limits))
        children.append(body)
        if not view and self.operand in info.writes:
            children.append(_move_spec(new, t, spec, limits))
        return Expansion(
            tuple(children),
            (1,) * len(children),
            view_cost(t, new, view, self.operand in info.writes, target),
            own_units(self.level, units),
        )

    def apply(self, spec: Spec, target: Target) -> Block:
        """A block that allocates the destination (nothing for a view) and runs the
        prologue copy, the body on the new operand, and the epilogue copy."""
        dest = self.destination(spec)
        assert dest is not None  # apply follows a successful expand
        new, view = dest
        if view:  # the same buffer, now counted as resident in a cache
            return Block((tuple(range(len(spec.operands))),))
        body = tuple(NEW if j == self.operand else j for j in range(len(spec.operands)))
        info = spec.kind.info
        steps: list[tuple[int, ...]] = []
        if self.operand in info.reads:
            steps.append((self.operand, NEW))
        steps.append(body)
        if self.operand in info.writes:
            steps.append((NEW, self.operand))
        return Block(tuple(steps), (new,))

    def __str__(self) -> str:
        lay = "view" if self.layout is None else str(self.layout)
        vs = f", vs={self.vector_size}" if self.vector_size else ""
        dt = f", {self.dtype}" if self.dtype else ""
        return f"Move(op={self.operand}, {self.level}, {lay}{vs}{dt})"


def view_cost(t: TensorSpec, new: TensorSpec, view: bool, written: bool, target: Target) -> int:
    """A Move's own cost (``move_pair_cost``); for a cache view of an output in DRAM, the
    write-back of its lines too (``writeback_cost``)."""
    cost = move_pair_cost(t, new, view, target)
    return cost + writeback_cost(t, written, target) if view else cost


def _move_spec(src: TensorSpec, dst: TensorSpec, parent: Spec, limits) -> Spec:
    return Spec(PrimKind.MOVE, src.shape, (src, dst), parent.serial_only, limits)


@functools.lru_cache(maxsize=1 << 16)
def operand_moves(kind: PrimKind, i: int, t: TensorSpec, target: Target) -> tuple[Move, ...]:
    """The Move actions of operand ``i`` (of a Spec of ``kind``), in their fixed order."""
    acts: list[Move] = []
    info = kind.info
    if info.staging == "views":
        # Moves, fills and the kernels of memory-bound kinds only stage operands through
        # L1 (a cache view); a copy would re-create a Move Spec one level down.
        if t.level > Level.L1 and _view_fits(t, target):
            acts.append(Move(i, Level.L1, None))
        # Kinds that pass over an operand more than once (a softmax's max, exps and
        # normalization) may view rows L1 cannot hold in L2, so that the later passes
        # are priced as L2 hits.
        if i in info.l2_views and t.level is Level.GL \
                and target.capacity[Level.L1] < t.units(target) <= target.capacity[Level.L2]:
            acts.append(Move(i, Level.L2, None))
        # A problem in DRAM may write an output (not read first) into an L1 buffer, to
        # be stored to main memory past the caches (``StreamStore``): no read of the
        # lines before they are written, no write-back.
        if target.gl_in_dram and kind is not PrimKind.MOVE and i in info.writes \
                and i not in info.reads and t.level is Level.GL and t.contiguous \
                and t.dtype is Dtype.F32 and t.units(target) <= target.capacity[Level.L1]:
            acts.append(Move(i, Level.L1, _row_major_for(t.shape)))
        return tuple(acts)
    cands = layout_candidates(t.shape, target.pack_sizes)
    # Only relayout "forward" in the candidate order, so relayout chains are finite.
    start = cands.index(t.layout) + 1 if t.layout in cands else 0
    if t.layout in (quad_layout(t.shape), pair_layout(t.shape)):
        start = len(cands)  # the kernels' orders are the last of the chain
    # An input of a narrow dtype is widened by the Moves that copy it (into registers
    # or a buffer); kernels compute in the wide dtype. Views keep it narrow.
    wide = WIDEN_TO.get(t.dtype) if i not in info.writes and info.widens else None
    for level in DESTINATIONS[t.level]:
        if level is Level.VRF:
            # Only operands some kernel reads from vector registers (not Matmul's lhs).
            if i not in info.vrf_operands:
                continue
            rm = _row_major_for(t.shape)
            phys = rm.physical_shape(t.shape)
            dt = wide or t.dtype
            table = table_for(target)
            for vb in reversed(target.vector_bytes):
                vs = vb // dt.size
                # Narrower vectors only where the wider ones cannot tile the row (or
                # the target has no vector of that width for the dtype: AVX-512's
                # integer kernels take 256-bit vectors).
                if phys and phys[-1] % vs == 0 and table.has_vector(dt, vs):
                    acts.append(Move(i, level, rm, vs, wide))
                    break
        elif level is Level.RF:
            # Scalar registers hold scalars: kernels only read RF operands of size 1.
            if t.volume == 1:
                acts.append(Move(i, level, _row_major_for(t.shape), None, wide))
        else:
            if level is Level.L1 and t.level > Level.L1 and _view_fits(t, target):
                acts.append(Move(i, level, None))
            # An L2 view only of lhs blocks L1 cannot hold (the BLAS block of A that the
            # microkernels of many column tiles reuse) and of rhs panels read in place, as
            # wide as the target's register tile (a column panel of B over all of k,
            # reused by every row tile of A). Wider views slowed the search or raised peak
            # memory for the same programs (docs/model-notes.md).
            if level is Level.L2 and t.level is Level.GL \
                    and t.units(target) > _l1_room(t, target) \
                    and (i in info.l2_views or (i in info.l2_panels
                                                and t.shape[-1] == target.l2_panel_cols
                                                and not t.contiguous)
                         or _row_output(info, i, t)):
                acts.append(Move(i, level, None))
            # Packing and transposing copies: inputs only, into GL buffers; packed
            # panels also straight into L1-sized buffers, from main memory.
            # (An operand to be widened is copied only by the widening Moves below.)
            if i not in info.writes and wide is None:
                if level is Level.GL:
                    acts.extend(Move(i, level, lay) for lay in cands[start:])
                elif level is Level.L1 and t.level > Level.L1:
                    acts.extend(Move(i, level, lay) for lay in cands[start:] if lay.is_packed)
                # Bytes kept narrow may be packed in quads of rows (vpmaddubsw's order).
                # (From row-major only, so that no chain of relayouts is offered.)
                quad = (quad_layout(t.shape) if t.dtype.size == 1 and start == 1
                        and i in info.grouped_rows else None)
                if quad is not None and quad != t.layout and level in (Level.GL, Level.L1):
                    acts.append(Move(i, level, quad))
            if i not in info.writes:
                # Widening copies: bf16 into any candidate layout (the same one
                # included); 8-bit integers into row-major or row pairs (vpmaddwd's order).
                if wide is Dtype.F32 and level in (Level.GL, Level.L1):
                    acts.extend(Move(i, level, lay, None, wide) for lay in cands)
                elif wide is Dtype.S16 and level in (Level.GL, Level.L1):
                    grouped = i in info.grouped_rows
                    pair = pair_layout(t.shape) if grouped else None
                    acts.extend(Move(i, level, lay, None, wide)
                                for lay in (cands[0], pair) if lay is not None)
                    # Where the target multiplies bytes exactly four at a time
                    # (vpdpbusd), they may also stay narrow, in quads of rows.
                    quad = (quad_layout(t.shape) if target.byte_dots and start == 1
                            and grouped else None)
                    if quad is not None and quad != t.layout:
                        acts.append(Move(i, level, quad))
    return tuple(acts)


@functools.lru_cache(maxsize=1 << 12)
def pair_layout(shape: tuple[int, ...]) -> Layout | None:
    """Rows taken in pairs, each pair interleaved (``[k/2][n][2]``): the operand order of
    ``vpmaddwd``, for s16 copies of integer matrices (None if the rows are odd)."""
    rank = len(shape)
    if rank < 2 or shape[rank - 2] % 2:
        return None
    lay = layouts.packed(layouts.row_major(rank), rank - 2, 2)
    return layouts.canonicalize(lay, shape, len(lay.dims))[0]


@functools.lru_cache(maxsize=1 << 12)
def quad_layout(shape: tuple[int, ...]) -> Layout | None:
    """Rows taken four at a time, each column's four bytes side by side
    (``[k/4][n][4]``): the operand order of vpmaddubsw + vpmaddwd (None unless the rows
    are a multiple of 4)."""
    rank = len(shape)
    if rank < 2 or shape[rank - 2] % 4:
        return None
    lay = layouts.packed(layouts.row_major(rank), rank - 2, 4)
    return layouts.canonicalize(lay, shape, len(lay.dims))[0]


def _row_output(info, i: int, t: TensorSpec) -> bool:
    """A matvec's output, one row (``x[1xK] . W[KxN]``'s y): viewed in L2 when L1 cannot
    hold it, W is then read in runs of whole rows, y's tiles coming from L2 (faster than
    blocks of y in L1: docs/model-notes.md)."""
    return i in info.writes and info.row_dim is not None and t.volume == t.shape[-1]


def _l1_room(t: TensorSpec, target: Target) -> int:
    """Units of ``t`` above which an L2 view of it is offered: L1's capacity, or half of
    it for one row (a matvec's x or y), which L1 holds only without the other (x and y of
    1x8192x8192 are 32 KiB each: with neither in L2, gemma's stripes did not apply)."""
    cap = target.capacity[Level.L1]
    return cap // 2 if t.volume == t.shape[-1] else cap


def _view_fits(t: TensorSpec, target: Target) -> bool:
    """Whether an L1 view of ``t`` stays resident whatever its row stride."""
    return t.contiguous or t.blocks <= target.l1_ways


@functools.lru_cache(maxsize=1 << 12)
def _row_major_for(shape: tuple[int, ...]) -> Layout:
    return layouts.canonicalize(layouts.row_major(len(shape)), shape, len(shape))[0]
