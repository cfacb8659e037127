"""Primitive kinds as data: one ``KindInfo`` row per kind, read by every layer.

A Spec's ``shape`` is a tuple of *Spec dims*; each operand dim is an affine function of
them (``OperandDim``: a sum of Spec dims plus a constant). Everything else a layer needs
to know about a kind is a field of its row: which operands are read and written, which
Spec dims are reductions, the accumulating twin and its initial fill, the table family
its results are stored in, its C parameter names, its flop count and its numpy meaning.
The search core (``morello._dp``) never sees a kind: ``morello.search`` packs these rows
into integer arrays per *form* (a kind with its parameters at one rank).

==============  =============  =============================  =========================
kind            Spec shape     operands                       meaning
==============  =============  =============================  =========================
Matmul          [b, m, k, n]   lhs [b,m,k] rhs [b,k,n] out    out = lhs @ rhs
MatmulAccum     [b, m, k, n]   same                           out += lhs @ rhs
Move            s              src s, dst s                   dst = src
Fill{value}     s              dst s                          dst = value (0 or -inf)
Add, Mul        s              lhs s, rhs s, out s            out = lhs (+|*) rhs
AddBroadcast{d} s              lhs s, rhs m, out s            out = lhs + rhs repeated on d
AddChannel{d}   s              lhs s, rhs v, out s            out = lhs + rhs, v along d
Relu            s              src s, dst s                   dst = max(src, 0)
Transpose       [b, m, n]      src [b,m,n] dst [b,n,m]        dst[b] = src[b] transposed
Taps{stride}    [m, kh, kw, n] x [m,kh,kw,n] w [kh,kw,n]      out[m, n] = sum over the taps
                               out [m, n]                     of x[m, kh, kw, n] w[kh, kw, n]
TapsAccum       [m, kh, kw, n] same                           out += the same
Broadcast{d}    s              src s with s[d]=1, dst s       dst = src repeated along d
Max{d}, Sum{d}  s              src s, dst s with s[d]=1       dst = reduce(src) along d
MaxAccum{d}     s              same                           dst = max(dst, reduce(src))
SumAccum{d}     s              same                           dst += reduce(src)
Softmax{d}      s              src s, dst s                   dst = softmax of src along d
SoftmaxGivenMax s              src s, max m, dst s            the same, given m = max(src)
SoftmaxDenom{d} s              src s, max m, denom m          denom = sum exp(src - max)
 ...Accum{d}    s              same                           denom += sum exp(src - max)
SoftmaxComplete s              src s, max m, denom m, dst s   dst = exp(src - max) / denom
SoftmaxExp{d}   s              src s, max m, dst s            dst = exp(src - max)
SoftmaxUnscaled s              src s, max m, dst s, denom m   dst = exp(src - max),
                                                              denom = sum of dst along d
DivReduced{d}   s              denom m, dst s                 dst = dst / denom (in place)
SoftmaxUnsc...  s              src s, max m, dst s, denom m   the same, denom += the sum
 Accum{d}                                                     (tiles of the row: Split)
SoftmaxOnline   s              src s, max m, dst s            dst = softmax, max = max(src)
SoftmaxDenomMax s              src s, max m, denom m          the online merge of a tile:
 Accum{d}                                                     m' = max(max, max(src)),
                                                              denom = denom e^(max-m') +
                                                              sum e^(src-m'), max = m'
==============  =============  =============================  =========================

(``m`` is ``s`` with extent 1 at ``d``; ``v`` extent 1 everywhere but ``d``: a conv's
per-channel bias.) AddBroadcast is a bias add (``d`` = rows: one
bias per column); it has no kernel of its own: tiled to extent 1 at ``d`` it *is* an Add
(``morello.rewrites.decompose``). Softmax and SoftmaxGivenMax are *scan* kinds:
their output depends on the whole extent of the scan dim ``d``, which no loop may tile;
they are implemented by decomposition into the kinds below them
(``morello.rewrites.decompose``).

Reductions keep the reduced dim with extent 1 (numpy's ``keepdims=True``), so every
operand of a Spec has the Spec's rank and no tensor is of rank 0.
"""
from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from morello.dtypes import Dtype, widens

if TYPE_CHECKING:
    from morello.compose import Chain

# An operand dim: the Spec dims whose sizes it sums, plus a constant. ``((2,), 0)`` is
# Spec dim 2 itself; ``((), 1)`` a kept dim of extent 1; a Spec dim named twice counts
# twice: a conv's input rows at stride 2 are ``((oh, oh, fh), -2 - 2 * pad)``.
OperandDim = tuple[tuple[int, ...], int]
OperandMap = tuple[tuple[OperandDim, ...], ...]  # per operand, per operand dim

Params = tuple  # a kind's parameters, in the order of ``KindInfo.params``

# The most Spec dims of any kind: the search core's records are sized for it.
MAX_RANK = 4


class PrimKind(enum.IntEnum):
    """The primitive kinds. The value is only an enumeration index; nothing persisted or
    compiled depends on it (databases store family names, the core stores forms)."""

    MATMUL = 0
    MATMUL_ACCUM = 1
    MOVE = 2
    FILL = 3
    ADD = 4
    MUL = 5
    RELU = 6
    BROADCAST = 7
    MAX = 8
    MAX_ACCUM = 9
    SUM = 10
    SUM_ACCUM = 11
    SOFTMAX = 12
    SOFTMAX_GIVEN_MAX = 13
    SOFTMAX_DENOM = 14
    SOFTMAX_DENOM_ACCUM = 15
    SOFTMAX_COMPLETE = 16
    SOFTMAX_EXP = 17
    DIV_REDUCED = 18
    ADD_BROADCAST = 19
    SOFTMAX_UNSCALED = 20
    SOFTMAX_ONLINE = 21
    SOFTMAX_DENOM_MAX_ACCUM = 22
    SOFTMAX_UNSCALED_ACCUM = 23
    MATMUL_SAT16 = 24
    MATMUL_SAT16_ACCUM = 25
    DIV_REDUCED_INTO = 26
    FMAX = 27
    FMAX_ACCUM = 28
    CONV = 29
    CONV_ACCUM = 30
    ADD_CHANNEL = 31
    TRANSPOSE = 32
    DEPTHWISE = 33
    DEPTHWISE_ACCUM = 34
    TAPS = 35
    TAPS_ACCUM = 36

    @property
    def info(self) -> KindInfo:
        return KINDS[self]

    @property
    def title(self) -> str:
        return KINDS[self].title


@dataclass(frozen=True, slots=True)
class KindInfo:
    """Everything every layer needs to know about one primitive kind.

    - ``operand_map(rank, params)``: each operand dim as an ``OperandDim``.
    - ``reads``/``writes``: operand indices read (In, InOut) and written (Out, InOut).
    - ``accum``/``init``: the accumulating twin that ``ToAccum`` rewrites this kind into,
      after filling the output with ``init``; ``accumulates``: this kind reads its
      output and folds into it, so its reduction dims may be split (``Split``).
    - ``family``/``member``: results of all kinds of one family share a persistent
      table; ``member`` is the kind's coordinate there (a rewrite never raises it).
    - ``staging``: ``"full"`` offers every Move (views, relayouts into GL and L1 buffers,
      registers for ``vrf_operands``, L2 views of ``l2_views`` blocks L1 cannot hold
      and of ``l2_panels`` panels ``Target.l2_panel_cols`` columns wide);
      ``"views"`` only cache views into L1 (kernels work on L1 memory).
    - ``row_dim``: the output dim that also takes the target's row-only tile sizes.
    - ``scan``: the Spec dim ``params[0]`` may not be tiled (the output along it depends
      on all of it); such kinds are expanded by the Python rewrites, not the native core.
    - ``lowered``: implemented only by its lowerings (``morello.rewrites.conv``), no
      tiles, moves or kernels of its own.
    - ``widens``: inputs of narrow dtypes are widened by the Moves that copy them
      (``rewrites.move.WIDEN_TO``); False for kinds whose kernels take them narrow.
    - ``grouped_rows``: operands that may be copied with their rows grouped, in pairs
      (vpmaddwd's order) or quads (vpmaddubsw's and vpdpbusd's): a byte matmul's rhs.
    - ``computes``: the dtypes its output may have (the dtype it computes in); every
      input must widen into it exactly (``check_dtypes``).
    - ``reference(params, inputs, out)``: numpy semantics, written into the output
      array ``out`` (which an accumulating kind reads first) and returned; fast numpy
      (``out=``), so that benchmarks time numpy with it too.
    """

    title: str
    params: tuple[str, ...]
    operands: tuple[str, ...]
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    ranks: tuple[int, int]
    operand_map: Callable[[int, Params], OperandMap]
    family: str
    member: int | None
    reference: Callable[[Params, list, np.ndarray | None], np.ndarray]
    flops_per_point: int = 0
    accum: PrimKind | None = None
    init: float | None = None
    accumulates: bool = False
    staging: str = "views"
    vrf_operands: tuple[int, ...] = ()
    l2_views: tuple[int, ...] = ()
    l2_panels: tuple[int, ...] = ()
    row_dim: int | None = None
    grouped_rows: tuple[int, ...] = ()
    scan: bool = False
    computes: tuple[Dtype, ...] = (Dtype.F32,)
    widens: bool = True
    lowered: bool = False
    doc: str = ""

    @property
    def n_operands(self) -> int:
        return len(self.operands)

    @property
    def output(self) -> int:
        """The operand the Spec's tiles follow (its first written operand; a second one,
        as SoftmaxUnscaled's denominators, has the same dims but the scan dim)."""
        return self.writes[0]

    def check_params(self, rank: int, params: Params) -> str | None:
        """Why ``params`` are invalid for this kind at ``rank`` (None: they are valid)."""
        if len(params) != len(self.params):
            return f"{self.title} takes parameters {self.params or '()'}, got {params}"
        for name, v in zip(self.params, params):
            if name == "dim" and (isinstance(v, bool) or not isinstance(v, int)
                                  or not 0 <= v < rank):
                return f"{self.title}: dim must be an integer in [0, {rank}), got {v!r}"
            if name == "value" and v not in FILL_VALUES:
                return f"{self.title}: value must be one of {FILL_VALUES}, got {v!r}"
            if name in ("stride", "pad", "hrem", "wrem") and (
                    isinstance(v, bool) or not isinstance(v, int)
                    or v < (1 if name == "stride" else 0)):
                return (f"{self.title}: {name} must be an integer >= "
                        f"{1 if name == 'stride' else 0}, got {v!r}")
            if name in ("hrem", "wrem") and not v < params[0]:
                return f"{self.title}: {name} must be below the stride, got {v!r}"
        lo, hi = self.ranks
        if not lo <= rank <= hi:
            return f"{self.title} needs rank {lo}..{hi}, got {rank}"
        return None


FILL_VALUES = (0.0, -math.inf)


def param_samples(name: str, rank: int) -> tuple:
    """Values of parameter ``name`` that stand for all of them in the model's identity
    (``identity.family_fingerprint``): every dim, every fill value, and strides and
    pads enough to show how they enter the operand maps."""
    if name == "dim":
        return tuple(range(rank))
    if name == "value":
        return FILL_VALUES
    return {"stride": (1, 2, 3), "pad": (0, 1, 2), "hrem": (0, 1), "wrem": (0, 1)}[name]
ANY_DTYPE = tuple(Dtype)


@functools.lru_cache(maxsize=1 << 12)
def check_dtypes(kind: PrimKind | Chain, dtypes: tuple[Dtype, ...]) -> str | None:
    """Why operands of these dtypes are invalid for ``kind`` (None: they are valid): the
    output's dtype must be one the kind computes in, every written operand has it, and
    every input widens into it exactly."""
    info = kind.info
    out = dtypes[info.output]
    if out not in info.computes:
        return (f"{info.title} computes in {'/'.join(d.short for d in info.computes)}, "
                f"not {out}")
    for i, d in enumerate(dtypes):
        if i in info.writes and d is not out:
            return f"{info.title}: written operands must all be {out}, {info.operands[i]} is {d}"
        if not widens(d, out):
            return (f"{info.title}: {info.operands[i]} of dtype {d} does not widen exactly "
                    f"into the output's {out}")
    return None


def _same(n_ops: int) -> Callable[[int, Params], OperandMap]:
    def operand_map(rank: int, params: Params) -> OperandMap:
        return tuple(tuple(((d,), 0) for d in range(rank)) for _ in range(n_ops))
    return operand_map


def _matmul_map(rank: int, params: Params) -> OperandMap:
    b, m, k, n = (((d,), 0) for d in range(4))
    return ((b, m, k), (b, k, n), (b, m, n))


# Conv's Spec dims: [b, f, c, oh, ow, fh, fw] (outputs, then the reductions c, fh, fw).
# Its params: stride, the zero padding before and after each spatial dim, and per spatial
# dim the rows (columns) the windows leave over at the end (``(h + 2 pad - fh) % stride``,
# as torch's conv2d takes them): the padding after is ``pad`` less these, and where they
# exceed ``pad`` the image's last rows are not read.
CONV_DIMS = ("b", "f", "c", "oh", "ow", "fh", "fw")
CONV_PARAMS = ("stride", "pad", "hrem", "wrem")


def _conv_map(rank: int, params: Params) -> OperandMap:
    """image [b, c, h, w], filters [f, c, fh, fw], out [b, f, oh, ow]; the image is the
    unpadded input: h = stride * (oh - 1) + fh - 2 * pad + hrem."""
    stride, pad, hrem, wrem = params
    b, f, c, oh, ow, fh, fw = range(7)

    def rows(o: int, k: int, rem: int) -> OperandDim:
        return ((o,) * stride + (k,), -stride - 2 * pad + rem)
    return ((((b,), 0), ((c,), 0), rows(oh, fh, hrem), rows(ow, fw, wrem)),
            (((f,), 0), ((c,), 0), ((fh,), 0), ((fw,), 0)),
            (((b,), 0), ((f,), 0), ((oh,), 0), ((ow,), 0)))


# A depthwise conv's Spec dims: [b, c, oh, ow, fh, fw] (one filter per channel, its only
# reductions the taps); its params as Conv's.
DEPTHWISE_DIMS = ("b", "c", "oh", "ow", "fh", "fw")


def _depthwise_map(rank: int, params: Params) -> OperandMap:
    """image [b, c, h, w], filters [c, 1, fh, fw] (torch's weight at groups = c), out
    [b, c, oh, ow]; the image's rows as Conv's."""
    stride, pad, hrem, wrem = params
    b, c, oh, ow, fh, fw = range(6)

    def rows(o: int, k: int, rem: int) -> OperandDim:
        return ((o,) * stride + (k,), -stride - 2 * pad + rem)
    return ((((b,), 0), ((c,), 0), rows(oh, fh, hrem), rows(ow, fw, wrem)),
            (((c,), 0), ((), 1), ((fh,), 0), ((fw,), 0)),
            (((b,), 0), ((c,), 0), ((oh,), 0), ((ow,), 0)))


def _taps_map(rank: int, params: Params) -> OperandMap:
    """x [m, kh, kw, n] (a channels-last image's windows: a view, its rows overlap), w
    [kh, kw, n], out [m, n]: a depthwise conv's output pixels ``m`` by channels ``n``."""
    m, kh, kw, n = (((d,), 0) for d in range(4))
    return ((m, kh, kw, n), (kh, kw, n), (m, n))


def _taps_ref(params, ins, out):
    np.einsum("mhwn,hwn->mn", ins[0], ins[1], out=out)
    return out


def _taps_accum_ref(params, ins, out):
    out += np.einsum("mhwn,hwn->mn", ins[0], ins[1])
    return out


def _transpose_map(rank: int, params: Params) -> OperandMap:
    b, m, n = (((d,), 0) for d in range(3))
    return ((b, m, n), (b, n, m))


def _transpose_ref(params, ins, out):
    np.copyto(out, np.swapaxes(ins[0], 1, 2))
    return out


def _keep_one(dim: int, rank: int) -> tuple[OperandDim, ...]:
    return tuple(((), 1) if d == dim else ((d,), 0) for d in range(rank))


def _full(rank: int) -> tuple[OperandDim, ...]:
    return tuple(((d,), 0) for d in range(rank))


def _reduce_map(rank: int, params: Params) -> OperandMap:
    (dim,) = params
    return (_full(rank), _keep_one(dim, rank))


def _channel_map(rank: int, params: Params) -> OperandMap:
    """lhs and out of the Spec's shape; rhs only along ``dim`` (extent 1 elsewhere)."""
    (dim,) = params
    only = tuple(((d,), 0) if d == dim else ((), 1) for d in range(rank))
    return (_full(rank), only, _full(rank))


def _broadcast_map(rank: int, params: Params) -> OperandMap:
    (dim,) = params
    return (_keep_one(dim, rank), _full(rank))


def _reduced_map(n_full: int, n_kept: int, full_last: bool = False):
    """Operands: ``n_full`` of the Spec's shape, then ``n_kept`` with extent 1 at the
    dim ``params[0]`` (and, with ``full_last``, one more of the Spec's shape)."""
    def operand_map(rank: int, params: Params) -> OperandMap:
        (dim,) = params
        full, kept = _full(rank), _keep_one(dim, rank)
        return (full,) * n_full + (kept,) * n_kept + ((full,) if full_last else ())
    return operand_map


def _unscaled_map(rank: int, params: Params) -> OperandMap:
    (dim,) = params
    full, kept = _full(rank), _keep_one(dim, rank)
    return (full, kept, full, kept)


def _div_into_map(rank: int, params: Params) -> OperandMap:
    (dim,) = params
    full, kept = _full(rank), _keep_one(dim, rank)
    return (kept, full, full)


def _softmax(x: np.ndarray, dim: int) -> np.ndarray:
    """Numerically safe softmax: exp(x - max) / sum(exp(x - max)) (f32 throughout)."""
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def _softmax_ref(params, ins, out):
    np.copyto(out, _softmax(ins[0], params[0]))
    return out


def _softmax_given_max_ref(params, ins, out):
    e = np.exp(ins[0] - ins[1])
    return np.divide(e, np.sum(e, axis=params[0], keepdims=True), out=out)


def _softmax_denom_ref(params, ins, out):
    return np.sum(np.exp(ins[0] - ins[1]), axis=params[0], keepdims=True, out=out)


def _softmax_denom_accum_ref(params, ins, out):
    out += np.sum(np.exp(ins[0] - ins[1]), axis=params[0], keepdims=True)
    return out


def _softmax_complete_ref(params, ins, out):
    return np.divide(np.exp(ins[0] - ins[1]), ins[2], out=out)


def _softmax_exp_ref(params, ins, out):
    return np.exp(ins[0] - ins[1], out=out)


def _softmax_unscaled_ref(params, ins, out):
    """Writes dst (returned) and fills the denominators into ``ins[2]`` when given."""
    np.exp(ins[0] - ins[1], out=out)
    if len(ins) > 2:
        np.sum(out, axis=params[0], keepdims=True, out=ins[2])
    return out


def _softmax_unscaled_accum_ref(params, ins, out):
    """Writes dst (returned) and adds the sums into ``ins[2]`` when given."""
    np.exp(ins[0] - ins[1], out=out)
    if len(ins) > 2:
        ins[2] += np.sum(out, axis=params[0], keepdims=True)
    return out


def _softmax_online_ref(params, ins, out):
    np.max(ins[0], axis=params[0], keepdims=True, out=ins[1]) if len(ins) > 1 else None
    np.copyto(out, _softmax(ins[0], params[0]))
    return out


def _denom_max_accum_ref(params, ins, out):
    """The online merge: ``ins`` = (src, max) and ``out`` the denominators; the max
    (``ins[1]``) is updated in place."""
    src, mx = ins[0], ins[1]
    new = np.maximum(mx, np.max(src, axis=params[0], keepdims=True))
    with np.errstate(invalid="ignore"):
        out *= np.exp(mx - new)
        out += np.sum(np.exp(src - new), axis=params[0], keepdims=True)
    np.copyto(mx, new)
    return out


def _div_reduced_ref(params, ins, out):
    return np.divide(out, ins[0], out=out)


def _div_reduced_into_ref(params, ins, out):
    return np.divide(ins[1], ins[0], out=out)


def _add_broadcast_ref(params, ins, out):
    return np.add(ins[0], ins[1], out=out)


def _widened(out: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``a`` in the output's dtype (exact: inputs widen into it, ``check_dtypes``)."""
    return a if a.dtype == out.dtype else a.astype(out.dtype)


def _matmul_ref(params, ins, out):
    return np.matmul(_widened(out, ins[0]), _widened(out, ins[1]), out=out)


def _matmul_accum_ref(params, ins, out):
    out += np.matmul(_widened(out, ins[0]), _widened(out, ins[1]))
    return out


def _sat16_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum over k-pairs of sat16(a[2j] b[2j] + a[2j+1] b[2j+1]), batched (b, m, k) @
    (b, k, n), in int32; an odd last k is a product alone (it cannot saturate)."""
    a32, b32 = a.astype(np.int32), b.astype(np.int32)
    k = a.shape[-1]
    acc = np.zeros(a.shape[:-1] + b.shape[-1:], np.int32)
    for j in range(0, k, 2):
        pair = a32[..., :, j:j + 1] * b32[..., j:j + 1, :]
        if j + 1 < k:
            pair = pair + a32[..., :, j + 1:j + 2] * b32[..., j + 1:j + 2, :]
        acc += np.clip(pair, -32768, 32767)
    return acc


def _sat16_ref(params, ins, out):
    np.copyto(out, _sat16_products(ins[0], ins[1]))
    return out


def _sat16_accum_ref(params, ins, out):
    out += _sat16_products(ins[0], ins[1])
    return out


def _reduce_ref(fn):
    def ref(params, ins, out):
        return fn(ins[0], axis=params[0], keepdims=True, out=out)
    return ref


def _reduce_accum_ref(fn, fold):
    def ref(params, ins, out):
        return fold(out, fn(ins[0], axis=params[0], keepdims=True), out=out)
    return ref


def _fmax_ref(params, ins, out):
    return np.fmax.reduce(ins[0], axis=params[0], keepdims=True, out=out, initial=-np.inf)


def _fmax_accum_ref(params, ins, out):
    part = np.fmax.reduce(ins[0], axis=params[0], keepdims=True, initial=-np.inf)
    return np.fmax(out, part, out=out)


def conv2d_numpy(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """torch's ``conv2d`` (NCHW, OIHW, no bias) in numpy: windows of the zero-padded
    input contracted with the filters."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    fh, fw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(xp, (fh, fw), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]  # [b, c, oh, ow, fh, fw]
    return np.einsum("bchwij,fcij->bfhw", win, w, optimize=True)


def depthwise_numpy(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """torch's ``conv2d(x, w, groups=C)`` with ``w`` of ``C x 1 x KH x KW``, in numpy."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    fh, fw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(xp, (fh, fw), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]
    return np.einsum("bchwij,cij->bchw", win, w[:, 0], optimize=True)


def _windows_ref(fn, accum: bool):
    """The reference of a conv kind computed by ``fn(x, w, stride, pad)``: written into
    ``out``, or added to it (``accum``)."""
    def ref(params, ins, out):
        y = fn(_widened(out, ins[0]), _widened(out, ins[1]), *params[:2])
        if accum:
            out += y
        else:
            np.copyto(out, y)
        return out
    return ref


_conv_ref, _conv_accum_ref = _windows_ref(conv2d_numpy, False), _windows_ref(conv2d_numpy, True)
_depthwise_ref = _windows_ref(depthwise_numpy, False)
_depthwise_accum_ref = _windows_ref(depthwise_numpy, True)


def _copy_ref(params, ins, out):
    np.copyto(out, _widened(out, ins[0]))  # numpy broadcasting repeats a kept dim of extent 1
    return out


def _fill_ref(params, ins, out):
    out.fill(params[0])
    return out


KINDS: dict[PrimKind, KindInfo] = {
    PrimKind.MATMUL: KindInfo(
        "Matmul", (), ("lhs", "rhs", "out"), (0, 1), (2,), (4, 4), _matmul_map,
        "Matmul", 1, _matmul_ref, flops_per_point=2, accum=PrimKind.MATMUL_ACCUM,
        init=0.0, staging="full", vrf_operands=(1, 2), row_dim=1, grouped_rows=(1,),
        computes=(Dtype.F32, Dtype.S32), doc="out = lhs @ rhs (batched)"),
    PrimKind.MATMUL_ACCUM: KindInfo(
        "MatmulAccum", (), ("lhs", "rhs", "out"), (0, 1, 2), (2,), (4, 4), _matmul_map,
        "Matmul", 0, _matmul_accum_ref, flops_per_point=2, accumulates=True, staging="full",
        vrf_operands=(1, 2), l2_views=(0,), l2_panels=(1,), row_dim=1, grouped_rows=(1,),
        computes=(Dtype.F32, Dtype.S32), doc="out += lhs @ rhs"),
    # u8 x s8 with vpmaddubsw's semantics: the products of each k-pair summed with s16
    # saturation (|sum| > 32767 only if both bytes of a pair are large: u8 values < 128
    # never saturate), pairs added into s32. No Split: a loop over k must keep the pairs
    # of the whole k, so its kernels loop over all of k themselves.
    PrimKind.MATMUL_SAT16: KindInfo(
        "MatmulSat16", (), ("lhs", "rhs", "out"), (0, 1), (2,), (4, 4), _matmul_map,
        "MatmulSat16", 1, _sat16_ref, flops_per_point=2, accum=PrimKind.MATMUL_SAT16_ACCUM,
        init=0.0, staging="full", vrf_operands=(2,), row_dim=1, grouped_rows=(1,),
        computes=(Dtype.S32,), widens=False,
        doc="out = lhs @ rhs, each k-pair's sum saturated to s16"),
    PrimKind.MATMUL_SAT16_ACCUM: KindInfo(
        "MatmulSat16Accum", (), ("lhs", "rhs", "out"), (0, 1, 2), (2,), (4, 4), _matmul_map,
        "MatmulSat16", 0, _sat16_accum_ref, flops_per_point=2, staging="full",
        vrf_operands=(2,), row_dim=1, grouped_rows=(1,), computes=(Dtype.S32,),
        widens=False, doc="out += lhs @ rhs, each k-pair's sum saturated to s16"),
    PrimKind.MOVE: KindInfo(
        "Move", (), ("src", "dst"), (0,), (1,), (1, MAX_RANK), _same(2), "Move", None,
        _copy_ref, computes=ANY_DTYPE, doc="dst = src (widened, if dst is wider)"),
    PrimKind.FILL: KindInfo(
        "Fill", ("value",), ("dst",), (), (0,), (1, MAX_RANK), _same(1), "Fill", None,
        _fill_ref, computes=ANY_DTYPE, doc="dst = value"),
    PrimKind.ADD: KindInfo(
        "Add", (), ("lhs", "rhs", "out"), (0, 1), (2,), (1, MAX_RANK), _same(3), "Add", None,
        lambda p, ins, out: np.add(ins[0], ins[1], out=out), flops_per_point=1,
        doc="out = lhs + rhs"),
    PrimKind.MUL: KindInfo(
        "Mul", (), ("lhs", "rhs", "out"), (0, 1), (2,), (1, MAX_RANK), _same(3), "Mul", None,
        lambda p, ins, out: np.multiply(ins[0], ins[1], out=out), flops_per_point=1,
        doc="out = lhs * rhs"),
    PrimKind.RELU: KindInfo(
        "Relu", (), ("src", "dst"), (0,), (1,), (1, MAX_RANK), _same(2), "Relu", None,
        lambda p, ins, out: np.maximum(ins[0], 0, out=out), flops_per_point=1,
        doc="dst = max(src, 0)"),
    PrimKind.ADD_BROADCAST: KindInfo(
        "AddBroadcast", ("dim",), ("lhs", "rhs", "out"), (0, 1), (2,), (1, MAX_RANK),
        _reduced_map(1, 1, full_last=True), "AddBroadcast", None, _add_broadcast_ref,
        flops_per_point=1, doc="out = lhs + rhs, rhs repeated along dim (a bias)"),
    PrimKind.BROADCAST: KindInfo(
        "Broadcast", ("dim",), ("src", "dst"), (0,), (1,), (1, MAX_RANK), _broadcast_map,
        "Broadcast", None,
        _copy_ref, doc="dst = src repeated along dim"),
    PrimKind.MAX: KindInfo(
        "Max", ("dim",), ("src", "dst"), (0,), (1,), (1, MAX_RANK), _reduce_map, "Max", 1,
        _reduce_ref(np.max), flops_per_point=1, accum=PrimKind.MAX_ACCUM,
        init=-math.inf, doc="dst = max of src along dim"),
    PrimKind.MAX_ACCUM: KindInfo(
        "MaxAccum", ("dim",), ("src", "dst"), (0, 1), (1,), (1, MAX_RANK), _reduce_map, "Max",
        0, _reduce_accum_ref(np.max, np.maximum), flops_per_point=1, accumulates=True,
        doc="dst = max(dst, max of src along dim)"),
    # Softmax's maximum: NaN ignored (np.fmax), which needs no NaN flag per vector, as
    # Max does (the flag slows softmax: ``targets.vector.VecType``); a NaN
    # in a row still makes the row NaN, through its exps.
    PrimKind.FMAX: KindInfo(
        "FMax", ("dim",), ("src", "dst"), (0,), (1,), (1, MAX_RANK), _reduce_map, "FMax", 1,
        _fmax_ref, flops_per_point=1, accum=PrimKind.FMAX_ACCUM,
        init=-math.inf, doc="dst = max of src along dim, NaN ignored (-inf if all are)"),
    PrimKind.FMAX_ACCUM: KindInfo(
        "FMaxAccum", ("dim",), ("src", "dst"), (0, 1), (1,), (1, MAX_RANK), _reduce_map,
        "FMax", 0, _fmax_accum_ref, flops_per_point=1, accumulates=True,
        doc="dst = fmax(dst, max of src along dim, NaN ignored)"),
    PrimKind.SUM: KindInfo(
        "Sum", ("dim",), ("src", "dst"), (0,), (1,), (1, MAX_RANK), _reduce_map, "Sum", 1,
        _reduce_ref(np.sum), flops_per_point=1, accum=PrimKind.SUM_ACCUM,
        init=0.0, doc="dst = sum of src along dim"),
    PrimKind.SUM_ACCUM: KindInfo(
        "SumAccum", ("dim",), ("src", "dst"), (0, 1), (1,), (1, MAX_RANK), _reduce_map, "Sum",
        0, _reduce_accum_ref(np.sum, np.add), flops_per_point=1, accumulates=True,
        doc="dst += sum of src along dim"),
    # The softmax family. Flops: the exp as one, its subtraction, the fold.
    PrimKind.SOFTMAX: KindInfo(
        "Softmax", ("dim",), ("src", "dst"), (0,), (1,), (1, MAX_RANK), _reduced_map(2, 0),
        "Softmax", None, _softmax_ref, flops_per_point=5, scan=True, l2_views=(0, 1),
        doc="dst = exp(src - max) / sum(exp(src - max)) along dim"),
    PrimKind.SOFTMAX_GIVEN_MAX: KindInfo(
        "SoftmaxGivenMax", ("dim",), ("src", "max", "dst"), (0, 1), (2,), (1, MAX_RANK),
        _reduced_map(1, 1, full_last=True), "SoftmaxGivenMax", None, _softmax_given_max_ref,
        flops_per_point=4, scan=True, l2_views=(0, 2),
        doc="dst = softmax of src along dim, given its max"),
    PrimKind.SOFTMAX_DENOM: KindInfo(
        "SoftmaxDenom", ("dim",), ("src", "max", "denom"), (0, 1), (2,), (1, MAX_RANK),
        _reduced_map(1, 2), "SoftmaxDenom", 1, _softmax_denom_ref, flops_per_point=3,
        accum=PrimKind.SOFTMAX_DENOM_ACCUM, init=0.0,
        doc="denom = sum of exp(src - max) along dim"),
    PrimKind.SOFTMAX_DENOM_ACCUM: KindInfo(
        "SoftmaxDenomAccum", ("dim",), ("src", "max", "denom"), (0, 1, 2), (2,),
        (1, MAX_RANK), _reduced_map(1, 2), "SoftmaxDenom", 0, _softmax_denom_accum_ref,
        flops_per_point=3, accumulates=True, doc="denom += sum of exp(src - max) along dim"),
    PrimKind.SOFTMAX_COMPLETE: KindInfo(
        "SoftmaxComplete", ("dim",), ("src", "max", "denom", "dst"), (0, 1, 2), (3,),
        (1, MAX_RANK), _reduced_map(1, 2, full_last=True), "SoftmaxComplete", None,
        _softmax_complete_ref, flops_per_point=3, doc="dst = exp(src - max) / denom"),
    PrimKind.SOFTMAX_EXP: KindInfo(
        "SoftmaxExp", ("dim",), ("src", "max", "dst"), (0, 1), (2,), (1, MAX_RANK),
        _reduced_map(1, 1, full_last=True), "SoftmaxExp", None, _softmax_exp_ref,
        flops_per_point=2, doc="dst = exp(src - max)"),
    # Two written operands (the exps and their sum): a scan kind, for one row at a time.
    PrimKind.SOFTMAX_UNSCALED: KindInfo(
        "SoftmaxUnscaled", ("dim",), ("src", "max", "dst", "denom"), (0, 1), (2, 3),
        (1, MAX_RANK), _unscaled_map, "SoftmaxUnscaled", None, _softmax_unscaled_ref,
        flops_per_point=3, scan=True,
        doc="dst = exp(src - max) and denom = sum of dst along dim"),
    # The same over tiles of the row: not a scan kind, the loop over the row's tiles adds
    # each tile's sum into denom (which that dim does not index).
    PrimKind.SOFTMAX_UNSCALED_ACCUM: KindInfo(
        "SoftmaxUnscaledAccum", ("dim",), ("src", "max", "dst", "denom"), (0, 1, 3), (2, 3),
        (1, MAX_RANK), _unscaled_map, "SoftmaxUnscaledAccum", None,
        _softmax_unscaled_accum_ref, flops_per_point=3,
        doc="dst = exp(src - max) and denom += sum of dst along dim"),
    # The online (one-pass) denominator: the max found along the way, the partial sums
    # rescaled when it grows (the FromParts merge, one tile at a time).
    PrimKind.SOFTMAX_ONLINE: KindInfo(
        "SoftmaxOnline", ("dim",), ("src", "max", "dst"), (0,), (2, 1), (1, MAX_RANK),
        _reduced_map(1, 1, full_last=True), "SoftmaxOnline", None, _softmax_online_ref,
        flops_per_point=5, scan=True,
        doc="dst = softmax of src along dim; max = its max"),
    PrimKind.SOFTMAX_DENOM_MAX_ACCUM: KindInfo(
        "SoftmaxDenomMaxAccum", ("dim",), ("src", "max", "denom"), (0, 1, 2), (2, 1),
        (1, MAX_RANK), _reduced_map(1, 2), "SoftmaxDenomMax", None, _denom_max_accum_ref,
        flops_per_point=4, accumulates=True,
        doc="max, denom = the online merge of src into the running max and denom"),
    PrimKind.DIV_REDUCED: KindInfo(
        "DivReduced", ("dim",), ("denom", "dst"), (0, 1), (1,), (1, MAX_RANK),
        _reduced_map(0, 1, full_last=True), "DivReduced", None, _div_reduced_ref,
        flops_per_point=1, doc="dst = dst / denom (denom reduced along dim)"),
    # The same out of another buffer: a softmax's exps kept in an L1 row, divided into
    # the output as it is stored (past the caches, for problems in DRAM).
    PrimKind.DIV_REDUCED_INTO: KindInfo(
        "DivReducedInto", ("dim",), ("denom", "src", "dst"), (0, 1), (2,), (1, MAX_RANK),
        _div_into_map, "DivReducedInto", None, _div_reduced_into_ref,
        flops_per_point=1, doc="dst = src / denom (denom reduced along dim)"),
    # Lowered onto matmuls over rows of output pixels (``morello.rewrites.conv``).
    PrimKind.CONV: KindInfo(
        "Conv", CONV_PARAMS, ("image", "filters", "out"), (0, 1), (2,), (7, 7),
        _conv_map, "Conv", 1, _conv_ref, flops_per_point=2, accum=PrimKind.CONV_ACCUM,
        init=0.0, lowered=True,
        doc="out = conv2d(image, filters) (NCHW, OIHW; stride, zero padding)"),
    PrimKind.CONV_ACCUM: KindInfo(
        "ConvAccum", CONV_PARAMS, ("image", "filters", "out"), (0, 1, 2), (2,), (7, 7),
        _conv_map, "Conv", 0, _conv_accum_ref, flops_per_point=2, accumulates=True,
        lowered=True, doc="out += conv2d(image, filters)"),
    # One filter per channel (torch's groups = C), lowered onto matmuls over its taps
    # (``morello.rewrites.depthwise``).
    PrimKind.DEPTHWISE: KindInfo(
        "Depthwise", CONV_PARAMS, ("image", "filters", "out"), (0, 1), (2,), (6, 6),
        _depthwise_map, "Depthwise", 1, _depthwise_ref, flops_per_point=2,
        accum=PrimKind.DEPTHWISE_ACCUM, init=0.0, lowered=True,
        doc="out = conv2d(image, filters, groups=C) (NCHW, [C, 1, KH, KW])"),
    PrimKind.DEPTHWISE_ACCUM: KindInfo(
        "DepthwiseAccum", CONV_PARAMS, ("image", "filters", "out"), (0, 1, 2), (2,), (6, 6),
        _depthwise_map, "Depthwise", 0, _depthwise_accum_ref, flops_per_point=2,
        accumulates=True, lowered=True, doc="out += conv2d(image, filters, groups=C)"),
    # A conv's per-channel bias: rhs a vector along dim, repeated over every other dim.
    PrimKind.ADD_CHANNEL: KindInfo(
        "AddChannel", ("dim",), ("lhs", "rhs", "out"), (0, 1), (2,), (1, MAX_RANK),
        _channel_map, "AddChannel", None, _add_broadcast_ref, flops_per_point=1,
        doc="out = lhs + rhs, rhs a vector along dim (a per-channel bias)"),
    # The NHWC <-> NCHW copies of a conv's lowerings: an image's [pixels, channels]
    # matrix transposed (``morello.rewrites.conv``).
    PrimKind.TRANSPOSE: KindInfo(
        "Transpose", (), ("src", "dst"), (0,), (1,), (3, 3), _transpose_map, "Transpose",
        None, _transpose_ref, doc="dst[b] = src[b] transposed"),
    # A channels-last depthwise conv's row of pixels (``morello.rewrites.depthwise``):
    # vectors along the channels, every tap of a pixel summed in its registers. ``stride``
    # is the view's: x[m + 1, kh, kw] is x[m, kh, kw + stride], so at 1 a kernel may read
    # each input vector once for every pixel and tap it serves.
    PrimKind.TAPS: KindInfo(
        "Taps", ("stride",), ("x", "w", "out"), (0, 1), (2,), (4, 4), _taps_map, "Taps", 1,
        _taps_ref, flops_per_point=2, accum=PrimKind.TAPS_ACCUM, init=0.0, staging="full",
        vrf_operands=(2,), row_dim=0, doc="out[m, n] = sum of x[m, kh, kw, n] w[kh, kw, n]"),
    PrimKind.TAPS_ACCUM: KindInfo(
        "TapsAccum", ("stride",), ("x", "w", "out"), (0, 1, 2), (2,), (4, 4), _taps_map,
        "Taps", 0,
        _taps_accum_ref, flops_per_point=2, accumulates=True, staging="full",
        vrf_operands=(2,), row_dim=0, doc="out[m, n] += sum of x[m, kh, kw, n] w[kh, kw, n]"),
}

BY_TITLE = {info.title: kind for kind, info in KINDS.items()}


@functools.lru_cache(maxsize=1 << 16)  # Spec validation calls it for every Spec built
def operand_shapes(kind: PrimKind | Chain, shape: tuple[int, ...],
                   params: Params = ()) -> tuple[tuple[int, ...], ...]:
    """Each operand's shape, from the Spec's ``shape`` through the kind's operand map."""
    return tuple(
        tuple(sum(shape[s] for s in sdims) + c for sdims, c in dims)
        for dims in kind.info.operand_map(len(shape), params)
    )


def operand_dim(kind: PrimKind | Chain, operand: int, sdim: int, rank: int,
                params: Params = ()) -> int | None:
    """The dim of ``operand`` that Spec dim ``sdim`` indexes alone (None: no operand dim
    is exactly that Spec dim)."""
    for d, (sdims, c) in enumerate(kind.info.operand_map(rank, params)[operand]):
        if sdims == (sdim,) and c == 0:
            return d
    return None


def output_dims(kind: PrimKind | Chain, rank: int, params: Params = ()) -> tuple[int | None, ...]:
    """Per output dim, the Spec dim it is (None for a constant dim)."""
    info = kind.info
    dims = info.operand_map(rank, params)[info.output]
    return tuple(sdims[0] if len(sdims) == 1 and c == 0 else None for sdims, c in dims)


def reduction_dims(kind: PrimKind | Chain, rank: int, params: Params = ()) -> tuple[int, ...]:
    """Spec dims that index no written operand: loops over them accumulate."""
    info = kind.info
    omap = info.operand_map(rank, params)
    written = {s for w in info.writes for sdims, _ in omap[w] for s in sdims}
    return tuple(d for d in range(rank) if d not in written)


@dataclass(frozen=True, slots=True)
class FormFacts:
    """What the search packs into the core for a form (a kind with its parameters at one
    rank), derived once from the kind's row (``form_facts``)."""

    operand_map: tuple          # per operand, per dim: (Spec dims summed, constant)
    single_dims: bool           # every operand dim is one Spec dim or a constant
    out_rank: int               # dims of the output
    outdims: tuple[int, ...]    # per output dim, its Spec dim (-1: a constant dim)
    splits: tuple[int, ...]     # the dims a Split may cut (accumulating kinds), else ()


@functools.lru_cache(maxsize=1 << 12)
def form_facts(kind: PrimKind | Chain, params: Params, rank: int) -> FormFacts:
    """The ``FormFacts`` of ``kind`` with ``params`` at ``rank``; ValueError with the
    reason if the parameters do not fit the rank."""
    info = kind.info
    reason = info.check_params(rank, params)
    if reason:
        raise ValueError(reason)
    omap = info.operand_map(rank, params)
    return FormFacts(
        omap,
        all(len(sdims) == 0 or (len(sdims) == 1 and c == 0)
            for dims in omap for sdims, c in dims),
        len(omap[info.output]),
        tuple(-1 if d is None else d for d in output_dims(kind, rank, params)),
        reduction_dims(kind, rank, params) if info.accumulates else ())


def fixed_dims(kind: PrimKind | Chain, rank: int, params: Params = ()) -> tuple[int, ...]:
    """Spec dims no loop may tile: a scan kind's scan dim (``params[0]``), a chain's
    softmax scan dims (``morello.compose.Chain.fixed_dims``)."""
    info = kind.info
    if not info.scan:
        return ()
    chain_fixed = getattr(kind, "fixed_dims", None)
    return chain_fixed() if chain_fixed is not None else (params[0],)
