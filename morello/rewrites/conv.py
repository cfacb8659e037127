"""ConvLower: a convolution as matmuls over rows of output pixels.

With the image in NHWC order (zero-padded: ``xp``) and the filters in HWIO (``wt``), the
output row ``(b, oh)`` is, for each filter row ``fh``, a matmul accumulated into it::

    out[b, oh, :, :] += X[ow, (fw, c)] @ W[fh][(fw, c), f]     (M = OW, K = FW*C, N = F)

where ``X[ow, (fw, c)] = xp[b, oh*stride + fh, ow*stride + fw, c]``: for fixed ``ow``
the ``(fw, c)`` run is contiguous in NHWC, and the next ``ow`` starts ``stride * C``
elements on. That is a strided view, not a tile (rows overlap when ``stride * C < K``),
which the emitter gives the matmul through ``nodes.View.strides``; the matmul itself, a
``MatmulAccum[1, OW, FW*C, F]`` over main-memory operands, is searched like any other
(the register tiles, panels, packing of the 6x16 family serve it). Operands already in
the lowering's layouts are used in place; others are copied by Moves the search also
solves (an NCHW image to NHWC, OIHW filters to HWIO, the NHWC result back to NCHW).

``merged`` (1x1 filters, stride 1, no padding): the output pixels of an image are one
contiguous run in NHWC, so one matmul ``[1, OH*OW, C, F]`` per image.

``wide`` (stride 1): the output is computed on the padded image's grid, ``WP = OW + FW - 1``
columns a row, of which the last ``FW - 1`` are discarded. Pixel ``m = oh*WP + ow`` of that
grid reads ``xp`` at ``(m + fh*WP)*C + (fw, c)``: one step ``C`` for every pixel, so each
filter row is a single matmul ``[1, OH*WP - FW + 1, FW*C, F]`` per image whose M the search
tiles like any matmul's (the spatial tiling, halo included, is the tiling of M), at the
price of ``(FW - 1) / WP`` extra work and a copy of the valid columns out.

``nchw`` (stride 1): the same grid with the channels outermost, as torch's tensors are:
for each tap ``(fh, fw)``, ``out[f, m] += W[fh, fw][f, c] @ xp[c, m + fh*WP + fw]``, a matmul
``[1, F, C, OH*WP - FW + 1]`` whose right operand is the padded NCHW image read in place
(rows ``HP*WP`` apart). No transposes: a 1x1 unpadded conv is ``W @ X`` on the caller's
arrays, and a padded one copies only the border in.

``im2col`` (stride 1): every window gathered into a row of one matrix
``G[(b, oh, ow), (fh, fw, c)]`` (a copy of ``FW*C`` contiguous elements of the NHWC image per
output pixel and filter row), then one matmul ``[1, B*OH*OW, FH*FW*C, F]`` with the HWIO
filters in place: the reduction is the whole window, however few pixels there are (a 3x3
512-channel conv at 7x7 is a 49x4608x512 matmul, where ``rows`` makes 7x1536x512 ones).

``im2col_nchw`` (stride 1): the same with the channels outermost, as torch's tensors are:
``G[b][(c, fh, fw), (oh, ow)]`` gathers each tap's shifted plane of each channel (rows of
``OW`` contiguous elements), and ``out[b] = W[F, (c, fh, fw)] @ G[b]`` reads OIHW filters
and writes the NCHW output in place: no transposes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from morello import compose
from morello.cost import loop_iterations, move_cost, own_units
from morello.dtypes import Dtype
from morello.kinds import PrimKind
from morello.layouts import Layout, PhysDim
from morello.memory import NLEVELS, Level, Target
from morello.nodes import NEW, Nest, NestCoord, NestStep, View
from morello.rewrites.base import Expansion
from morello.specs import Spec, operand_shapes
from morello.tensorspec import TensorSpec, fresh

__all__ = ["HWIO", "NHWC", "ConvLower", "conv_actions", "identity"]

# Physical orders: the image and output [b, c|f, h, w] as NHWC, the filters [f, c, fh, fw]
# as HWIO.
NHWC = Layout(tuple(PhysDim(d) for d in (0, 2, 3, 1)))
HWIO = Layout(tuple(PhysDim(d) for d in (2, 3, 1, 0)))

_KINDS = (PrimKind.CONV, PrimKind.CONV_ACCUM)
VARIANTS = ("rows", "merged", "wide", "nchw", "im2col", "im2col_nchw")
# The kinds a lowering's children have (``morello.identity.closure``).
LOWERED_TO = (PrimKind.MOVE, PrimKind.FILL, PrimKind.MATMUL, PrimKind.MATMUL_ACCUM,
              PrimKind.TRANSPOSE)
NCHW = Layout(tuple(PhysDim(d) for d in range(4)))
# The filters as [fh, fw, f, c]: each tap an [F, C] matrix.
HWOI = Layout(tuple(PhysDim(d) for d in (2, 3, 0, 1)))


def _as(t: TensorSpec, layout: Layout) -> TensorSpec:
    return fresh(t.shape, t.dtype, Level.GL, layout)


def _c(const: int, *terms: tuple[int, int]) -> NestCoord:
    return (const, tuple(t for t in terms if t[1]))


@dataclass(frozen=True)
class _Plan:
    allocs: tuple[TensorSpec, ...]
    children: tuple[Spec, ...]
    coefs: tuple[int, ...]
    const: int
    steps: tuple[NestStep, ...]
    own: tuple[int, ...] = (0,) * NLEVELS  # units the lowering keeps per level


class Lowering:
    """An action that lowers a kind onto a Nest of other kinds (``plan``, which is None
    where it does not apply): its expansion and its Nest are the plan's."""

    variant: str

    def plan(self, spec: Spec, target: Target) -> _Plan | None:
        raise NotImplementedError

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        p = self.plan(spec, target)
        if p is None:
            return None
        return Expansion(p.children, p.coefs, p.const, p.own)

    def apply(self, spec: Spec, target: Target) -> Nest:
        p = self.plan(spec, target)
        assert p is not None  # apply follows a successful expand
        return Nest(p.allocs, p.steps)

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.variant})"


@dataclass(frozen=True, slots=True)
class ConvLower(Lowering):
    """Lower a Conv (ConvAccum) to matmuls: ``rows`` over output rows; ``merged`` over
    whole images (1x1 filters, stride 1, no padding); ``wide`` over whole images on the
    padded grid (stride 1)."""

    variant: str = "rows"
    KINDS = _KINDS

    @property
    def merged(self) -> bool:
        return self.variant == "merged"

    def plan(self, spec: Spec, target: Target) -> _Plan | None:
        if isinstance(spec.kind, compose.Chain):
            return _plan_chain(self, spec, target)
        return self._plan(spec, target, False)

    def _plan(self, spec: Spec, target: Target, own_out: bool) -> _Plan | None:
        """``own_out``: the output is always written through a buffer of the lowering's
        own, whose last child copies it out (``_plan_chain`` replaces that copy)."""
        if spec.kind not in _KINDS or any(o.level is not Level.GL for o in spec.operands):
            return None
        if self.variant == "nchw":
            return _plan_nchw(spec, own_out)
        if self.variant.startswith("im2col"):
            return _plan_im2col(spec, own_out, self.variant == "im2col_nchw")
        stride, pad = spec.params[:2]
        b, f, c, oh, ow, fh, fw = spec.shape
        if self.merged and not (fh == fw == 1 and stride == 1 and pad == 0):
            return None
        wide = self.variant == "wide"
        if wide and (stride != 1 or (fh == fw == 1 and pad == 0)):
            return None  # a 1x1 unpadded conv is ``merged`` already
        image, filters, out = spec.operands
        serial, limits = spec.serial_only, spec.limits
        allocs: list[TensorSpec] = []
        children: list[Spec] = []
        steps: list[NestStep] = []
        # The matmuls: loops (b, oh, fh), or (b,) merged; the output rows run in parallel.
        parallel = not serial and oh > 1 and self.variant == "rows" and all(
            o.level.can_parallel_tile for o in spec.operands)
        kept = None
        if self.variant == "rows" and not parallel:  # every row of pixels reads them
            kept = _kept_in_l2(fresh((1, fh * fw * c, f), filters.dtype, Level.GL,
                                     Layout(tuple(PhysDim(d) for d in range(3)))),
                               limits, target)
            if kept is not None:  # the lowering holds them: its children have the rest
                limits = kept[0]

        def child(kind: PrimKind, ops: tuple[TensorSpec, ...], views: tuple[View, ...],
                  params: tuple = (), loops: tuple[int, ...] = (), shape=None,
                  is_serial: bool = serial, parallel: bool = False) -> None:
            children.append(Spec(kind, shape or ops[0].shape, ops, is_serial, limits, params))
            steps.append(NestStep(loops, views, parallel))

        # The image as NHWC with its zero border, as far as the windows reach: in place if
        # it is NHWC and unpadded.
        src = 0
        hp, wp = stride * (oh - 1) + fh, stride * (ow - 1) + fw
        if pad or _as(image, NHWC) != image:
            xp = fresh((b, c, hp, wp), image.dtype, Level.GL, NHWC)
            allocs.append(xp)
            src = -len(allocs)
            h, w = image.shape[2:]
            used = (b, c, min(h, hp - pad), min(w, wp - pad))
            if pad:
                child(PrimKind.FILL, (xp,), (View(src),), (0.0,))
            at = (_c(0), _c(0), _c(pad), _c(pad))
            _relayout(child, image, View(0), xp, View(src, at), used)
        # The filters as HWIO.
        wsrc = 1
        if _as(filters, HWIO) != filters:
            allocs.append(_as(filters, HWIO))
            wsrc = -len(allocs)
            child(PrimKind.MOVE, (filters, allocs[-1]), (View(1), View(wsrc)))
        # The output as NHWC: in place if it is that already.
        ysrc = 2
        y = out
        yw = wp if wide else ow  # the output buffer's row: with the discarded columns
        if own_out or _as(out, NHWC) != out or yw != ow:
            y = fresh((b, f, oh, yw), out.dtype, Level.GL, NHWC)
            allocs.append(y)
            ysrc = -len(allocs)
            if spec.kind is PrimKind.CONV_ACCUM:
                _relayout(child, out, View(2), y, View(ysrc), out.shape)
        if spec.kind is PrimKind.CONV:
            child(PrimKind.FILL, (y,), (View(ysrc),), (0.0,))

        m, k = (oh * ow, c) if self.merged else (ow, fw * c)
        if wide:
            m = oh * wp - (fw - 1)  # through the last valid pixel: no read past the buffer
        lhs = TensorSpec((1, m, k), image.dtype, Level.GL, Layout(tuple(
            PhysDim(d) for d in range(3))), 3 if self.merged or stride * c == k else 1
                         ).canonical()
        rhs = fresh((1, k, f), filters.dtype, Level.GL, Layout(tuple(
            PhysDim(d) for d in range(3))))
        res = fresh((1, m, f), out.dtype, Level.GL, Layout(tuple(PhysDim(d) for d in range(3))))
        if self.merged:
            loops: tuple[int, ...] = (b,)
            x_at = (_c(0, (0, 1)), _c(0), _c(0), _c(0))
            w_at = (_c(0),) * 4
            y_at = (_c(0, (0, 1)), _c(0), _c(0), _c(0))
        elif wide:
            loops = (b, fh)
            x_at = (_c(0, (0, 1)), _c(0), _c(0, (1, 1)), _c(0))
            w_at = (_c(0), _c(0), _c(0, (1, 1)), _c(0))
            y_at = (_c(0, (0, 1)), _c(0), _c(0), _c(0))
        else:
            loops = (oh, b, fh) if parallel else (b, oh, fh)
            lb, lo = (1, 0) if parallel else (0, 1)
            x_at = (_c(0, (lb, 1)), _c(0), _c(0, (lo, stride), (2, 1)), _c(0))
            w_at = (_c(0), _c(0), _c(0, (2, 1)), _c(0))
            y_at = (_c(0, (lb, 1)), _c(0), _c(0, (lo, 1)), _c(0))
        views = (View(src, x_at, (0, stride * c, 1)), View(wsrc, w_at, (0, f, 1)),
                 View(ysrc, y_at, (0, f, 1)))
        calls = b if self.merged else b * fh if wide else b * oh * fh
        iters = calls
        const = 0
        if parallel:
            iters = loop_iterations(oh, True, target) * b * fh
            const = target.parallel_setup_cost * b + target.parallel_iter_cost * b * (
                loop_iterations(oh, True, target))
        if kept is not None:
            rhs = replace(rhs, level=Level.L2)
            const += kept[1]
        child(PrimKind.MATMUL_ACCUM, (lhs, rhs, res), views, loops=loops,
              shape=(1, m, k, f), is_serial=serial or parallel, parallel=parallel)
        if ysrc != 2:
            _copy_out(child, y, ysrc, out, own_out)
        coefs = tuple(iters if s.kind is PrimKind.MATMUL_ACCUM else math.prod(st.loops)
                      for s, st in zip(children, steps))
        return _Plan(tuple(allocs), tuple(children), coefs, const, tuple(steps),
                     kept[2] if kept is not None else (0,) * NLEVELS)



class _Builder:
    """A lowering's allocations and steps as they are added: ``child`` appends a Spec
    run over ``loops`` (its coefficient their product), ``buffer`` a new allocation."""

    def __init__(self, spec: Spec) -> None:
        self.serial, self.limits = spec.serial_only, spec.limits
        self.allocs: list[TensorSpec] = []
        self.children: list[Spec] = []
        self.steps: list[NestStep] = []
        self.coefs: list[int] = []

    def child(self, kind: PrimKind, ops: tuple[TensorSpec, ...], views: tuple[View, ...],
              params: tuple = (), loops: tuple[int, ...] = (), shape=None) -> None:
        self.children.append(Spec(kind, shape or ops[0].shape, ops, self.serial,
                                  self.limits, params))
        self.steps.append(NestStep(loops, views))
        self.coefs.append(math.prod(loops))

    def buffer(self, t: TensorSpec) -> int:
        self.allocs.append(t)
        return -len(self.allocs)

    def plan(self) -> _Plan:
        return _Plan(tuple(self.allocs), tuple(self.children), tuple(self.coefs), 0,
                     tuple(self.steps))


def _relayout(child, src: TensorSpec, src_view: View, dst: TensorSpec, dst_view: View,
              used: tuple[int, ...]) -> None:
    """Copy the ``used`` part of ``src`` into ``dst`` (both ``[b, c, h, w]``, one in NCHW
    and the other in NHWC, at the origins of the two views): a ``Transpose`` of each row
    of pixels, ``[channels, pixels]`` to ``[pixels, channels]`` or back, whose 8x8 blocks
    go through vector registers; any other pair of orders (or dtypes) by a ``Move``, which
    copies such a pair an element at a time (docs/model-notes.md)."""
    b, c, h, w = used
    if {_order(src), _order(dst)} != {"nchw", "nhwc"} \
            or (src.dtype, dst.dtype) != (Dtype.F32, Dtype.F32):
        child(PrimKind.MOVE, (src.tile(used), dst.tile(used)), (src_view, dst_view))
        return

    def row(t: TensorSpec, v: View) -> tuple[TensorSpec, View]:
        """Row ``(b, h)`` of ``t``: ``[c, w]`` of an NCHW tensor, ``[w, c]`` of an NHWC one."""
        at = v.at or (_c(0),) * 4
        at = (_c(at[0][0], (0, 1)), at[1], _c(at[2][0], (1, 1)), at[3])
        if _order(t) == "nchw":
            plane = t.shape[2] * t.shape[3]
            return _matrix((c, w), t, 3 if c == 1 else 1), View(v.source, at, (0, plane, 1))
        return _matrix((w, c), t, 3), View(v.source, at, (0, t.shape[1], 1))
    (a, av), (z, zv) = row(src, src_view), row(dst, dst_view)
    child(PrimKind.TRANSPOSE, (a, z), (av, zv), loops=(b, h), shape=a.shape)


def _copy_out(child, y: TensorSpec, ysrc: int, out: TensorSpec, own_out: bool) -> None:
    """The result, computed in the lowering's buffer ``y``, copied into the output: by a
    Move when ``own_out`` (``_plan_chain`` puts the chain's other steps in its place)."""
    if own_out:
        child(PrimKind.MOVE, (y.tile(out.shape), out), (View(ysrc), View(2)))
    else:
        _relayout(child, y, View(ysrc), out, View(2), out.shape)


def _order(t: TensorSpec) -> str | None:
    return "nchw" if _as(t, NCHW) == t else "nhwc" if _as(t, NHWC) == t else None


def _kept_in_l2(t: TensorSpec, limits, target: Target):
    """``(limits, cost, own units)`` of keeping ``t`` (in main memory) in L2 over a
    lowering's loop of matmuls that all read it: its lines read once, its units held;
    None if L2 cannot hold it. A matmul's operands are priced as from main memory on each
    call otherwise, though ``rows`` reads the same filters for every row of pixels
    (docs/model-notes.md)."""
    units = t.units(target)
    if units > target.capacity[Level.L2]:
        return None
    left = limits.subtract(Level.L2, units)
    if left is None:
        return None
    return left, move_cost(t, target), own_units(Level.L2, units)


def _matrix(shape: tuple[int, int], t: TensorSpec, contig: int) -> TensorSpec:
    """A matmul operand ``[1, *shape]`` over a strided view of ``t``: row-major, ``contig``
    of its dims contiguous (3: all, 1: the rows only)."""
    return TensorSpec((1, *shape), t.dtype, Level.GL, Layout(tuple(
        PhysDim(d) for d in range(3))), contig).canonical()


def _plan_chain(lower, spec: Spec, target: Target) -> _Plan | None:
    """A chain whose first step (its innermost component) is a conv (of one of ``lower``'s
    ``KINDS``, a ConvLower's or a DepthwiseLower's): the conv lowered as
    alone, its output kept in the lowering's buffer, and the chain's other steps reading
    that buffer where the conv alone would copy it out (one pass over the output fewer
    than a conv and then its steps)."""
    ch = spec.kind
    assert isinstance(ch, compose.Chain)
    last = len(ch.components) - 1
    if ch.components[last].kind not in lower.KINDS \
            or any(o.level is not Level.GL for o in spec.operands):
        return None
    kind, params, dims = compose.sub_chain(ch, last, last + 1)
    at, n, out = ch.offsets()[last], len(spec.operands), spec.operands[-1]
    shape = tuple(spec.shape[d] for d in dims)
    oshape = operand_shapes(kind, shape, params)[-1]
    layout = out.layout if oshape == out.shape else NCHW
    conv = Spec(kind, shape, (spec.operands[at], spec.operands[at + 1],
                              fresh(oshape, out.dtype, Level.GL, layout)),
                spec.serial_only, spec.limits, params)
    p = lower._plan(conv, target, True)
    if p is None:
        return None
    roles = {0: at, 1: at + 1, 2: n - 1}  # the conv's operands among the chain's

    def moved(v: View) -> View:
        return v if v.source < 0 else replace(v, source=roles[v.source])
    steps = [replace(st, operands=tuple(moved(v) for v in st.operands)) for st in p.steps]
    children = list(p.children)
    copy, view = children[-1], p.steps[-1].operands[0]
    assert copy.kind is PrimKind.MOVE and view.source < 0  # the buffer, copied out
    okind, oparams, odims = compose.sub_chain(ch, 0, last)
    _, outer = compose.split_steps(ch, last - 1, NEW)
    children[-1] = Spec(okind, tuple(spec.shape[d] for d in odims),
                        tuple(copy.operands[0] if a == NEW else spec.operands[a] for a in outer),
                        spec.serial_only, copy.limits, oparams)
    steps[-1] = NestStep((), tuple(view if a == NEW else View(a) for a in outer))
    return _Plan(p.allocs, tuple(children), p.coefs, p.const, tuple(steps), p.own)


def _plan_nchw(spec: Spec, own_out: bool = False) -> _Plan | None:
    stride, pad = spec.params[:2]
    b, f, c, oh, ow, fh, fw = spec.shape
    image, filters, out = spec.operands
    if stride != 1 or _as(image, NCHW) != image:
        return None
    nest = _Builder(spec)
    child, buffer = nest.child, nest.buffer
    hp, wp = oh + fh - 1, ow + fw - 1
    src = 0
    if pad:  # the image with its zero border, still NCHW
        xp = fresh((b, c, hp, wp), image.dtype, Level.GL, NCHW)
        src = buffer(xp)
        h, w = image.shape[2:]
        used = (b, c, min(h, hp - pad), min(w, wp - pad))
        child(PrimKind.FILL, (xp,), (View(src),), (0.0,))
        at = (_c(0), _c(0), _c(pad), _c(pad))
        child(PrimKind.MOVE, (image.tile(used), xp.tile(used)), (View(0), View(src, at)))
    elif image.shape[2:] != (hp, wp):
        return None  # rows the windows never read (a stride's remainder): not on this grid
    wsrc = 1
    if fh * fw > 1 and _as(filters, HWOI) != filters:
        wsrc = buffer(_as(filters, HWOI))
        child(PrimKind.MOVE, (filters, nest.allocs[-1]), (View(1), View(wsrc)))
    ysrc, y = 2, out
    if own_out or _as(out, NCHW) != out or wp != ow:
        y = fresh((b, f, oh, wp), out.dtype, Level.GL, NCHW)
        ysrc = buffer(y)
        if spec.kind is PrimKind.CONV_ACCUM:
            _relayout(child, out, View(2), y, View(ysrc), out.shape)
    if spec.kind is PrimKind.CONV:
        child(PrimKind.FILL, (y,), (View(ysrc),), (0.0,))
    m = oh * wp - (fw - 1)  # through the last valid pixel: no read past the image
    lhs = _matrix((f, c), filters, 3)
    rhs = _matrix((c, m), image, 3 if hp * wp == m else 1)
    res = _matrix((f, m), out, 3 if oh * wp == m else 1)
    loops = (b, fh, fw)
    x_at = (_c(0, (0, 1)), _c(0), _c(0, (1, 1)), _c(0, (2, 1)))
    w_at = (_c(0), _c(0), _c(0, (1, 1)), _c(0, (2, 1)))
    y_at = (_c(0, (0, 1)), _c(0), _c(0), _c(0))
    views = (View(wsrc, w_at, (0, c, 1)), View(src, x_at, (0, hp * wp, 1)),
             View(ysrc, y_at, (0, oh * wp, 1)))
    child(PrimKind.MATMUL_ACCUM, (lhs, rhs, res), views, loops=loops, shape=(1, f, c, m))
    if ysrc != 2:
        _copy_out(child, y, ysrc, out, own_out)
    return nest.plan()


def _plan_im2col(spec: Spec, own_out: bool, nchw: bool) -> _Plan | None:
    """The ``im2col`` lowerings (module docstring): a gathering loop of Moves into one
    matrix, then one matmul per image (``nchw``) or for the batch."""
    stride, pad = spec.params[:2]
    b, f, c, oh, ow, fh, fw = spec.shape
    image, filters, out = spec.operands
    if fh == fw == 1 and stride == 1 and pad == 0:
        return None  # the image is the matrix already: ``merged``
    # Stride 1 only: the other lowerings' windows overlap more at a stride (rows of a few
    # channels), where the model prices each row as a run of its own; ResNet's stem was
    # priced 1.04x im2col and ran 1.65x faster (docs/model-notes.md).
    if stride != 1 or (nchw and _as(image, NCHW) != image):
        return None
    accum = spec.kind is PrimKind.CONV_ACCUM
    order = NCHW if nchw else NHWC
    nest = _Builder(spec)
    child, buffer = nest.child, nest.buffer

    # The image with its zero border, as far as the windows reach (in ``order``).
    hp, wp = stride * (oh - 1) + fh, stride * (ow - 1) + fw
    src, xp = 0, image
    if pad or _as(image, order) != image:
        xp = fresh((b, c, hp, wp), image.dtype, Level.GL, order)
        src = buffer(xp)
        h, w = image.shape[2:]
        used = (b, c, min(h, hp - pad), min(w, wp - pad))
        if pad:
            child(PrimKind.FILL, (xp,), (View(src),), (0.0,))
        _relayout(child, image, View(0), xp, View(src, (_c(0), _c(0), _c(pad), _c(pad))),
                  used)
    elif nchw and image.shape[2:] != (hp, wp):
        return None  # rows the windows never read: a tile of the image would be needed
    # The filters as the matrix the matmul reads: OIHW ([F, (c, fh, fw)]) or HWIO.
    wsrc, wlay = 1, (NCHW if nchw else HWIO)
    if _as(filters, wlay) != filters:
        wsrc = buffer(_as(filters, wlay))
        child(PrimKind.MOVE, (filters, nest.allocs[-1]), (View(1), View(wsrc)))
    # The output, in place if it is in ``order`` already.
    ysrc, y = 2, out
    if own_out or _as(out, order) != out:
        y = fresh((b, f, oh, ow), out.dtype, Level.GL, order)
        ysrc = buffer(y)
        if accum:
            _relayout(child, out, View(2), y, View(ysrc), out.shape)
    k = c * fh * fw
    if nchw:  # G[b][(c, fh, fw)][(oh, ow)]: a tap's plane of one channel per Move
        g = fresh((b, k, oh, ow), image.dtype, Level.GL, NCHW)
        gsrc = buffer(g)
        part = (1, 1, oh, ow)
        child(PrimKind.MOVE, (xp.tile(part), g.tile(part)), (
            View(src, (_c(0, (0, 1)), _c(0, (1, 1)), _c(0, (2, 1)), _c(0, (3, 1)))),
            View(gsrc, (_c(0, (0, 1)), _c(0, (1, fh * fw), (2, fw), (3, 1)), _c(0), _c(0)))),
            loops=(b, c, fh, fw))
        per = (_c(0, (0, 1)), _c(0), _c(0), _c(0))
        ops = (_matrix((f, k), filters, 3), _matrix((k, oh * ow), g, 3),
               _matrix((f, oh * ow), y, 3))
        views = (View(wsrc, (_c(0),) * 4, (0, k, 1)), View(gsrc, per, (0, oh * ow, 1)),
                 View(ysrc, per, (0, oh * ow, 1)))
        child(PrimKind.MATMUL_ACCUM if accum else PrimKind.MATMUL, ops, views,
              loops=(b,), shape=(1, f, k, oh * ow))
    else:  # G[(b, oh, ow)][(fh, fw, c)]: one output row's windows of one filter row per Move
        m = b * oh * ow
        g = fresh((1, m, k), image.dtype, Level.GL, Layout(tuple(PhysDim(d) for d in range(3))))
        gsrc = buffer(g)
        run = fw * c
        window = _matrix((ow, run), image, 3 if stride * c == run else 1)
        child(PrimKind.MOVE, (window, g.tile((1, ow, run))), (
            View(src, (_c(0, (0, 1)), _c(0), _c(0, (1, stride), (2, 1)), _c(0)),
                 (0, stride * c, 1)),
            View(gsrc, (_c(0), _c(0, (0, oh * ow), (1, ow)), _c(0, (2, run))))),
            loops=(b, oh, fh), shape=(1, ow, run))
        zero = (_c(0),) * 4
        ops = (g, _matrix((k, f), filters, 3), _matrix((m, f), y, 3))
        views = (View(gsrc), View(wsrc, zero, (0, f, 1)), View(ysrc, zero, (0, f, 1)))
        child(PrimKind.MATMUL_ACCUM if accum else PrimKind.MATMUL, ops, views,
              shape=(1, m, k, f))
    if ysrc != 2:
        _copy_out(child, y, ysrc, out, own_out)
    return nest.plan()


def conv_actions(spec: Spec, target: Target) -> list[ConvLower]:
    """A conv's lowerings; a chain's too when its first step is a conv."""
    kind = spec.kind
    if kind not in _KINDS and not (isinstance(kind, compose.Chain)
                                   and kind.components[-1].kind in _KINDS):
        return []
    return [ConvLower(v) for v in VARIANTS]


def identity() -> list:
    """What conv action indices depend on (for the actions fingerprint)."""
    return [[k.name for k in _KINDS], list(VARIANTS), str(NHWC), str(HWIO), str(HWOI)]


# ``identity()`` as it was when stores had one context per target
# (``morello.identity.legacy_fingerprint``, frozen).
LEGACY_IDENTITY = [["CONV", "CONV_ACCUM"], ["rows", "merged", "wide", "nchw"],
                   "[0,2,3,1]", "[2,3,1,0]", "[2,3,0,1]"]
