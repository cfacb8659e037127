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

import math
from importlib import resources

from morello import targets
from morello.codegen.affine import Affine, Var
from morello.codegen.prefetch import Prefetcher, _Enclosing, _NextTile
from morello.codegen.views import Buffer, OperandView, Ref, index_expr
from morello.codegen.writer import Namer, Writer
from morello.errors import MorelloError
from morello.impl import Impl
from morello.kernels import KernelTable, table_for
from morello.memory import Level, Target
from morello.nodes import Block, KernelCall, Loop, Nest, NestStep, buffer
from morello.specs import Spec
from morello.tensorspec import TensorSpec


def partial(name: str) -> str:
    return resources.files("morello.codegen").joinpath("partials").joinpath(name).read_text()


class _Emitter(Prefetcher):
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

    @staticmethod
    def _for(v: Var) -> str:
        return f"for (long {v.name} = 0; {v.name} < {v.extent}; {v.name}++) {{"

    def _block(self, impl: Impl, node: Block, refs: tuple[Ref, ...]) -> None:
        bufs = {buffer(i): self._declare(alloc) for i, alloc in enumerate(node.allocs)}

        def ref(a: int) -> Ref:
            if a < 0:
                buf = bufs[a]  # only a block that allocates names its buffers
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
