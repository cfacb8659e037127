"""What the emitter prefetches: the register tile loaded next (``_prefetch_next``), and
the next tile of an operand read in several passes (``_stream_next``, asked of the kernel
of the second pass through ``OperandView.next_tile``)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from morello.codegen.affine import Affine, Var
from morello.codegen.views import Buffer, OperandView
from morello.codegen.writer import Writer
from morello.impl import Impl
from morello.memory import Level, Target
from morello.nodes import NEW, Block
from morello.rewrites.move import Move
from morello.specs import PrimKind
from morello.targets.isa import Isa

# How far ahead, in rows (one run of a multi-pass loop's passes), a loop over main
# memory prefetches (``_NextTile.offset``): the next row's lines, asked for during this
# row's exps, arrived too late for its max pass; more than two rows gained nothing, and
# tiles of several rows keep one tile on. Rows in pieces count as one row.
DRAM_PASSES_AHEAD = 2

# At most this many prefetches per loop iteration (a register tile has at most 32 lines).
PREFETCH_MAX_LINES = 32


class Prefetcher:
    """The emitter's prefetch planning (a part of ``codegen.emit._Emitter``, which gives it
    ``w``, ``isa``, ``target``, ``dram``, ``next_tiles`` and ``loops``)."""

    w: Writer
    isa: Isa
    target: Target
    dram: bool
    next_tiles: list[_NextTile]
    loops: list[_Enclosing]

    def _prefetch_next(self, impl: Impl, body: Impl, refs, dims, var: Var, size: int,
                       rem: int) -> None:
        """If the loop body starts by loading a tile from main memory into registers (the C
        tile of a register-tile matmul), prefetch the tile loaded next first: its lines then
        arrive while this iteration computes. On the last iteration that is the first tile
        of the enclosing loop's next iteration, when this loop is all of that loop's body."""
        o = self._register_load(body)
        if o is None or dims[o] is None or refs[o].buffer.registers:
            return
        t = body.spec.operands[o]
        if t.level is not Level.GL or not t.shape:
            return
        # Each row's lines, and the line of its last element: caller arrays need not be
        # aligned to a line (numpy's are to 16 bytes), so a row may reach one line further.
        per_line = max(1, self.target.line_bytes // t.dtype.size)
        cols = sorted({*range(0, t.shape[-1], per_line), t.shape[-1] - 1})
        lines = [(*lead, c) for lead in itertools.product(*(range(n) for n in t.shape[:-1]))
                 for c in cols]
        if len(lines) > PREFETCH_MAX_LINES:
            return
        nxt = OperandView(refs[o].shifted(dims[o], Affine.var(var, size) + size), t)
        outer = self.loops[-1] if self.loops and _views_to(self.loops[-1].body, impl) else None
        if rem or outer is None or outer.dims[o] is None:
            outer = None
        self.w.open(f"if ({var.name} + 1 < {var.extent}) {{")
        for c in lines:
            self.w.line(self.isa.prefetch(nxt.at(c).ptr(0), Level.L1))
        if outer is not None:
            after = OperandView(refs[o].shifted(outer.dims[o], outer.size), t)
            self.w.reopen(f"}} else if ({outer.var.name} + 1 < {outer.var.extent}) {{")
            for c in lines:
                self.w.line(self.isa.prefetch(after.at(c).ptr(0), Level.L1))
        self.w.close()

    def _stream_next(self, body: Impl, refs, dims, var: Var, size: int) -> int:
        """Ask for the next iteration's tile of each operand the body reads from main
        memory in several passes (a softmax row: its max, then its exps, then...) to be
        prefetched during the second pass: the first brings this tile into L1, and the
        later ones touch no memory, so the hardware prefetchers idle while the core
        computes. The kernel of that pass emits the prefetches through its loop
        (``OperandView.next_tile``) if it can. Only for tiles that are one contiguous run
        and fit half of L1 beside this one, issued in the second pass (in the first, or
        all at once, they came too late or evicted this tile). Beyond the last-level
        cache, into L2 instead, and tiles up to half of L2: into L1 the next row evicted
        this one's. From main memory, the prefetched tile is as many tiles on
        as puts the prefetches ``DRAM_PASSES_AHEAD`` rows ahead (``_NextTile.offset``). Returns
        how many operands it asked for (kept in
        ``self.next_tiles`` while the body is emitted)."""
        reads = body.spec.kind.info.reads
        writes = body.spec.kind.info.writes
        level = Level.L2 if self.dram else Level.L1
        room = self.target.capacity[level] * self.target.line_bytes // 2
        pushed = 0
        for o, (r, d) in enumerate(zip(refs, dims)):
            t = body.spec.operands[o]
            if (d is None or r.buffer.registers or o not in reads or o in writes
                    or r.buffer.tensor.level is not Level.GL or not t.contiguous
                    or not self.target.line_bytes <= t.bytes <= room or var.extent < 2):
                continue
            here = OperandView(r, t)._offset()
            there = OperandView(r.shifted(d, size), t)._offset()
            if not isinstance(here, Affine) or not isinstance(there, Affine):
                continue
            step = (there + here.scaled(-1)).constant
            if not step:
                continue
            # How many tiles on it may prefetch: from main memory as many as fit the
            # room, within the LLC the next.
            most = max(1, room // t.bytes) if self.dram else 1
            self.next_tiles.append(_NextTile(
                r.buffer, var.name, var.extent, step, d, t.shape[d], most,
                self.isa.hint(Level.L2 if self.dram else Level.L1)))
            pushed += 1
        return pushed

    def _ask_prefetch(self, impl: Impl, ops: list[OperandView]) -> list[tuple[int, _NextTile]]:
        """Set ``next_tile`` on the operands of a kernel that is the second pass over a
        tile ``_stream_next`` asked for; returns ``(operand, request)`` pairs."""
        asked: list[tuple[int, _NextTile]] = []
        if not self.next_tiles:
            return asked
        reads = impl.spec.kind.info.reads
        for nt in self.next_tiles:
            if nt.done:
                continue
            for i in reads:
                if ops[i].ref.buffer is nt.buffer:
                    # A pass is the kernels of one kind: unrolled copies, and the pieces
                    # and tail of a split row (1000x20000's max in 8192 and 3616 floats),
                    # count once.
                    nt.passes.add(impl.spec.kind)
                    if len(nt.passes) == 2 and ops[i].next_tile is None:
                        ops[i].next_tile = nt.offset(ops[i].spec.shape[nt.dim])
                        ops[i].next_tile_hint = nt.hint
                        asked.append((i, nt))
                    break
        return asked

    def _register_load(self, impl: Impl) -> int | None:
        """The operand of ``impl``'s Spec whose tile ``impl`` first copies into registers
        (through cache views), or None if it does not start so."""
        node = impl.action.apply(impl.spec, self.target)
        if not isinstance(node, Block) or not node.steps:
            return None
        if not node.allocs:  # a view: the same operands
            if len(impl.children) != 1:
                return None
            inner = self._register_load(impl.children[0])
            return None if inner is None else node.steps[0][inner]
        first = node.steps[0]
        if node.allocs[0].level is not Level.VRF or len(first) != 2 or first[1] != NEW \
                or first[0] == NEW or impl.children[0].spec.kind is not PrimKind.MOVE:
            return None
        return first[0]


def _views_to(body: Impl, impl: Impl) -> bool:
    """Whether ``body`` is ``impl`` under cache views only (which emit no code), so that
    ``impl`` is all that ``body`` runs."""
    while body is not impl:
        act = body.action
        if not (isinstance(act, Move) and act.layout is None and len(body.children) == 1):
            return False
        body = body.children[0]
    return True


@dataclass(frozen=True)
class _Enclosing:
    """A serial loop being emitted: its body, variable, step and operand dims (for the
    prefetch of the next tile across it: ``Prefetcher._prefetch_next``)."""

    body: Impl
    var: Var
    size: int
    dims: list


@dataclass
class _NextTile:
    """A request of ``Prefetcher._stream_next``: prefetch a later tile of ``buffer`` (the
    next, or further on from main memory: ``offset``) in the second kernel that reads
    it."""

    buffer: Buffer
    var: str  # the loop's index
    extent: int
    step: int  # elements from one tile to the next
    dim: int  # the buffer's dim the loop walks
    size: int  # the tile's size along it
    most: int  # tiles on at most
    hint: str  # the ISA's prefetch hint (``Isa.hint``)
    passes: set = field(default_factory=set)  # the kinds of the kernels that read it
    done: bool = False

    def offset(self, pass_size: int) -> str:
        """The C expression of the prefetched tile's offset, for a pass over
        ``pass_size`` of the tile's ``size`` along ``dim`` at a time (a row of a
        softmax's tile of rows): the tile that puts the prefetches DRAM_PASSES_AHEAD
        rows ahead, at most ``most`` tiles on (1 within the LLC)."""
        per_tile = max(1, self.size // max(1, pass_size))
        ahead = min(self.most, -(-DRAM_PASSES_AHEAD // per_tile))
        return f"{self.var} + {ahead} < {self.extent} ? {ahead * self.step} : 0"
