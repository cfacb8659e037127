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
"""
from __future__ import annotations

from dataclasses import dataclass

from morello.cost import loop_iterations
from morello.kinds import PrimKind
from morello.layouts import Layout, PhysDim
from morello.memory import NLEVELS, Level, Target
from morello.nodes import Nest, NestCoord, NestStep, View
from morello.rewrites.base import Expansion
from morello.specs import Spec
from morello.tensorspec import TensorSpec, fresh

__all__ = ["HWIO", "NHWC", "ConvLower", "conv_actions", "identity"]

# Physical orders: the image and output [b, c|f, h, w] as NHWC, the filters [f, c, fh, fw]
# as HWIO.
NHWC = Layout(tuple(PhysDim(d) for d in (0, 2, 3, 1)))
HWIO = Layout(tuple(PhysDim(d) for d in (2, 3, 1, 0)))

_KINDS = (PrimKind.CONV, PrimKind.CONV_ACCUM)


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


@dataclass(frozen=True, slots=True)
class ConvLower:
    """Lower a Conv (ConvAccum) to matmuls over output rows; ``merged``: over whole
    images (1x1 filters, stride 1, no padding)."""

    merged: bool = False

    def plan(self, spec: Spec, target: Target) -> _Plan | None:
        if spec.kind not in _KINDS or any(o.level is not Level.GL for o in spec.operands):
            return None
        stride, pad = spec.params[:2]
        b, f, c, oh, ow, fh, fw = spec.shape
        if self.merged and not (fh == fw == 1 and stride == 1 and pad == 0):
            return None
        image, filters, out = spec.operands
        serial, limits = spec.serial_only, spec.limits
        allocs: list[TensorSpec] = []
        children: list[Spec] = []
        steps: list[NestStep] = []

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
            child(PrimKind.MOVE, (image.tile(used), xp.tile(used)), (View(0), View(src, at)))
        # The filters as HWIO.
        wsrc = 1
        if _as(filters, HWIO) != filters:
            allocs.append(_as(filters, HWIO))
            wsrc = -len(allocs)
            child(PrimKind.MOVE, (filters, allocs[-1]), (View(1), View(wsrc)))
        # The output as NHWC: in place if it is that already.
        ysrc = 2
        y = out
        if _as(out, NHWC) != out:
            y = _as(out, NHWC)
            allocs.append(y)
            ysrc = -len(allocs)
            if spec.kind is PrimKind.CONV_ACCUM:
                child(PrimKind.MOVE, (out, y), (View(2), View(ysrc)))
        if spec.kind is PrimKind.CONV:
            child(PrimKind.FILL, (y,), (View(ysrc),), (0.0,))

        # The matmuls: loops (b, oh, fh), or (b,) merged; the output rows run in parallel.
        parallel = not serial and oh > 1 and not self.merged and all(
            o.level.can_parallel_tile for o in spec.operands)
        m, k = (oh * ow, c) if self.merged else (ow, fw * c)
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
        else:
            loops = (oh, b, fh) if parallel else (b, oh, fh)
            lb, lo = (1, 0) if parallel else (0, 1)
            x_at = (_c(0, (lb, 1)), _c(0), _c(0, (lo, stride), (2, 1)), _c(0))
            w_at = (_c(0), _c(0), _c(0, (2, 1)), _c(0))
            y_at = (_c(0, (lb, 1)), _c(0), _c(0, (lo, 1)), _c(0))
        views = (View(src, x_at, (0, stride * c, 1)), View(wsrc, w_at, (0, f, 1)),
                 View(ysrc, y_at, (0, f, 1)))
        calls = b if self.merged else b * oh * fh
        iters = calls
        const = 0
        if parallel:
            iters = loop_iterations(oh, True, target) * b * fh
            const = target.parallel_setup_cost * b + target.parallel_iter_cost * b * (
                loop_iterations(oh, True, target))
        child(PrimKind.MATMUL_ACCUM, (lhs, rhs, res), views, loops=loops,
              shape=(1, m, k, f), is_serial=serial or parallel, parallel=parallel)
        if ysrc != 2:
            child(PrimKind.MOVE, (y, out), (View(ysrc), View(2)))
        coefs = tuple(iters if s.kind is PrimKind.MATMUL_ACCUM else 1 for s in children)
        return _Plan(tuple(allocs), tuple(children), coefs, const, tuple(steps))

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        p = self.plan(spec, target)
        if p is None:
            return None
        return Expansion(p.children, p.coefs, p.const, (0,) * NLEVELS)

    def apply(self, spec: Spec, target: Target) -> Nest:
        p = self.plan(spec, target)
        assert p is not None  # apply follows a successful expand
        return Nest(p.allocs, p.steps)

    def __str__(self) -> str:
        return f"ConvLower({'merged' if self.merged else 'rows'})"


def conv_actions(spec: Spec, target: Target) -> list[ConvLower]:
    if spec.kind not in _KINDS:
        return []
    return [ConvLower(False), ConvLower(True)]


def identity() -> list:
    """What conv action indices depend on (for the actions fingerprint)."""
    return [[k.name for k in _KINDS], ["rows", "merged"], str(NHWC), str(HWIO)]
