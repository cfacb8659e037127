"""DepthwiseLower: a depthwise conv (one filter per channel) as matmuls over its taps.

Each channel of an NCHW image is a plane of its own, and its output plane is a sum of the
plane's shifted copies, one per tap, scaled by that tap's weight. Both lowerings make each
filter row's ``FW`` taps the reduction of a matmul over views whose rows overlap:

``grid`` (stride 1): the output is computed on the grid of the (padded) image,
``P`` columns a row (the image's width, or the padded copy's). Pixel ``m`` of the grid
reads the plane at ``m + fh*P + fw``, so for each filter row ``fh`` it is one matmul
``[1, 1, FW, M]``: ``w[c, 0, fh, :] @ X`` with ``X[fw, m] = plane[m + fh*P + fw]`` (rows one
element apart), a broadcast of each weight times vectors of pixels. The valid pixels (the
first ``OW`` columns of each row) are copied out. (The code takes any stride, on the
stride-1 grid, but ``stride**2`` times the work lost to ``taps`` wherever it was timed.)

``rows`` (stride 1): ``grid`` one output row at a time, ``[1, 1, FW, OW]`` per filter row,
written into the output in place: no copy out, one matmul per row and filter row.

``taps`` (any stride): for each output row and filter row one matmul ``[1, OW, FW, 1]``: the windows
of an image row (``X[ow, fw] = row[ow*stride + fw]``) times the filter row, written into the
output row in place: no grid and no copy out, but a vector of one output.

All three lower one plane: ``planes`` lowers a depthwise conv of several to a loop over them,
each a Depthwise of its own, so that a plane's padded copy and output stay in L1. They read
NCHW images and ``[C, 1, KH, KW]`` filters in place (a padded image is copied into a zeroed
buffer first) and write NCHW outputs.

``nhwc`` (channels-last images, any stride): one ``Taps`` per output row, ``out[ow, c] =
sum over (fh, fw) of X[ow, fh, fw, c] * W[fh, fw, c]`` with ``X[ow, fh, fw, c] =
x[b, oh*stride + fh - pad, ow*stride + fw - pad, c]`` (a view: rows ``stride*C`` apart,
filter rows an image row apart) and the filters transposed once to ``[KH, KW, C]``. The
pixels whose windows cross the zero border are Taps of their own over the taps inside. Vectors run
along the channels, so a pixel's taps are multiply-adds into the same registers
(``kernels.taps``), with no broadcast and no matmul. The row's windows are held in L2 (or
L1) and the filters in L1, each line paid for once.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from morello import compose
from morello.cost import loop_iterations, move_cost, own_units
from morello.kinds import PrimKind
from morello.layouts import Layout, PhysDim
from morello.memory import Level, Target
from morello.nodes import View
from morello.rewrites.conv import LOWERED_TO as CONV_LOWERED_TO
from morello.rewrites.conv import (
    NCHW,
    NHWC,
    Lowering,
    _as,
    _Builder,
    _c,
    _matrix,
    _Plan,
    _plan_chain,
)
from morello.specs import Spec
from morello.tensorspec import TensorSpec, fresh

__all__ = ["LOWERED_TO", "DepthwiseLower", "depthwise_actions", "identity"]

_KINDS = (PrimKind.DEPTHWISE, PrimKind.DEPTHWISE_ACCUM)
VARIANTS = ("planes", "grid", "taps", "rows", "nhwc")
# The kinds a lowering's children have (``morello.identity.closure``).
LOWERED_TO = (*CONV_LOWERED_TO, PrimKind.TAPS, PrimKind.TAPS_ACCUM)


@dataclass(frozen=True, slots=True)
class DepthwiseLower(Lowering):
    """Lower a Depthwise (DepthwiseAccum) conv to matmuls over its taps: ``grid`` on the
    stride-1 grid of each plane, ``taps`` a row of windows at a time (module docstring)."""

    variant: str = "grid"
    KINDS = _KINDS

    def plan(self, spec: Spec, target: Target) -> _Plan | None:
        if isinstance(spec.kind, compose.Chain):
            return _plan_chain(self, spec, target)
        return self._plan(spec, target, False)

    def _plan(self, spec: Spec, target: Target, own_out: bool) -> _Plan | None:
        """``own_out``: the output is written through a buffer of the lowering's own,
        copied out by its last child (which ``conv._plan_chain`` replaces)."""
        if spec.kind not in _KINDS or any(o.level is not Level.GL for o in spec.operands):
            return None
        image, filters, out = spec.operands
        if self.variant == "nhwc":
            if _as(image, NHWC) != image or _as(out, NHWC) != out or _as(filters, NCHW) != filters:
                return None
            return _plan_nhwc(spec, target, own_out)
        if any(_as(t, NCHW) != t for t in spec.operands):
            return None
        planes = spec.shape[0] * spec.shape[1]
        if (self.variant == "planes") != (planes > 1):
            return None  # many planes: one at a time; one plane: its matmuls
        if self.variant == "planes":
            return _plan_planes(spec, target, own_out)
        if self.variant == "grid":
            # At a stride the grid is ``stride**2`` times the output: 56² at stride 2
            # ran at half the speed of ``taps`` (docs/model-notes.md).
            p = _plan_grid(spec, own_out) if spec.params[0] == 1 else None
        elif self.variant == "rows":
            p = _plan_rows(spec, own_out)
        else:  # held, its matmuls of one output took programs 4.6x slower at stride 2
            return _plan_taps(spec, own_out)
        return p if p is None else _held(p, spec, target)



def _plan_planes(spec: Spec, target: Target, own_out: bool) -> _Plan:
    """One plane (image channel) at a time: each a Depthwise of its own, so that its
    padded copy and its output stay in L1 between the passes its lowering makes over
    them (the model prices main memory the same at any size; docs/model-notes.md). The
    channels run in parallel unless the Spec is serial."""
    b, c = spec.shape[:2]
    kind = spec.kind
    assert isinstance(kind, PrimKind)
    nest = _Builder(spec)
    ysrc, y = 2, spec.operands[2]
    if own_out:
        y = fresh(y.shape, y.dtype, Level.GL, NCHW)
        ysrc = nest.buffer(y)
    parallel = not spec.serial_only and c > 1
    lb, lc = (1, 0) if parallel else (0, 1)
    plane = (_c(0, (lb, 1)), _c(0, (lc, 1)), _c(0), _c(0))
    one = tuple(t.tile((1, 1, *t.shape[2:])) for t in spec.operands)
    nest.child(kind, (one[0], spec.operands[1].tile((1, *one[1].shape[1:])), one[2]),
               (View(0, plane), View(1, (_c(0, (lc, 1)), _c(0), _c(0), _c(0))),
                View(ysrc, plane)), spec.params, loops=(c, b) if parallel else (b, c),
               shape=(1, 1, *spec.shape[2:]))
    const = 0
    if parallel:  # the channels across threads, each plane's program serial
        iters = loop_iterations(c, True, target)
        nest.children[-1] = replace(nest.children[-1], serial_only=True)
        nest.steps[-1] = replace(nest.steps[-1], parallel=True)
        nest.coefs[-1] = iters * b
        const = target.parallel_setup_cost + target.parallel_iter_cost * iters
    if own_out:
        nest.child(PrimKind.MOVE, (y, spec.operands[2]), (View(ysrc), View(2)))
    return replace(nest.plan(), const=const)


def _held(p: _Plan, plane: Spec, target: Target) -> _Plan:
    """``p`` with the tensors its matmuls read and write held in the fastest cache that
    takes them all (one plane's: its image or padded copy, its output or grid): each
    such line paid for once, the matmuls' operands in that level. Priced as main memory
    on every call, they made the matmuls of a row cost 2.7x those of a whole plane per
    pixel, where both read L1 (docs/model-notes.md)."""
    calls = [i for i, c in enumerate(p.children) if c.kind is PrimKind.MATMUL_ACCUM]
    spec = p.children[calls[0]]
    sources = {v.source for i in calls for v in p.steps[i].operands}
    tensors = [plane.operands[s] if s >= 0 else p.allocs[-1 - s] for s in sorted(sources)]
    for level in (Level.L1, Level.L2):
        units = sum(replace(t, level=level).units(target) for t in tensors)
        left = spec.limits.subtract(level, units) if units <= target.capacity[level] else None
        if left is not None:
            break
    else:
        return p
    children = [replace(c, limits=left) for c in p.children]  # the held lines are taken
    for i in calls:
        c = children[i]
        children[i] = replace(c, operands=tuple(replace(t, level=level) for t in c.operands))
    const = p.const + sum(move_cost(t, target) for t in tensors)
    return replace(p, children=tuple(children), const=const, own=own_units(level, units))


def _padded(nest: _Builder, spec: Spec) -> tuple[int, TensorSpec]:
    """The image as the windows read it: in place when unpadded, else copied into a
    zeroed NCHW buffer as far as the windows reach. ``(view source, tensor)``."""
    stride, pad = spec.params[:2]
    b, c, oh, ow, fh, fw = spec.shape
    image = spec.operands[0]
    if not pad:
        return 0, image
    hp, wp = stride * (oh - 1) + fh, stride * (ow - 1) + fw
    xp = fresh((b, c, hp, wp), image.dtype, Level.GL, NCHW)
    src = nest.buffer(xp)
    h, w = image.shape[2:]
    used = (b, c, min(h, hp - pad), min(w, wp - pad))
    nest.child(PrimKind.FILL, (xp,), (View(src),), (0.0,))
    nest.child(PrimKind.MOVE, (image.tile(used), xp.tile(used)),
               (View(0), View(src, (_c(0), _c(0), _c(pad), _c(pad)))))
    return src, xp


def _plan_grid(spec: Spec, own_out: bool) -> _Plan:
    stride = spec.params[0]
    b, c, oh, ow, fh, fw = spec.shape
    filters, out = spec.operands[1:]
    nest = _Builder(spec)
    src, xp = _padded(nest, spec)
    p = xp.shape[3]  # the grid's row: the image's
    gh = stride * (oh - 1) + 1  # the grid's rows through the last valid one
    m = (gh - 1) * p + stride * (ow - 1) + 1  # through the last valid pixel
    ysrc, y = 2, out
    every = stride == 1 and p == ow and not own_out
    if not every:
        y = fresh((b, c, gh, p), out.dtype, Level.GL, NCHW)
        ysrc = nest.buffer(y)
    # The output's pixels among the grid's: rows and columns ``stride`` apart.
    plane = gh * p
    picks = (c * plane, plane, stride * p, stride)
    valid = TensorSpec(out.shape, out.dtype, Level.GL, NCHW, 1 if stride == 1 else 0
                       ).canonical()
    if spec.kind is PrimKind.DEPTHWISE or not every:  # the grid's other pixels zeroed too
        nest.child(PrimKind.FILL, (y,), (View(ysrc),), (0.0,))
    if spec.kind is PrimKind.DEPTHWISE_ACCUM and not every:
        nest.child(PrimKind.MOVE, (out, valid), (View(2), View(ysrc, None, picks)))
    lhs = _matrix((1, fw), filters, 3)
    rhs = _matrix((fw, m), xp, 1)
    res = _matrix((1, m), y, 3)
    views = (View(1, (_c(0, (1, 1)), _c(0), _c(0, (2, 1)), _c(0)), (0, fw, 1)),
             View(src, (_c(0, (0, 1)), _c(0, (1, 1)), _c(0, (2, 1)), _c(0)), (0, 1, 1)),
             View(ysrc, (_c(0, (0, 1)), _c(0, (1, 1)), _c(0), _c(0)), (0, m, 1)))
    nest.child(PrimKind.MATMUL_ACCUM, (lhs, rhs, res), views, loops=(b, c, fh),
               shape=(1, 1, fw, m))
    if not every:
        nest.child(PrimKind.MOVE, (valid, out), (View(ysrc, None, picks), View(2)))
    return nest.plan()


def _plan_rows(spec: Spec, own_out: bool) -> _Plan | None:
    """``rows`` (stride 1): ``grid`` one output row at a time, written in place."""
    stride = spec.params[0]
    if stride != 1:
        return None  # the windows' columns would be ``stride`` apart: no vectors
    b, c, oh, ow, fh, fw = spec.shape
    filters, out = spec.operands[1:]
    nest = _Builder(spec)
    src, xp = _padded(nest, spec)
    ysrc, y = _output(nest, spec, own_out)
    lhs = _matrix((1, fw), filters, 3)
    rhs = _matrix((fw, ow), xp, 1)
    res = _matrix((1, ow), y, 3)
    views = (View(1, (_c(0, (1, 1)), _c(0), _c(0, (3, 1)), _c(0)), (0, fw, 1)),
             View(src, (_c(0, (0, 1)), _c(0, (1, 1)), _c(0, (2, 1), (3, 1)), _c(0)), (0, 1, 1)),
             View(ysrc, (_c(0, (0, 1)), _c(0, (1, 1)), _c(0, (2, 1)), _c(0)), (0, ow, 1)))
    nest.child(PrimKind.MATMUL_ACCUM, (lhs, rhs, res), views, loops=(b, c, oh, fh),
               shape=(1, 1, fw, ow))
    if own_out:
        nest.child(PrimKind.MOVE, (y, out), (View(ysrc), View(2)))
    return nest.plan()


def _output(nest: _Builder, spec: Spec, own_out: bool) -> tuple[int, TensorSpec]:
    """The output the matmuls accumulate into, zeroed (or holding the output, for an
    accumulating kind): in place, or a buffer of the lowering's own (``own_out``)."""
    out = spec.operands[2]
    ysrc, y = 2, out
    if own_out:
        y = fresh(out.shape, out.dtype, Level.GL, NCHW)
        ysrc = nest.buffer(y)
    if spec.kind is PrimKind.DEPTHWISE:
        nest.child(PrimKind.FILL, (y,), (View(ysrc),), (0.0,))
    elif own_out:
        nest.child(PrimKind.MOVE, (out, y), (View(2), View(ysrc)))
    return ysrc, y


def _plan_taps(spec: Spec, own_out: bool) -> _Plan:
    stride = spec.params[0]
    b, c, oh, ow, fh, fw = spec.shape
    filters, out = spec.operands[1:]
    nest = _Builder(spec)
    src, xp = _padded(nest, spec)
    ysrc, y = _output(nest, spec, own_out)
    lhs = _matrix((ow, fw), xp, 3 if stride == fw else 1)
    rhs = _matrix((fw, 1), filters, 3)
    res = _matrix((ow, 1), y, 3)
    views = (View(src, (_c(0, (0, 1)), _c(0, (1, 1)), _c(0, (2, stride), (3, 1)), _c(0)),
                  (0, stride, 1)),
             View(1, (_c(0, (1, 1)), _c(0), _c(0, (3, 1)), _c(0)), (0, 1, 1)),
             View(ysrc, (_c(0, (0, 1)), _c(0, (1, 1)), _c(0, (2, 1)), _c(0)), (0, 1, 1)))
    nest.child(PrimKind.MATMUL_ACCUM, (lhs, rhs, res), views, loops=(b, c, oh, fh),
               shape=(1, ow, fw, 1))
    if own_out:
        nest.child(PrimKind.MOVE, (y, out), (View(ysrc), View(2)))
    return nest.plan()


def _spans(outs: int, stride: int, pad: int, size: int, taps: int) -> list[tuple[int, ...]]:
    """The output rows (or columns) of a padded dim in runs that read the same taps:
    ``(first, count, t0, t1)``, the taps ``t0 .. t1 - 1`` of each inside the image (the
    others fall on the zero border)."""
    spans: list[tuple[int, ...]] = []
    for o in range(outs):
        lo, hi = max(0, pad - o * stride), min(taps, size + pad - o * stride)
        if spans and spans[-1][2:] == (lo, hi):
            spans[-1] = (spans[-1][0], spans[-1][1] + 1, lo, hi)
        else:
            spans.append((o, 1, lo, hi))
    return spans


def _plan_nhwc(spec: Spec, target: Target, own_out: bool) -> _Plan:
    """``nhwc``: a ``Taps`` per output row (module docstring), the rows in parallel
    unless the Spec is serial. A padded image is read in place: the rows and columns
    whose windows cross the border are Taps of their own over the taps inside the image,
    so nothing is copied and no zero is multiplied."""
    stride, pad = spec.params[:2]
    b, c, oh, ow, fh, fw = spec.shape
    image, filters, out = spec.operands
    h, w = image.shape[2:]
    nest = _Builder(spec)
    # The filters [C, KH*KW] transposed to [KH*KW, C]: each tap's weights one vector run.
    taps = fh * fw
    wt = fresh((fh, fw, c), filters.dtype, Level.GL, Layout(tuple(PhysDim(d) for d in range(3))))
    wsrc = nest.buffer(wt)
    nest.child(PrimKind.TRANSPOSE, (_matrix((c, taps), filters, 3), _matrix((taps, c), wt, 3)),
               (View(1, None, (0, taps, 1)), View(wsrc, None, (0, c, 1))))
    ysrc, y = 2, out
    if own_out:
        y = fresh(out.shape, out.dtype, Level.GL, NHWC)
        ysrc = nest.buffer(y)
        if spec.kind is PrimKind.DEPTHWISE_ACCUM:
            nest.child(PrimKind.MOVE, (out, y), (View(2), View(ysrc)))
    kind = PrimKind.TAPS if spec.kind is PrimKind.DEPTHWISE else PrimKind.TAPS_ACCUM
    rm4 = Layout(tuple(PhysDim(d) for d in range(4)))
    rows, cols = _spans(oh, stride, pad, h, fh), _spans(ow, stride, pad, w, fw)
    most = max(rows, key=lambda r: r[1])
    const = 0
    for r0, nr, i0, i1 in rows:
        # The rows of the longest run across threads (each row's program serial).
        parallel = not spec.serial_only and nr > 1 and (r0, nr) == most[:2]
        lb, lo = (1, 0) if parallel else (0, 1)
        for c0, nc, j0, j1 in cols:
            kh, kw = i1 - i0, j1 - j0
            if kh < 1 or kw < 1:  # windows of the border alone (a pad beyond the kernel)
                if spec.kind is PrimKind.DEPTHWISE:
                    nest.child(PrimKind.FILL, (fresh((nc, c), out.dtype, Level.GL, Layout((
                        PhysDim(0), PhysDim(1)))),), (View(ysrc, (_c(0, (0, 1)), _c(0), _c(
                            r0, (1, 1)), _c(c0)), (c, 1)),), (0.0,), loops=(b, nr))
                continue
            x = TensorSpec((nc, kh, kw, c), image.dtype, Level.GL, rm4, 2).canonical()
            res = fresh((nc, c), out.dtype, Level.GL, Layout((PhysDim(0), PhysDim(1))))
            views = (View(0, (_c(0, (lb, 1)), _c(0), _c(r0 * stride - pad + i0, (lo, stride)),
                              _c(c0 * stride - pad + j0)), (stride * c, w * c, c, 1)),
                     View(wsrc, (_c(i0), _c(j0), _c(0))),
                     View(ysrc, (_c(0, (lb, 1)), _c(0), _c(r0, (lo, 1)), _c(c0)), (c, 1)))
            nest.child(kind, (x, wt.tile((kh, kw, c)), res), views, (stride,),
                       loops=(nr, b) if parallel else (b, nr), shape=(nc, kh, kw, c))
            if parallel:
                iters = loop_iterations(nr, True, target)
                nest.children[-1] = replace(nest.children[-1], serial_only=True)
                nest.steps[-1] = replace(nest.steps[-1], parallel=True)
                nest.coefs[-1] = iters * b
                const += target.parallel_setup_cost + target.parallel_iter_cost * iters
    if own_out:
        nest.child(PrimKind.MOVE, (y, out), (View(ysrc), View(2)))
    p = replace(nest.plan(), const=const)
    return _hold_rows(p, spec, wt, target)


def _hold_rows(p: _Plan, spec: Spec, wt: TensorSpec, target: Target) -> _Plan:
    """``p`` (``nhwc``'s) with the filters held in L1 and the image rows one output row's
    windows read (``KH`` rows) in L1 or L2, where they fit: the filters' and image's lines
    paid for once (an image row is read again by the next ``KH - 1`` output rows at stride
    1), the ``Taps`` operands in those levels and every child's limits what is left."""
    calls = [j for j, s in enumerate(p.children) if s.kind in (PrimKind.TAPS,
                                                                PrimKind.TAPS_ACCUM)]
    image = spec.operands[0]
    b, c, oh, ow, fh, fw = spec.shape
    rows = fresh((1, c, fh, image.shape[3]), image.dtype, Level.GL, NHWC)
    limits = p.children[calls[0]].limits
    const, own = p.const, [0] * len(p.own)
    held: dict[int, Level] = {}
    for j, t, whole in ((1, wt, wt), (0, rows, image)):
        for level in (Level.L1, Level.L2):
            units = replace(t, level=level).units(target)
            # One subtraction per level, as the core makes it (each one snaps down).
            left = limits.subtract(level, own[level] + units) \
                if own[level] + units <= target.capacity[level] else None
            if left is not None:
                break
        else:
            continue
        own[level] += units
        held[j] = level
        const += move_cost(whole, target)
    for lvl, units in enumerate(own):
        if units:
            left = limits.subtract(Level(lvl), units)
            assert left is not None  # each fit above
            limits = left
    children = [replace(s, limits=limits) for s in p.children]  # the held lines are taken
    for i in calls:
        ops = list(children[i].operands)
        for j, level in held.items():
            ops[j] = replace(ops[j], level=level)
        children[i] = replace(children[i], operands=tuple(ops))
    return replace(p, children=tuple(children), const=const, own=tuple(own))


def depthwise_actions(spec: Spec, target: Target) -> list[DepthwiseLower]:
    """A depthwise conv's lowerings; a chain's too when its first step is one."""
    kind = spec.kind
    if kind not in _KINDS and not (isinstance(kind, compose.Chain)
                                   and kind.components[-1].kind in _KINDS):
        return []
    return [DepthwiseLower(v) for v in VARIANTS]


def identity() -> list:
    """What depthwise action indices depend on (for the actions fingerprint)."""
    return [[k.name for k in _KINDS], list(VARIANTS), str(NCHW)]
