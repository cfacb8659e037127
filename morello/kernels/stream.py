"""Kernels of the memory-bound kinds, in one vector width or another.

Kinds other than Matmul see their operands only through L1 cache views, so their kernels
stream contiguous L1 tensors: a loop of four vectors per iteration, then single vectors,
then a scalar tail. The volume is a compile-time constant, so only the parts that run are
emitted. ``rows(vt)`` makes every such kernel for one f32 vector type (``VecType``, which
spells every width-dependent op): AVX2's 8 floats, and
AVX-512's 16 (whose table has both, so the search picks per Spec: a row of 8 is one AVX2
vector, but 8 scalars in 16-lane code).

A vector op costs the same in either width (``vector_move``, ``fma``): on the AVX-512
hosts measured, 512-bit loads, FMAs and integer ops issue at the 256-bit rates.
"""
from __future__ import annotations

from collections.abc import Sequence

from morello.cost import move_cost
from morello.kernels.base import (
    L1,
    RL,
    Kernel,
    Reason,
    all_f32,
    c_value,
    io_cost,
    pin,
    rf_or_l1,
    same_contiguous_f32,
)
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec
from morello.targets.vector import VecType
from morello.tensorspec import TensorSpec


def in_l1(*ts: TensorSpec) -> Reason:
    if any(t.level is not Level.L1 for t in ts):
        return "operands must be in L1"
    return None


def _elementwise_check(spec: Spec, target: Target) -> Reason:
    """Every operand in L1, contiguous, f32, with one layout (element for element)."""
    ops = spec.operands
    if reason := in_l1(*ops):
        return reason
    for t in ops[1:]:
        if reason := same_contiguous_f32(ops[0], t):
            return reason
    return None


def pass_cost(n: int, target: Target, moves: int, ops: int, tail_ops: int = 1,
                lanes: int = 8) -> int:
    """``n`` f32 elements streamed through vectors of ``lanes``: per vector ``moves``
    loads/stores (``vector_move`` each) and ``ops`` arithmetic ops (``fma`` each); per
    tail element ``tail_ops`` scalar ops (``scalar_op`` excludes operand traffic) and its
    ``moves`` scalar loads and stores, which cost a load/store slot as vector ones do; and
    per call one vector move (pointer setup, loop entry and exit: what makes one big call
    cheaper than many)."""
    nvec, tail = divmod(n, lanes)
    c = target.costs
    return (nvec * (moves * c.vector_move + ops * c.fma)
            + tail * (moves * c.vector_move + tail_ops * c.scalar_op) + c.vector_move)


def offset_ptr(p: str, off: int | str) -> str:
    return p if off == 0 else f"{p} + {off}"


def next_tile(w, view, ptr: str) -> tuple[str, str] | None:
    """If the emitter asks this kernel to prefetch the next tile of an enclosing loop
    through ``view`` (``OperandView.next_tile``, see ``morello.codegen.emit``), declare
    a pointer to the element of that tile that matches ``ptr`` (a local pointer to the
    view's origin) and return its name and the prefetch hint; else None. Pass it to
    ``prefetch_lines`` in the kernel's main loop."""
    if view.next_tile is None:
        return None
    view.prefetched = True
    w.line(f"const float *{ptr}_next = {ptr} + ({view.next_tile});")
    return f"{ptr}_next", view.next_tile_hint


def prefetch_lines(w, nxt: tuple[str, str] | None, q: str, floats: int) -> None:
    """Prefetch the lines of ``nxt[q .. q + floats)`` (one per 64 bytes, the loop's
    step; ``nxt`` from ``next_tile``): ``floats`` a multiple of 16."""
    if nxt is None:
        return
    name, hint = nxt
    for b in range(0, floats * 4, 64):
        w.line(f"_mm_prefetch((const char *)({name} + {q}){f' + {b}' if b else ''}, "
               f"{hint});")


def stream_emit(w, v: VecType, n: int, reads: list[str], write: str, vop, sop,
                 prefetch: tuple | None = None) -> None:
    """``write[i] = op(reads[0][i], ...)`` for i < n, over local pointers: ``vop`` makes
    the vector expression from vector expressions, ``sop`` the scalar one; ``prefetch``,
    ``(view, pointer)``, offers ``next_tile`` to the main loop, if there is one."""
    lanes = v.lanes

    def vec(off) -> None:
        w.line(v.storeu(offset_ptr(write, off), vop([v.loadu(offset_ptr(p, off)) for p in reads])))

    n4, n1 = n // (4 * lanes) * 4 * lanes, n // lanes * lanes
    if n4 > 4 * lanes:
        nxt = next_tile(w, *prefetch) if prefetch is not None else None
        with w.block(f"for (long q = 0; q < {n4}; q += {4 * lanes}) {{"):
            prefetch_lines(w, nxt, "q", 4 * lanes)
            for j in range(4):
                vec(offset_ptr("q", lanes * j))
    else:
        for off in range(0, n4, lanes):
            vec(off)
    for off in range(n4, n1, lanes):
        vec(off)
    if n - n1 == 1:
        w.line(f"{write}[{n1}] = {sop([f'{p}[{n1}]' for p in reads])};")
    elif n > n1:
        with w.block(f"for (long q = {n1}; q < {n}; q++) {{"):
            w.line(f"{write}[q] = {sop([f'{p}[q]' for p in reads])};")


def _pointers(w, ops, writes: tuple[int, ...]) -> list[str]:
    """Local restrict pointers ``p0, p1, ...`` to the operands' origins."""
    names = []
    for i, o in enumerate(ops):
        const = "" if i in writes else "const "
        names.append(f"p{i}")
        w.line(f"{const}float *restrict p{i} = {o.ptr(0)};")
    return names


def _binary_emit(v: VecType, op: str, cop: str):
    def emit(w, spec, ops, vt) -> None:
        with w.block("{"):
            a, b, out = _pointers(w, ops, (2,))
            stream_emit(w, v, spec.volume, [a, b], out,
                         lambda x: f"{v.op(op)}({x[0]}, {x[1]})",
                         lambda x: f"{x[0]} {cop} {x[1]}")
    return emit


def _elementwise_cost(v: VecType, moves: int, ops: int):
    return lambda s, t: pass_cost(s.volume, t, moves, ops, lanes=v.lanes) + io_cost(s, t)


# --- Relu, Broadcast ----------------------------------------------------------------------

# max(src, 0) with NaN propagated, as numpy's maximum and torch's relu: ``max_ps(0, x)``
# returns x where x is NaN (``max_ps(x, 0)`` returned 0 there), and the scalar form keeps
# x unless it is below 0. The same ops as before.
RELU_SCALAR = "{x} < 0.0f ? 0.0f : {x}"


def _relu_emit(v: VecType):
    def emit(w, spec, ops, vt) -> None:
        with w.block("{"):
            src, dst = _pointers(w, ops, (1,))
            if spec.volume >= v.lanes:
                w.line(f"const {v.c_type} zero = {v.zeros};")
            stream_emit(w, v, spec.volume, [src], dst,
                         lambda x: f"{v.op('max')}(zero, {x[0]})",
                         lambda x: RELU_SCALAR.format(x=x[0]))
    return emit


def _bcast_copy_check(spec: Spec, target: Target) -> Reason:
    if spec.shape[spec.params[0]] != 1:
        return "the broadcast dim is not 1"
    return _elementwise_check(spec, target)


def _bcast_copy_emit(v: VecType):
    def emit(w, spec, ops, vt) -> None:
        with w.block("{"):
            src, dst = _pointers(w, ops, (1,))
            stream_emit(w, v, spec.volume, [src], dst, lambda x: x[0], lambda x: x[0])
    return emit


def _bcast_scalar_check(spec: Spec, target: Target) -> Reason:
    src, dst = spec.operands
    if src.volume != 1:
        return "src is not a scalar"
    if reason := in_l1(src, dst):
        return reason
    if not dst.contiguous:
        return "dst is not contiguous"
    return all_f32(spec)


def _splat_emit(w, v: VecType, n: int, dst: str, value: str) -> None:
    """``dst[i] = value`` for i < n (``value`` a C float expression)."""
    w.line(f"const float s = {value};")
    if n >= v.lanes:
        w.line(f"const {v.c_type} sv = {v.splat('s')};")
    stream_emit(w, v, n, [], dst, lambda x: "sv", lambda x: "s")


def _bcast_scalar_emit(v: VecType):
    def emit(w, spec, ops, vt) -> None:
        src, dst = ops
        with w.block("{"):
            w.line(f"float *restrict p1 = {dst.ptr(0)};")
            _splat_emit(w, v, spec.volume, "p1", src.lval())
    return emit


def _splat_cost(v: VecType):
    return lambda s, t: (pass_cost(s.volume, t, 1, 0, lanes=v.lanes) + t.costs.broadcast
                         + io_cost(s, t))


# --- AddChannel (a per-channel bias) ------------------------------------------------------

def _channel_vector_check(spec: Spec, target: Target) -> Reason:
    """A tile one channel vector long: every tensor has one extent above 1 and is
    contiguous, so all three run along the channels element for element."""
    lhs, rhs, out = spec.operands
    if rhs.volume != out.volume:
        return "the tile has extents above 1 beside the channels"
    if reason := in_l1(*spec.operands):
        return reason
    if not all(t.contiguous for t in spec.operands):
        return "operands must be contiguous"
    return all_f32(spec)


def _channel_scalar_check(spec: Spec, target: Target) -> Reason:
    """One channel: its bias a scalar, lhs and out contiguous L1 tensors of one layout."""
    lhs, rhs, out = spec.operands
    if rhs.volume != 1 or not rf_or_l1(rhs):
        return "rhs must be a scalar in RF or L1"
    if reason := in_l1(lhs, out):
        return reason
    return same_contiguous_f32(lhs, out) or all_f32(spec)


def _channel_scalar_emit(v: VecType):
    def emit(w, spec, ops, vt) -> None:
        lhs, rhs, out = ops
        with w.block("{"):
            w.line(f"const float *restrict p0 = {lhs.ptr(0)};")
            w.line(f"float *restrict p2 = {out.ptr(0)};")
            w.line(f"const float s = {rhs.lval()};")
            if spec.volume >= v.lanes:
                w.line(f"const {v.c_type} sv = {v.splat('s')};")
            stream_emit(w, v, spec.volume, ["p0"], "p2",
                         lambda x: f"{v.op('add')}({x[0]}, sv)", lambda x: f"{x[0]} + s")
    return emit


def _channel_scalar_cost(v: VecType):
    return lambda s, t: (pass_cost(s.volume, t, 2, 1, lanes=v.lanes) + t.costs.broadcast
                         + io_cost(s, t))


# --- MaxAccum, SumAccum -------------------------------------------------------------------

def scalar_and_row_check(spec: Spec, scalar: int, row: int) -> Reason:
    """Operand ``scalar`` a scalar in RF or L1, operand ``row`` contiguous in L1, f32."""
    names = spec.info.operands
    if spec.operands[scalar].volume != 1 or not rf_or_l1(spec.operands[scalar]):
        return f"{names[scalar]} must be a scalar in RF or L1"
    if spec.operands[row].level is not Level.L1 or not spec.operands[row].contiguous:
        return f"{names[row]} must be contiguous in L1"
    return all_f32(spec)


def _hreduce_check(spec: Spec, target: Target) -> Reason:
    return scalar_and_row_check(spec, 1, 0)


def _hreduce_cost(v: VecType, nan_flag: bool = False):
    """A vector op per vector read, and with ``nan_flag`` (a maximum's) one more per two."""
    def cost(s: Spec, t: Target) -> int:
        n = s.operands[0].volume
        nvec = n // v.lanes
        accs = min(4, nvec)
        return (pass_cost(n, t, 1, 1, lanes=v.lanes) + max(accs - 1, 0) * t.costs.fma
                + (t.costs.hsum if accs else 0) + t.costs.scalar_op + io_cost(s, t)
                + (nvec + 1) // 2 * t.costs.fma * nan_flag)
    return cost


def _hreduce_emit(v: VecType, op: str, reduce: str, sfold):
    """Horizontal reduction of a contiguous src into a scalar dst: up to four vector
    accumulators (initialized from src's first vectors), combined, reduced across lanes,
    then the scalar tail, then folded into dst. ``sfold(a, b)`` is the scalar op. A
    maximum is NaN if src or dst holds one (``VecType.nan_flag_step``)."""
    ignore_nan = op == "fmax"  # FMax: NaN ignored, max_ps(x, acc) keeps acc
    op = "max" if ignore_nan else op
    vfn, hfn, lanes = v.op(op), v.hreduce(reduce), v.lanes
    flag = op == "max" and not ignore_nan

    def emit(w, spec, ops, vt) -> None:
        src, dst = ops
        n = src.spec.volume
        nvec = n // lanes
        accs = min(4, nvec)
        n1, n4 = nvec * lanes, n // (4 * lanes) * 4 * lanes

        def flags(names: list[str]) -> None:
            w.line(v.nan_flag_step("nan", *names))

        def fold(offs: Sequence[int | str]) -> None:
            """Loads at ``offs`` into acc0, acc1, ... in the current block."""
            if not flag:
                for a, off in enumerate(offs):
                    x = v.loadu(offset_ptr("p0", off))
                    w.line(f"acc{a} = {vfn}({x}, acc{a});" if ignore_nan
                           else f"acc{a} = {vfn}(acc{a}, {x});")
                return
            # Each vector pinned in its register once loaded: else gcc loads it twice (a
            # memory operand of the max and of the compare), which slows the row max
            # (docs/model-notes.md).
            for a, off in enumerate(offs):
                w.line(f"{v.c_type} x{a} = {v.loadu(offset_ptr('p0', off))}; {pin(f'x{a}')} "
                       f"acc{a} = {vfn}(acc{a}, x{a});")
            flags([f"x{a}" for a in range(len(offs))])

        with w.block("{"):
            w.line(f"const float *restrict p0 = {src.ptr(0)};")
            if accs:
                for a in range(accs):
                    x = v.loadu(offset_ptr("p0", lanes * a))
                    if ignore_nan:  # max_ps(x, -inf) is -inf where x is NaN
                        x = f"{vfn}({x}, {v.splat('-INFINITY')})"
                    w.line(f"{v.c_type} acc{a} = {x};")
                if flag:
                    w.line(v.nan_flag_init("nan"))
                    flags([f"acc{a}" for a in range(accs)])
                if n4 > 8 * lanes:
                    with w.block(f"for (long q = {4 * lanes}; q < {n4}; q += {4 * lanes}) {{"):
                        fold([offset_ptr("q", lanes * a) for a in range(4)])
                elif n4 == 8 * lanes:
                    with w.block("{"):
                        fold([(4 + a) * lanes for a in range(4)])
                rest = list(range(max(n4, lanes * accs), n1, lanes))
                if rest:
                    with w.block("{"):
                        fold(rest)
                if accs == 4:
                    w.line(f"acc0 = {vfn}(acc0, acc1);")
                    w.line(f"acc2 = {vfn}(acc2, acc3);")
                    w.line(f"acc0 = {vfn}(acc0, acc2);")
                else:
                    for a in range(1, accs):
                        w.line(f"acc0 = {vfn}(acc0, acc{a});")
                w.line(f"float r = {hfn}(acc0);")
                if flag:
                    w.line(f"if ({v.nan_flag_set('nan')}) r = NAN;")
                start = n1
            else:
                w.line("float r = p0[0];")
                start = 1
            if n - start == 1:
                w.line(f"r = {sfold('r', f'p0[{start}]')};")
            elif n > start:
                with w.block(f"for (long q = {start}; q < {n}; q++) {{"):
                    w.line(f"r = {sfold('r', 'p0[q]')};")
            w.line(f"{dst.lval()} = {sfold(dst.lval(), 'r')};")

    return emit


def _max2(a: str, b: str) -> str:
    """The larger of scalars a and b, NaN if either is (b != b: b is NaN; a NaN a stays,
    as no b compares greater)."""
    return f"({b} > {a} || {b} != {b} ? {b} : {a})"


def _fmax2(a: str, b: str) -> str:
    """The larger of scalars a and b, NaN ignored (C's fmaxf, np.fmax)."""
    return f"({b} > {a} || {a} != {a} ? {b} : {a})"


def _sum2(a: str, b: str) -> str:
    return f"{a} + {b}"


def _accum_check(spec: Spec, target: Target) -> Reason:
    if spec.shape[spec.params[0]] != 1:
        return "the reduced dim is not 1"
    return _elementwise_check(spec, target)


def _accum_emit(v: VecType, op: str, sfold):
    def vop(x: list[str]) -> str:
        if op == "max":
            return v.max_nan(x[0], x[1])
        if op == "fmax":
            return v.fmax(x[0], x[1])
        return f"{v.op(op)}({x[0]}, {x[1]})"

    def emit(w, spec, ops, vt) -> None:
        with w.block("{"):
            src, dst = _pointers(w, ops, (1,))
            stream_emit(w, v, spec.volume, [dst, src], dst, vop, lambda x: sfold(x[0], x[1]))
    return emit


# --- SumAccum, MaxAccum over a few rows at once ---------------------------------------------
#
# A reduction along an outer dim (the column sums of a matrix) that takes one row per call
# reads and writes each vector of dst once per row; these kernels fold ROWS_MAX rows or
# fewer into it at once (8 rows in two partial sums read fastest; more spilled). In L3
# a strided view of rows is priced as before (``cost.LONG_RUN_BYTES``): a row per call.
# (VectorSumAccum and VectorMaxAccum are these kernels' one-row case, with a loop
# unrolled four times; the two are kept apart for that.)
ROWS_MAX = 8


def _rows_accum_check(spec: Spec, target: Target) -> Reason:
    """src's 2..ROWS_MAX slices along the reduced dim each contiguous, of dst's layout
    (any stride between them), dims before it of 1; both in L1, f32."""
    d = spec.params[0]
    r = spec.shape[d]
    if not 2 <= r <= ROWS_MAX:
        return f"the reduced dim must be 2 to {ROWS_MAX}"
    if any(e != 1 for e in spec.shape[:d]):
        return "the dims before the reduced one must be 1"
    src, dst = spec.operands
    if reason := in_l1(src, dst):
        return reason
    row = spec.shape[:d] + (1,) + spec.shape[d + 1:]
    if not src.valid_tile_shape(row):
        return "src's slices are not tiles of it"
    return same_contiguous_f32(src.tile(row), dst)


def _rows_accum_cost(v: VecType, op: str):
    def cost(s: Spec, t: Target) -> int:
        r = s.shape[s.params[0]]
        # Per vector of dst: r loads, dst's load and store; r folds (a maximum's NaN flag:
        # two compares per two vectors read, dst's, and its application).
        ops = r + (r + 3 if op == "max" else 0)
        return pass_cost(s.operands[1].volume, t, r + 2, ops, lanes=v.lanes) + io_cost(s, t)
    return cost


def _rows_accum_emit(v: VecType, op: str, sfold):
    """dst op= the fold of src's rows (slices along the reduced dim): per vector of dst,
    the rows folded into two partial results (one chain each), then into dst."""
    vfn, lanes = v.op(op), v.lanes
    flag = op == "max"

    def emit(w, spec, ops, vt) -> None:
        src, dst = ops
        d = spec.params[0]
        r = spec.shape[d]
        n = dst.spec.volume
        n1 = n // lanes * lanes
        second = tuple(int(i == d) for i in range(len(spec.shape)))

        def at(j: int, q: str) -> str:
            return f"p0 + {j} * rs + {q}" if j else f"p0 + {q}"

        with w.block("{"):
            w.line(f"const float *restrict p0 = {src.ptr(0)};")
            w.line(f"const long rs = {src.ptr_at(second)} - p0;")
            w.line(f"float *restrict p1 = {dst.ptr(0)};")
            if n1:
                with w.block(f"for (long q = 0; q < {n1}; q += {lanes}) {{"):
                    w.line(f"{v.c_type} a = {v.loadu(at(0, 'q'))}, b = {v.loadu(at(1, 'q'))};")
                    if flag:
                        w.line(v.nan_flag_init("nan"))
                        w.line(v.nan_flag_step("nan", "a", "b"))
                    for j in range(2, r, 2):
                        pair = range(j, min(j + 2, r))
                        with w.block("{"):
                            for i in pair:
                                acc = "ab"[i % 2]
                                w.line(f"const {v.c_type} x{i % 2} = {v.loadu(at(i, 'q'))}; "
                                       f"{acc} = {vfn}({acc}, x{i % 2});")
                            if flag:
                                w.line(v.nan_flag_step("nan", *[f"x{i % 2}" for i in pair]))
                    w.line(f"const {v.c_type} c = {v.loadu('p1 + q')};")
                    total = f"{vfn}(c, {vfn}(a, b))"
                    if flag:
                        w.line(v.nan_flag_step("nan", "c"))
                        total = v.nan_flag_apply("nan", total)
                    w.line(v.storeu("p1 + q", total))
            if n > n1:
                with w.block(f"for (long q = {n1}; q < {n}; q++) {{"):
                    w.line("float s = p0[q];")
                    for j in range(1, r):
                        w.line(f"s = {sfold('s', f'p0[{j} * rs + q]')};")
                    w.line(f"p1[q] = {sfold('p1[q]', 's')};")
    return emit


# --- Fill (in L1, any value) ----------------------------------------------------------------

def _l1_fill_check(spec: Spec, target: Target) -> Reason:
    (dst,) = spec.operands
    if dst.level is not Level.L1 or not dst.contiguous:
        return "destination is not contiguous in L1"
    return all_f32(spec)


def _l1_fill_emit(v: VecType):
    def emit(w, spec, ops, vt) -> None:
        (dst,) = ops
        with w.block("{"):
            w.line(f"float *restrict p0 = {dst.ptr(0)};")
            _splat_emit(w, v, spec.volume, "p0", c_value(spec.params[0]))
    return emit


def _l1_fill_cost(v: VecType):
    return lambda s, t: (pass_cost(s.volume, t, 1, 0, lanes=v.lanes) + t.costs.broadcast
                         + move_cost(s.operands[0], t))


def rows(v: VecType) -> tuple[Kernel, ...]:
    """The stream kernels in width ``v``, in their fixed order (names end in
    ``v.suffix``)."""
    sfx = v.suffix
    return (
        # --- Add, Mul, Relu: streams over contiguous L1 tensors of one layout.
        Kernel(f"VectorAdd{sfx}", PrimKind.ADD, _elementwise_check, _elementwise_cost(v, 3, 1),
               0, _binary_emit(v, "add", "+"), "out = lhs + rhs over contiguous L1 tensors",
               levels=(L1, L1, L1)),
        Kernel(f"VectorMul{sfx}", PrimKind.MUL, _elementwise_check, _elementwise_cost(v, 3, 1),
               0, _binary_emit(v, "mul", "*"), "out = lhs * rhs over contiguous L1 tensors",
               levels=(L1, L1, L1)),
        Kernel(f"VectorRelu{sfx}", PrimKind.RELU, _elementwise_check,
               _elementwise_cost(v, 2, 1), 1, _relu_emit(v),
               "dst = max(src, 0) over contiguous L1 tensors", levels=(L1, L1)),
        # --- Broadcast
        Kernel(f"BroadcastCopy{sfx}", PrimKind.BROADCAST, _bcast_copy_check,
               _elementwise_cost(v, 2, 0), 0, _bcast_copy_emit(v),
               "a broadcast over an extent-1 dim: a contiguous L1 copy", levels=(L1, L1)),
        Kernel(f"BroadcastScalar{sfx}", PrimKind.BROADCAST, _bcast_scalar_check, _splat_cost(v),
               1, _bcast_scalar_emit(v), "a scalar in L1 stored over a contiguous L1 tensor",
               levels=(L1, L1)),
        # --- MaxAccum
        Kernel(f"VectorMaxReduce{sfx}", PrimKind.MAX_ACCUM, _hreduce_check,
               _hreduce_cost(v, True), 5,
               _hreduce_emit(v, "max", "max", _max2),
               "dst = max(dst, max of a contiguous L1 src): vector maxima, then across lanes",
               levels=(L1, RL)),
        Kernel(f"VectorMaxAccum{sfx}", PrimKind.MAX_ACCUM, _accum_check,
               _elementwise_cost(v, 3, 3), 0, _accum_emit(v, "max", _max2),
               "dst = max(dst, src) elementwise (reduced dim of 1), contiguous L1 tensors",
               levels=(L1, L1)),
        Kernel(f"VectorMaxRows{sfx}", PrimKind.MAX_ACCUM, _rows_accum_check,
               _rows_accum_cost(v, "max"), 5, _rows_accum_emit(v, "max", _max2),
               f"dst = max(dst, max over 2 to {ROWS_MAX} rows of src) elementwise, L1 rows of "
               "any stride", levels=(L1, L1)),
        # --- FMaxAccum (softmax's maximum)
        Kernel(f"VectorFMaxReduce{sfx}", PrimKind.FMAX_ACCUM, _hreduce_check, _hreduce_cost(v),
               4, _hreduce_emit(v, "fmax", "max", _fmax2),
               "dst = fmax(dst, max of a contiguous L1 src), NaN ignored: vector maxima, "
               "then across lanes", levels=(L1, RL)),
        Kernel(f"VectorFMaxAccum{sfx}", PrimKind.FMAX_ACCUM, _accum_check,
               _elementwise_cost(v, 3, 3), 0, _accum_emit(v, "fmax", _fmax2),
               "dst = fmax(dst, src) elementwise (reduced dim of 1), contiguous L1 tensors",
               levels=(L1, L1)),
        # --- SumAccum
        Kernel(f"VectorSumReduce{sfx}", PrimKind.SUM_ACCUM, _hreduce_check, _hreduce_cost(v), 4,
               _hreduce_emit(v, "add", "sum", _sum2),
               "dst += sum of a contiguous L1 src: vector sums, then across lanes",
               levels=(L1, RL)),
        Kernel(f"VectorSumAccum{sfx}", PrimKind.SUM_ACCUM, _accum_check,
               _elementwise_cost(v, 3, 1), 0, _accum_emit(v, "add", _sum2),
               "dst += src elementwise (reduced dim of 1), contiguous L1 tensors", levels=(L1, L1)),
        Kernel(f"VectorSumRows{sfx}", PrimKind.SUM_ACCUM, _rows_accum_check,
               _rows_accum_cost(v, "add"), 3, _rows_accum_emit(v, "add", _sum2),
               f"dst += the sum of 2 to {ROWS_MAX} rows of src elementwise, L1 rows of any "
               "stride", levels=(L1, L1)),
        # --- Fill: any value (MemsetZero only fills with zero)
        Kernel(f"L1Fill{sfx}", PrimKind.FILL, _l1_fill_check, _l1_fill_cost(v), 1,
               _l1_fill_emit(v), "vector stores of a value over a contiguous L1 tensor",
               levels=(L1,)),
        # --- AddChannel: one pixel's channels, or one channel's pixels.
        Kernel(f"VectorAddChannel{sfx}", PrimKind.ADD_CHANNEL, _channel_vector_check,
               _elementwise_cost(v, 3, 1), 0, _binary_emit(v, "add", "+"),
               "out = lhs + rhs along the channels of one pixel (contiguous L1 vectors)",
               levels=(L1, L1, L1)),
        Kernel(f"ScalarAddChannel{sfx}", PrimKind.ADD_CHANNEL, _channel_scalar_check,
               _channel_scalar_cost(v), 1, _channel_scalar_emit(v),
               "out = lhs + one channel's bias over contiguous L1 tensors",
               levels=(L1, RL, L1)),
    )
