"""Emit C with vector intrinsics for an Impl tree.

The emitter speaks the Impl vocabulary of ``morello.nodes`` only (Loop, Block with its
buffer, KernelCall): each Impl node's action says what it is through ``apply``, so actions
add no branch here. Vector C types and kernels come from the target's kernel table.

Every operand of the Spec being emitted is a *reference* into a buffer: a memory buffer
(``MemRef``: a C array with a layout, the tile origin as C expressions) or a register buffer
(``RegRef``: one C variable per vector (VRF) or per element (RF); origins are constants).
Loops whose tiles index register buffers are fully unrolled so register tiles stay in
named variables, which the C compiler keeps in registers.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from importlib import resources

from morello import targets
from morello.codegen.affine import Affine, Var
from morello.codegen.writer import Namer, Writer
from morello.errors import MorelloError
from morello.impl import Impl
from morello.kernels import KernelTable, table_for
from morello.layouts import Layout
from morello.memory import Level, Target
from morello.nodes import NEW, NEW2, Block, KernelCall, Loop, Nest, NestStep
from morello.rewrites.move import Move
from morello.specs import PrimKind, Spec
from morello.tensorspec import TensorSpec

Coord = Affine  # a tile origin: affine in the enclosing loops' variables
Offset = Affine | str  # a buffer offset; C text only where a pack division stays

def partial(name: str) -> str:
    return resources.files("morello.codegen").joinpath("partials").joinpath(name).read_text()


def _term(x: Coord, pack: int | None, inner: bool) -> Offset:
    if not pack:
        return x
    dm = x.divmod(pack)
    if dm is not None:
        return dm[1] if inner else dm[0]
    return f"(({x}) % {pack})" if inner else f"(({x}) / {pack})"


def index_expr(layout: Layout, shape: tuple[int, ...], origin: tuple[Coord, ...]) -> Offset:
    """Buffer offset of ``origin`` for a buffer of ``shape`` laid out by ``layout``."""
    total = Affine()
    text = []
    for d, p, inner, stride in layout.index_terms(shape):
        t = _term(origin[d], p, inner)
        if isinstance(t, Affine):
            total = total + t.scaled(stride)
        else:
            text.append(t if stride == 1 else f"{t} * {stride}")
    if not text:
        return total
    if total != Affine():
        text.append(total.c())
    return " + ".join(text)


def _plus(base: Offset, off: int | str | Affine) -> str:
    if isinstance(base, Affine) and not isinstance(off, str):
        return (base + off).c()
    if isinstance(off, int) and off == 0:
        return str(base)
    return f"{base} + {off}"


@dataclass(frozen=True)
class Buffer:
    name: str
    tensor: TensorSpec  # the whole buffer's TensorSpec (its shape and layout)
    registers: bool
    # A strided view (``nodes.View.strides``): element x at ``base + sum(x[d] *
    # strides[d])`` of the C array ``name``, whatever ``tensor``'s layout says.
    strides: tuple[int, ...] | None = None
    base: Affine = field(default_factory=Affine)


@dataclass(frozen=True)
class Ref:
    buffer: Buffer
    origin: tuple[Coord, ...]

    def shifted(self, dim: int, by: int | Affine) -> Ref:
        o = list(self.origin)
        o[dim] = o[dim] + by
        return Ref(self.buffer, tuple(o))


class OperandView:
    """What a kernel emitter sees of one operand (see ``morello.kernels.base``)."""

    def __init__(self, ref: Ref, spec: TensorSpec) -> None:
        self.ref = ref
        self.spec = spec
        # Set by the emitter when this kernel should prefetch the next tile of an
        # enclosing loop (``_Emitter._stream_next``): a C expression, the element offset
        # from any element of this view to the same element of that tile (0 on the
        # loop's last iteration). A kernel that emits the prefetches sets ``prefetched``.
        self.next_tile: str | None = None
        # Where to: L2 in a problem beyond the last-level cache, where the next tile comes
        # from DRAM; else L1 (``_Emitter._stream_next``).
        self.next_tile_hint = "_MM_HINT_T0"
        self.prefetched = False
        # Lines ahead along a long run of this operand that the kernel may prefetch into
        # L2 (``CostConstants.gl_prefetch``): set for main-memory operands of a problem
        # beyond the last-level cache (``_Emitter.dram``), else 0.
        self.prefetch_lines = 0
        # Whether this is such an operand (main memory, the problem beyond the LLC).
        self.from_dram = False
        # For such an operand, how far ahead (in bytes of it read in between) a kernel may
        # prefetch lines into L2 and find them there: L2 as the target sizes it (256 KiB;
        # hosts have 512 KiB to 2 MiB).
        self.prefetch_room = 0
        # For such an operand, the target's last-level cache (``Target.llc_bytes``): a
        # buffer not much larger keeps part of itself there from one call to the next.
        self.llc_bytes = 0

    def _offset(self) -> Offset:
        b = self.ref.buffer
        if b.strides is not None:
            total = b.base
            for x, st in zip(self.ref.origin, b.strides):
                total = total + x.scaled(st)
            return total
        return index_expr(b.tensor.layout, b.tensor.shape, self.ref.origin)

    def lval(self) -> str:
        b = self.ref.buffer
        off = self._offset()
        if b.registers:
            if not isinstance(off, Affine) or off.constant is None:
                raise AssertionError("register tile with a symbolic origin")
            k = off.constant
            if b.tensor.level is Level.VRF:
                vs = b.tensor.vector_size
                assert vs is not None
                return f"{b.name}_{k // vs}[{k % vs}]"
            return f"{b.name}_{k}"
        return f"{b.name}[{off}]"

    def ptr(self, off: int | str) -> str:
        return f"&{self.ref.buffer.name}[{_plus(self._offset(), off)}]"

    def ptr_at(self, coord: tuple[int, ...]) -> str:
        """C pointer to the element at ``coord`` (tile coordinates) of a tensor in memory."""
        return self.at(coord).ptr(0)

    def at(self, coord: tuple[int | Affine, ...]) -> OperandView:
        """The view whose origin is ``coord`` (tile coordinates: ints, or ``Affine``
        expressions of a kernel's own loop variables) from this one's."""
        ref = self.ref
        for d, c in enumerate(coord):
            if not (isinstance(c, int) and c == 0):
                ref = ref.shifted(d, c)
        return OperandView(ref, self.spec)

    def vec(self, j: int) -> str:
        b = self.ref.buffer
        off = self._offset()
        assert isinstance(off, Affine) and off.constant is not None
        k = off.constant
        vs = b.tensor.vector_size
        assert vs is not None
        assert k % vs == 0
        return f"{b.name}_{k // vs + j}"


class _Emitter:
    def __init__(self, target: Target, threads: int = 1, dram: bool = False) -> None:
        self.target = target
        self.kernels: KernelTable = table_for(target)
        self.isa = targets.isa(target.isa)  # how fences and prefetches are spelled
        self.threads = threads
        self.w = Writer()
        self.names = Namer()
        self.uses_omp = False
        # Bytes of each heap buffer declaration: kept per thread between calls (see
        # morello_scratch in the prelude).
        self.scratch: list[int] = []
        # Non-temporal stores emitted and not yet fenced (``Kernel.nontemporal``).
        self.unfenced = False
        self.next_tiles: list[_NextTile] = []  # see _stream_next
        self.loops: list[_Enclosing] = []  # the serial loops being emitted, innermost last
        self.dram = dram  # main-memory operands beyond the last-level cache (emit_c)

    def fence(self) -> None:
        """Complete the non-temporal stores written since the last fence, if any."""
        if self.unfenced:
            self.w.line(self.isa.fence)
            self.unfenced = False

    def emit(self, impl: Impl, refs: tuple[Ref, ...]) -> None:
        node = impl.action.apply(impl.spec, self.target)
        if isinstance(node, Loop):
            self._loop(impl, node, refs)
        elif isinstance(node, Block):
            self._block(impl, node, refs)
        elif isinstance(node, Nest):
            self._nest(impl, node, refs)
        elif isinstance(node, KernelCall):
            ops = [OperandView(r, t) for r, t in zip(refs, impl.spec.operands)]
            if self.dram:
                for op in ops:
                    if op.spec.level is Level.GL:
                        op.prefetch_lines = self.target.costs.gl_prefetch
                        op.from_dram = True
                        op.llc_bytes = self.target.llc_bytes
                        op.prefetch_room = (self.target.capacity[Level.L2]
                                            * self.target.line_bytes)
            asked = self._ask_prefetch(impl, ops)
            kernel = self.kernels.by_name[node.kernel]
            kernel.emit(self.w, impl.spec, ops, self.kernels.vector_type)
            self.unfenced |= kernel.nontemporal
            for i, nt in asked:
                if ops[i].prefetched:
                    nt.done = True
        else:  # pragma: no cover - every node kind is handled above
            raise TypeError(f"cannot emit {node}")

    def _loop(self, impl: Impl, node: Loop, refs) -> None:
        spec: Spec = impl.spec
        size = node.size
        extent = spec.shape[node.sdim]
        full, rem = divmod(extent, size)
        dims = [spec.operand_dim(i, node.sdim) for i in range(len(refs))]
        unroll = any(r.buffer.registers and d is not None for r, d in zip(refs, dims))

        def shifted(by: int | Affine):
            return tuple(r if d is None else r.shifted(d, by) for r, d in zip(refs, dims))

        body = impl.children[0]
        if unroll or full == 1:
            for it in range(full):
                self.emit(body, shifted(it * size))
        elif not node.parallel and (pack := _pack_split(refs, dims, size, full)):
            # Two loops, over packs and within one, so that every index stays affine.
            outer = Var(self.names.fresh("i"), full * size // pack)
            inner = Var(self.names.fresh("i"), pack // size)
            with self.w.block(self._for(outer)):
                with self.w.block(self._for(inner)):
                    self.emit(body, shifted(Affine.var(outer, pack) + Affine.var(inner, size)))
        else:
            var = Var(self.names.fresh("i"), full)
            if node.parallel:
                self.uses_omp = True
                self.w.line(f"#pragma omp parallel for schedule(static) "
                            f"num_threads({self.threads})")
            with self.w.block(self._for(var)):
                pushed = 0
                if not node.parallel:
                    self._prefetch_next(impl, body, refs, dims, var, size, rem)
                    pushed = self._stream_next(body, refs, dims, var, size)
                    self.loops.append(_Enclosing(body, var, size, dims))
                self.emit(body, shifted(Affine.var(var, size)))
                if not node.parallel:
                    self.loops.pop()
                del self.next_tiles[len(self.next_tiles) - pushed:]
                if node.parallel:
                    self.fence()  # each thread's own stores, before the loop's join
        if rem:
            self.emit(impl.children[1], shifted(full * size))

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
        if node.alloc is None:  # a view: the same operands
            if len(impl.children) != 1:
                return None
            inner = self._register_load(impl.children[0])
            return None if inner is None else node.steps[0][inner]
        first = node.steps[0]
        if node.alloc.level is not Level.VRF or len(first) != 2 or first[1] != NEW \
                or first[0] == NEW or impl.children[0].spec.kind is not PrimKind.MOVE:
            return None
        return first[0]

    @staticmethod
    def _for(v: Var) -> str:
        return f"for (long {v.name} = 0; {v.name} < {v.extent}; {v.name}++) {{"

    def _block(self, impl: Impl, node: Block, refs: tuple[Ref, ...]) -> None:
        bufs: dict[int, Buffer] = {}
        for marker, alloc in ((NEW, node.alloc), (NEW2, node.alloc2)):
            if alloc is not None:
                bufs[marker] = self._declare(alloc)

        def ref(a: int) -> Ref:
            if a in (NEW, NEW2):
                buf = bufs[a]  # only a block that allocates names NEW (NEW2)
                return Ref(buf, (Affine(),) * len(buf.tensor.shape))
            return refs[a]

        heap = [b.name for b in bufs.values() if not b.registers]
        if heap:
            # A failed allocation skips the block and makes kernel() return nonzero (in
            # a parallel loop, other iterations go on; the output is then not defined).
            self.w.open(f"if ({' || '.join(f'{n} == NULL' for n in heap)}) {{")
            self.w.line("__atomic_store_n(&morello_status, MORELLO_ENOMEM, __ATOMIC_RELAXED);")
            self.w.reopen("} else {")
        for child, args in zip(impl.children, node.steps):
            self.emit(child, tuple(ref(a) for a in args))
        if heap:
            self.w.close()

    def _nest(self, impl: Impl, node: Nest, refs: tuple[Ref, ...]) -> None:
        bufs = [self._declare(t) for t in node.allocs]
        heap = [b.name for b in bufs if not b.registers]
        if heap:
            self.w.open(f"if ({' || '.join(f'{n} == NULL' for n in heap)}) {{")
            self.w.line("__atomic_store_n(&morello_status, MORELLO_ENOMEM, __ATOMIC_RELAXED);")
            self.w.reopen("} else {")
        for child, step in zip(impl.children, node.steps):
            self._nest_step(child, step, refs, bufs)
        if heap:
            self.w.close()

    def _nest_step(self, child: Impl, step: NestStep, refs: tuple[Ref, ...],
                   bufs: list[Buffer]) -> None:
        loop_vars: list[Affine] = []
        opened = 0
        for j, extent in enumerate(step.loops):
            if extent == 1:
                loop_vars.append(Affine())
                continue
            v = Var(self.names.fresh("i"), extent)
            if j == 0 and step.parallel:
                self.uses_omp = True
                self.w.line(f"#pragma omp parallel for schedule(static) "
                            f"num_threads({self.threads})")
            self.w.open(self._for(v))
            opened += 1
            loop_vars.append(Affine.var(v, 1))
        args = []
        for view, t in zip(step.operands, child.spec.operands):
            src = refs[view.source] if view.source >= 0 else Ref(
                bufs[-1 - view.source], (Affine(),) * len(bufs[-1 - view.source].tensor.shape))
            origin = src.origin
            if view.at is not None:
                origin = tuple(o + sum((loop_vars[lp].scaled(k) for lp, k in terms), Affine())
                               + const for o, (const, terms) in zip(origin, view.at))
            if view.strides is None:
                args.append(Ref(src.buffer, origin))
                continue
            buf = src.buffer
            assert buf.strides is None and not buf.registers and not buf.tensor.layout.is_packed
            base = index_expr(buf.tensor.layout, buf.tensor.shape, origin)
            assert isinstance(base, Affine)
            args.append(Ref(Buffer(buf.name, t, False, view.strides, base),
                            (Affine(),) * len(t.shape)))
        self.emit(child, tuple(args))
        if step.parallel:
            self.fence()
        for _ in range(opened):
            self.w.close()

    def _declare(self, new: TensorSpec) -> Buffer:
        """Declare a buffer for ``new``: vector or scalar register variables, or a
        64-byte aligned heap array."""
        ctype = new.dtype.c_type
        if new.level is Level.VRF:
            vs = new.vector_size
            assert vs is not None
            name = self.names.fresh("v")
            nvec = new.volume // vs
            vt = self.kernels.vector_type(new.dtype, vs)
            self.w.line(f"{vt.c_type} " + ", ".join(f"{name}_{j}" for j in range(nvec)) + ";")
            return Buffer(name, new, True)
        if new.level is Level.RF:
            name = self.names.fresh("r")
            self.w.line(f"{ctype} " + ", ".join(f"{name}_{j}" for j in range(new.volume)) + ";")
            return Buffer(name, new, True)
        name = self.names.fresh("buf")
        n = math.prod(new.layout.physical_shape(new.shape))
        nbytes = -(-n * new.dtype.size // 64) * 64
        slot = len(self.scratch)
        self.scratch.append(nbytes)
        self.w.line(f"{ctype} *restrict {name} = ({ctype} *)morello_scratch("
                    f"&morello_scratch_p[{slot}], &morello_scratch_n[{slot}], {nbytes});")
        return Buffer(name, new, False)


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
    prefetch of the next tile across it: ``_Emitter._prefetch_next``)."""

    body: Impl
    var: Var
    size: int
    dims: list


@dataclass
class _NextTile:
    """A request of ``_Emitter._stream_next``: prefetch a later tile of ``buffer`` (the
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


# How far ahead, in rows (one run of a multi-pass loop's passes), a loop over main
# memory prefetches (``_NextTile.offset``): the next row's lines, asked for during this
# row's exps, arrived too late for its max pass; more than two rows gained nothing, and
# tiles of several rows keep one tile on. Rows in pieces count as one row.
DRAM_PASSES_AHEAD = 2


# At most this many prefetches per loop iteration (a register tile has at most 32 lines).
PREFETCH_MAX_LINES = 32


def _pack_split(refs, dims, size: int, full: int) -> int | None:
    """A pack size at which to split a loop whose indices into a packed buffer would
    otherwise need a division (see ``morello.codegen.affine``), or None."""
    for r, d in zip(refs, dims):
        if d is None or r.buffer.registers:
            continue
        p = r.buffer.tensor.layout.pack_of(d)
        if not p or size >= p or p % size or (full * size) % p or full * size <= p:
            continue
        probe = r.origin[d] + Affine.var(Var("_", full), size)
        split = r.origin[d] + Affine.var(Var("_o", full * size // p), p) \
            + Affine.var(Var("_i", p // size), size)
        if probe.divmod(p) is None and split.divmod(p) is not None:
            return p
    return None


def _parameters(spec: Spec, restrict: bool = True) -> list[str]:
    info = spec.kind.info
    params = []
    for i, (nm, t) in enumerate(zip(info.operands, spec.operands)):
        if t.level.counts_registers:
            raise MorelloError(f"cannot emit a kernel whose parameter {nm} is in {t.level}: "
                               "top-level operands must be in memory (GL or L1)")
        const = "" if i in info.writes else "const "
        params.append(f"{const}{t.dtype.c_type} *{'restrict ' if restrict else ''}{nm}")
    return params


def emit_c(impl: Impl, target: Target | None = None, threads: int = 1,
           name: str | None = None) -> str:
    """A C translation unit with ``int kernel(...)`` and ``double bench(..., iters)``.

    The parameters are the Spec's operands, named by the kind table (``lhs``, ``rhs``,
    ``out``, ...); written operands are not ``const``. ``kernel`` returns 0, or
    ``MORELLO_ENOMEM`` (1) if a buffer could not be allocated (the output is then not
    defined); ``bench`` returns seconds per call, or -1 if a call failed. Parallel loops
    run on ``threads`` OpenMP threads. ``target`` defaults to AVX2.

    With ``name`` (a C identifier, ``check_name``), the unit is for embedding: the
    function is ``int NAME(...)``, the only external symbol (no timing harness; every
    helper is ``static``), and ``emit_header`` gives its declaration."""
    if target is None:
        from morello.targets import avx2
        target = avx2.TARGET
    spec = impl.spec
    info = spec.kind.info
    # Whether the main-memory operands stream from DRAM, not the last-level cache: then
    # kernels may prefetch ahead of the hardware (from L3 that slowed a matvec).
    dram = target.gl_in_dram or target.streams_from_dram(spec)
    e = _Emitter(target, threads, dram)
    names = info.operands
    fn = "kernel" if name is None else check_name(name)
    signature = ", ".join(_parameters(spec))
    refs = [Ref(Buffer(nm, t, False), (Affine(),) * len(t.shape))
            for nm, t in zip(names, spec.operands)]
    with e.w.block(f"int {fn}({signature}) {{"):
        top = e.w.mark()
        e.w.line("int morello_status = 0;")
        e.emit(impl, tuple(refs))
        e.fence()
        e.w.line("return morello_status;")
        if e.scratch:
            # Each thread keeps its buffers for the next call: a fresh allocation of a few
            # MiB each call is returned to the system and faulted in again (docs/model-notes.md).
            k = len(e.scratch)
            e.w.insert(top, f"/* scratch: {sum(e.scratch)} bytes, kept per calling thread */",
                       f"static _Thread_local void *morello_scratch_p[{k}];",
                       f"static _Thread_local size_t morello_scratch_n[{k}];")
    body = str(e.w)
    out = Writer()
    if name is not None:
        out.line(f"/* {name}: generated by morello. Compile as C11 or later (gcc or clang: "
                 f"GNU inline asm) with {' '.join(target.cflags)}"
                 f"{' -fopenmp' if e.uses_omp else ''}; */")
        out.line(f"/* declared in {name}.h (morello emit --header). Returns 0, or 1 if a "
                 "buffer could not be allocated. */")
        out.line("#ifndef MORELLO_PRELUDE_INCLUDED")
        out.line("#define MORELLO_PRELUDE_INCLUDED")
        out.lines(partial(e.isa.prelude))
        out.line("#endif")
        if e.uses_omp:
            out.line("#include <omp.h>")
        out.line(f"/* {spec} */")
        out.line(f"/* cost: {impl.cost.main} */")
        out.lines(body)
        return str(out)
    out.lines(partial(e.isa.prelude))
    if e.uses_omp:
        out.line("#include <omp.h>")
    out.lines(partial("bench.c"))
    out.line(f"/* {spec} */")
    out.line(f"/* cost: {impl.cost.main} */")
    out.lines(body)
    args = ", ".join(names)
    with out.block(f"double bench({signature}, long iters) {{"):
        out.line("double t0 = morello_now();")
        with out.block("for (long it = 0; it < iters; it++) {"):
            out.line(f"if (kernel({args}) != 0) return -1.0;")
            out.line('__asm__ volatile("" ::: "memory");')
        out.line("return (morello_now() - t0) / (double)iters;")
    return str(out)


# C and C++ keywords and names an embedded kernel may not take.
_RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch
typedef union unsigned void volatile while _Bool _Complex _Imaginary alignas alignof and
asm bool catch class constexpr delete explicit export false friend mutable namespace new
noexcept not nullptr operator or private protected public template this throw true try
typeid typename using virtual xor main kernel bench
""".split())


def check_name(name: str) -> str:
    """``name`` if it can name an exported C function (an identifier of at most 64
    characters, not a C/C++ keyword, not ``main``, not starting with ``morello_`` or an
    underscore); else MorelloError."""
    import re

    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,63}", name):
        raise MorelloError(f"a kernel name is a C identifier of 1 to 64 letters, digits and "
                           f"'_' starting with a letter, got {str(name)[:70]!r}")
    if name in _RESERVED or name.lower().startswith("morello_"):
        raise MorelloError(f"{name!r} cannot name a kernel (a C/C++ keyword, main, or "
                           "morello's own prefix)")
    return name


def emit_header(impl: Impl, name: str) -> str:
    """The header declaring ``emit_c(impl, name=name)``'s function, for C and C++."""
    name = check_name(name)
    spec = impl.spec
    guard = f"{name.upper()}_MORELLO_H"
    shapes = ", ".join(f"{nm} {'x'.join(map(str, t.shape))}" for nm, t in
                       zip(spec.kind.info.operands, spec.operands))
    return "\n".join([
        f"/* {name}: generated by morello. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        f"/* {spec.logical_str()} */",
        f"/* operands (row-major unless the Spec says otherwise): {shapes} */",
        "/* Returns 0, or 1 if a buffer could not be allocated (the output is then",
        " * undefined). Inputs and the output must not overlap. */",
        f"int {name}({', '.join(_parameters(spec, restrict=False))});",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        f"#endif /* {guard} */",
        "",
    ])


def emit_kernel(spec: Spec, target: Target, kernel: str) -> str:
    """The C that kernel row ``kernel`` of ``target`` writes for the leaf ``spec``, its
    operands named by the kind table (register operands as register tiles): what a
    kernel edit changes, for review (``tests/golden_c.py``)."""
    e = _Emitter(target)
    ops = [OperandView(Ref(Buffer(nm, t, t.level.counts_registers), (Affine(),) * len(t.shape)),
                       t)
           for nm, t in zip(spec.kind.info.operands, spec.operands)]
    e.kernels.by_name[kernel].emit(e.w, spec, ops, e.kernels.vector_type)
    return str(e.w)
