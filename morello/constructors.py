"""The Spec constructors: canonical Specs of each kind over row-major operands in main memory."""
from __future__ import annotations

import numpy as np

from morello import layouts, limits
from morello.dtypes import Dtype, parse_dtype
from morello.errors import SpecError
from morello.memory import Level, Target, parse_target
from morello.specs import PrimKind, Spec, check_dtypes, operand_shapes
from morello.tensorspec import TensorSpec, fresh


def _size(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise SpecError(f"{name} must be an integer, got {_short_repr(v)}")
    return limits.check_size(name, int(v))


def _short_repr(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _dtypes(kind: PrimKind, dtype, dtypes) -> tuple[Dtype, ...]:
    """Per-operand dtypes: ``dtypes`` (one per operand, in operand order) if given, else
    ``dtype`` for every operand."""
    names = kind.info.operands
    if dtypes is None:
        return (parse_dtype(dtype),) * len(names)
    if isinstance(dtypes, str):
        dtypes = [d.strip() for d in dtypes.split(",")]
    if not isinstance(dtypes, (tuple, list)) or len(dtypes) != len(names):
        raise SpecError(f"{kind.title} takes {len(names)} dtypes ({', '.join(names)}), "
                        f"got {_short_repr(dtypes)}")
    return tuple(parse_dtype(d) for d in dtypes)


def _spec(kind: PrimKind, shape: tuple[int, ...], params: tuple, dtype, serial: bool | None,
          target, dtypes=None) -> Spec:
    """A Spec of ``kind`` over row-major operands in main memory."""
    dts = _dtypes(kind, dtype, dtypes)
    reason = check_dtypes(kind, dts)
    if reason:
        hint = ("; mixed dtypes take one per operand: dtypes=(...) or --dtypes, e.g. "
                "f32,bf16,f32" if dtypes is None and kind is PrimKind.MATMUL else "")
        raise SpecError(reason + hint)
    if kind is PrimKind.FILL and not dts[0].is_float and params[0] != 0:
        raise SpecError(f"an integer tensor ({dts[0]}) can only be filled with 0")
    tgt = _target(target)
    reason = kind.info.check_params(len(shape), params)
    if reason:
        raise SpecError(reason)
    limits.check_points(kind.title, shape)
    ops = tuple(fresh(s, dt, Level.GL, layouts.row_major(len(s)))
                for s, dt in zip(operand_shapes(kind, shape, params), dts))
    return Spec(kind, shape, ops, serial is not False, tgt.max_limits(), params,
                serial is not None)


def _target(target, threads: int = 1, calibration: str | None = None) -> Target:
    if isinstance(target, Target):
        return target
    if not isinstance(target, str):
        raise SpecError(f"target must be a target name such as 'avx2' or a Target, got "
                        f"{_short_repr(target)}")
    return parse_target(target, threads, calibration)


def _shape(sizes, names: str = "dim") -> tuple[int, ...]:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if not 1 <= len(sizes) <= 4:
        raise SpecError(f"give 1 to 4 sizes, got {len(sizes)}")
    return tuple(_size(f"{names} {i}", v) for i, v in enumerate(sizes))


def _dim(dim, rank: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise SpecError(f"dim must be an integer, got {dim!r}")
    d = int(dim) + rank if dim < 0 else int(dim)
    if not 0 <= d < rank:
        raise SpecError(f"dim {dim} is out of range for rank {rank}")
    return d


def matmul(m: int, k: int, n: int, *, batch: int = 1, dtype: str | Dtype = "f32",
           dtypes=None, rhs_layout: str = "rm", saturate: bool = False,
           serial: bool | None = None, target: str | Target = "avx2") -> Spec:
    """The Spec of ``out[b] = lhs[b] @ rhs[b]`` with operands in main memory.

    ``lhs`` is ``batch×m×k``, ``rhs`` is ``batch×k×n``, ``out`` is ``batch×m×n``.
    ``dtypes``: one per operand, e.g. ``("f32", "bf16", "f32")`` (bf16 weights) or
    ``("u8", "s8", "s32")``; inputs must widen exactly into the output's dtype (f32 or
    s32). ``rhs_layout="cm"`` stores rhs column-major: the callable takes ``W.T`` of a
    row-major ``W[n×k]`` without a copy (gemma's orientation of a matvec).
    ``saturate=True`` (u8 × s8 → s32 only) is vpmaddubsw's product instead of the exact
    one: the two products of each k-pair (k = 2j, 2j+1) are summed with saturation to
    [-32768, 32767] before the pairs are added in s32. It saturates only where both
    bytes of a pair are large (u8 values below 128 never do), and is faster.
    ``serial``: False lets the search use parallel loops, True forbids them; the default
    (None) is serial, searched parallel by ``synthesize(spec, threads=N)`` with N > 1.
    """
    shape = (_size("batch", batch), _size("m", m), _size("k", k), _size("n", n))
    kind = PrimKind.MATMUL
    if saturate:
        kind = PrimKind.MATMUL_SAT16
        got = _dtypes(kind, dtype, dtypes)
        if got != (Dtype.U8, Dtype.S8, Dtype.S32):
            raise SpecError("saturate=True is vpmaddubsw's u8 x s8 -> s32: give "
                            "dtypes=('u8', 's8', 's32')")
    spec = _spec(kind, shape, (), dtype, serial, target, dtypes)
    if rhs_layout == "cm":
        rhs = spec.operands[1]
        spec = spec.with_operand(1, fresh(rhs.shape, rhs.dtype, rhs.level,
                                          layouts.col_major(len(rhs.shape)))).canonical()
    elif rhs_layout != "rm":
        raise SpecError(f"rhs_layout must be 'rm' (row-major) or 'cm' (column-major), "
                        f"got {_short_repr(rhs_layout)}")
    return spec


def _elementwise(kind: PrimKind):
    title = kind.info.title

    def make(*shape: int, dtype: str | Dtype = "f32", serial: bool | None = None,
             target: str | Target = "avx2") -> Spec:
        return _spec(kind, _shape(shape), (), dtype, serial, target)

    make.__name__ = title.lower()
    make.__doc__ = (f"The Spec of the elementwise ``{kind.info.doc}`` over tensors of "
                    f"``shape`` (1 to 4 sizes), row-major in main memory.")
    return make


add = _elementwise(PrimKind.ADD)
mul = _elementwise(PrimKind.MUL)
relu = _elementwise(PrimKind.RELU)


def transpose(m: int, n: int, *, batch: int = 1, dtype: str | Dtype = "f32",
              serial: bool | None = None, target: str | Target = "avx2") -> Spec:
    """The Spec of ``dst[b] = src[b].T``: ``src`` is ``batch×m×n``, ``dst`` ``batch×n×m``,
    both row-major in main memory."""
    return _spec(PrimKind.TRANSPOSE, (_size("batch", batch), _size("m", m), _size("n", n)),
                 (), dtype, serial, target)


def fill(*shape: int, value: float = 0.0, dtype: str | Dtype = "f32", serial: bool | None = None,
         target: str | Target = "avx2") -> Spec:
    """The Spec of ``dst = value`` (0 or -inf) over a tensor of ``shape``."""
    return _spec(PrimKind.FILL, _shape(shape), (float(value),), dtype, serial, target)


def broadcast(*shape: int, dim: int, dtype: str | Dtype = "f32", serial: bool | None = None,
              target: str | Target = "avx2") -> Spec:
    """The Spec of ``dst = src`` repeated along ``dim``: ``dst`` has ``shape`` and
    ``src`` the same shape with extent 1 at ``dim``."""
    shp = _shape(shape)
    return _spec(PrimKind.BROADCAST, shp, (_dim(dim, len(shp)),), dtype, serial, target)


def _reduction(kind: PrimKind, name: str):
    def make(*shape: int, dim: int, dtype: str | Dtype = "f32", serial: bool | None = None,
             target: str | Target = "avx2") -> Spec:
        shp = _shape(shape)
        return _spec(kind, shp, (_dim(dim, len(shp)),), dtype, serial, target)

    make.__name__ = name
    make.__doc__ = (f"The Spec of ``{kind.info.doc}``: ``src`` has ``shape``, ``dst`` "
                    "the same shape with extent 1 at ``dim`` (numpy's keepdims).")
    return make


reduce_max = _reduction(PrimKind.MAX, "reduce_max")
reduce_sum = _reduction(PrimKind.SUM, "reduce_sum")


def softmax(*shape: int, dim: int = -1, dtype: str | Dtype = "f32", serial: bool | None = None,
            target: str | Target = "avx2") -> Spec:
    """The Spec of ``dst = exp(src - max) / sum(exp(src - max))`` along ``dim`` (the
    last by default) over tensors of ``shape``. -inf inputs give 0; NaN propagates."""
    shp = _shape(shape)
    return _spec(PrimKind.SOFTMAX, shp, (_dim(dim, len(shp)),), dtype, serial, target)

def add_bias(*shape: int, dim: int = -2, dtype: str | Dtype = "f32", serial: bool | None = None,
             target: str | Target = "avx2") -> Spec:
    """The Spec of ``out = lhs + rhs`` where ``rhs`` (the bias) has extent 1 at ``dim``
    and is repeated along it: with the default ``dim=-2`` (rows), one bias per column, as
    after a matmul. ``lhs`` and ``out`` have ``shape``."""
    shp = _shape(shape)
    if len(shp) < 2 and dim == -2:
        raise SpecError("add_bias needs 2 or more dims (or an explicit dim)")
    return _spec(PrimKind.ADD_BROADCAST, shp, (_dim(dim, len(shp)),), dtype, serial, target)


def channel_bias(*shape: int, dim: int = 1, dtype: str | Dtype = "f32",
                 serial: bool | None = None, target: str | Target = "avx2") -> Spec:
    """The Spec of ``out = lhs + rhs`` where ``rhs`` (the bias) is a vector along ``dim``
    (extent 1 in every other dim), repeated over the rest: with the default ``dim=1``, a
    conv's per-channel bias over ``N×C×H×W`` (``rhs`` is ``1×C×1×1``)."""
    shp = _shape(shape)
    return _spec(PrimKind.ADD_CHANNEL, shp, (_dim(dim, len(shp)),), dtype, serial, target)


def channels_last(spec: Spec) -> Spec:
    """``spec`` with its ``N×C×H×W`` operands of the output's shape stored NHWC (a step
    after a channels-last conv: its residual and output as the conv's)."""
    from morello.rewrites.conv import NHWC

    out = spec.output.shape
    for i, t in enumerate(spec.operands):
        if len(t.shape) == 4 and t.shape == out:
            spec = spec.with_operand(i, fresh(t.shape, t.dtype, t.level, NHWC))
    return spec.canonical()


def _lift(spec: Spec, rank: int) -> Spec:
    """``spec`` with leading dims of extent 1 up to ``rank`` (elementwise, reduction and
    softmax kinds, whose operands all have the Spec's rank)."""
    add = rank - len(spec.shape)
    if add <= 0 or spec.kind is PrimKind.MATMUL or not spec.kind.info.ranks[1] >= rank:
        return spec
    params = tuple(p + add for p in spec.params) if spec.kind.info.params == ("dim",) \
        else spec.params
    ones = (1,) * add
    if any(o != fresh(o.shape, o.dtype, o.level, layouts.row_major(len(o.shape)),
                      o.vector_size) for o in spec.operands):
        return spec
    ops = tuple(fresh(ones + o.shape, o.dtype, o.level, layouts.row_major(rank))
                for o in spec.operands)
    return Spec(spec.kind, ones + spec.shape, ops, spec.serial_only, spec.limits, params,
                spec.serial_given)


def chain(*steps: Spec | list[Spec] | tuple[Spec, ...]) -> Spec:
    """The Compose Spec of ``steps`` run in order: each step's first input is the
    previous step's output, whose shape it must have (a step of lower rank, such as
    ``softmax(128, 128)`` after a matmul's ``1×128×128`` output, gets leading dims of
    extent 1). The chain's operands are the steps' other operands, last step first,
    then all inputs of the first step, then the output (see ``morello.compose``)::

        morello.chain(morello.matmul(128, 64, 128), morello.softmax(128, 128),
                      morello.matmul(128, 128, 64))       # softmax(Q @ Kt) @ V
    """
    from morello import compose

    given: tuple = tuple(steps[0]) if len(steps) == 1 and isinstance(steps[0], (list, tuple)) \
        else steps
    bad = next((s for s in given if not isinstance(s, Spec)), None)
    if bad is not None:
        raise SpecError(f"chain takes Specs (from morello.matmul, morello.softmax, ...), "
                        f"got {type(bad).__name__}")
    seq: tuple[Spec, ...] = given
    if not 2 <= len(seq) <= compose.MAX_COMPONENTS:
        raise SpecError(f"a chain has 2..{compose.MAX_COMPONENTS} steps, got {len(seq)}")
    if any(isinstance(s.kind, compose.Chain) for s in seq):
        raise SpecError("a chain step must be a primitive Spec, not a chain")
    rank = max(len(s.output.shape) for s in seq)
    specs = [_lift(seq[0], rank)]
    for prev_i, s in enumerate(seq[1:]):
        prev = specs[prev_i]
        s = _lift(s, rank)
        if s.operands[0].shape != prev.output.shape:
            raise SpecError(
                f"chain step {prev_i + 2} ({s.kind.title}) reads a tensor of shape "
                f"{'×'.join(map(str, s.operands[0].shape))}, but step {prev_i + 1} "
                f"({prev.kind.title}) writes {'×'.join(map(str, prev.output.shape))}")
        specs.append(s)
    for j, s in enumerate(specs):
        if isinstance(s.kind, compose.Chain):
            raise SpecError("a chain step must be a primitive Spec, not a chain")
        why = compose.chain_step_reason(s.kind, innermost=j == 0)
        if why:
            raise SpecError(f"chain: {why}")
    # Chain dims: union the Spec dims each step's input 0 shares with the previous output.
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for j in range(1, len(specs)):
        cur, prev = specs[j], specs[j - 1]
        ins = cur.kind.info.operand_map(len(cur.shape), cur.params)[0]
        outs = prev.kind.info.operand_map(len(prev.shape), prev.params)[-1]
        for (a, ca), (b, cb) in zip(ins, outs):
            # Equal shapes are checked above; a dim of extent 1 on one side only (a
            # reduction's kept dim) links nothing.
            if len(a) == 1 and len(b) == 1 and ca == cb == 0:
                parent[find((j, a[0]))] = find((j - 1, b[0]))
    classes: dict[tuple[int, int], int] = {}
    sizes: list[int] = []
    comps = []
    for j, s in enumerate(specs):
        dims = []
        for d, size in enumerate(s.shape):
            root = find((j, d))
            if root not in classes:
                classes[root] = len(sizes)
                sizes.append(size)
            dims.append(classes[root])
        assert isinstance(s.kind, PrimKind)
        comps.append(compose.Component(s.kind, s.params, tuple(dims)))
    ch = compose.canonical(compose.Chain(tuple(reversed(comps))))
    order = compose.renumbering(compose.Chain(tuple(reversed(comps))))
    shape = tuple(sizes[d] for d in order)
    limits.check_points(ch.title, shape)
    # Operands: each chain operand is an operand of one step (reused as given).
    head_first = list(reversed(specs))
    ops: list[TensorSpec] = []
    last = len(head_first) - 1
    for i, s in enumerate(head_first):
        first = 0 if i == last else 1
        ops.extend(s.operands[first:len(s.operands) - 1])
    ops.append(head_first[0].output)
    lim = specs[-1].limits
    spec = Spec(ch, shape, tuple(ops), all(s.serial_only for s in specs), lim, (),
                any(s.serial_given for s in specs))
    return spec.canonical()


def attention(seq: int, dim: int, *, kv_seq: int | None = None, k_layout: str = "kt",
              dtype: str | Dtype = "f32", serial: bool | None = None,
              target: str | Target = "avx2") -> Spec:
    """The chain ``softmax(Q @ Kt) @ V`` (rows of the scores normalized): ``Q`` is
    ``seq×dim``, ``Kt`` is ``dim×kv_seq`` (K transposed), ``V`` is ``kv_seq×dim``
    (``kv_seq`` defaults to ``seq``). Operands: ``V``, ``Q``, ``Kt``, ``out``.

    ``k_layout="kt"``: ``Kt`` is a row-major ``dim×kv_seq`` array; ``"k"``: ``Kt`` is
    stored column-major, i.e. as K itself (``kv_seq×dim``, row-major) -- pass
    ``K.T`` to the callable, no copy is made."""
    kv = seq if kv_seq is None else kv_seq
    if k_layout not in ("kt", "k"):
        raise SpecError(f"k_layout must be 'kt' or 'k', got {_short_repr(k_layout)}")
    first = matmul(seq, dim, kv, dtype=dtype, serial=serial, target=target)
    if k_layout == "k":
        kt = first.operands[1]
        first = first.with_operand(1, fresh(kt.shape, kt.dtype, kt.level,
                                            layouts.col_major(3))).canonical()
    return chain(first, softmax(seq, kv, dtype=dtype, serial=serial, target=target),
                 matmul(seq, kv, dim, dtype=dtype, serial=serial, target=target))


CONV_LAYOUTS = ("nchw", "nhwc")


def conv_output(h: int, w: int, kh: int, kw: int, stride: int, pad: int) -> tuple[int, int]:
    """The output's height and width of a conv (torch's ``conv2d``), or SpecError."""
    for name, v in (("stride", stride), ("pad", pad)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise SpecError(f"{name} must be an integer, got {_short_repr(v)}")
    if stride < 1:
        raise SpecError(f"stride must be >= 1, got {stride}")
    if pad < 0:
        raise SpecError(f"pad must be >= 0, got {pad}")
    if kh > h + 2 * pad or kw > w + 2 * pad:
        raise SpecError(f"a {kh}x{kw} kernel is larger than the {h + 2 * pad}x{w + 2 * pad} "
                        f"padded input: no output")
    if pad >= max(kh, kw) and pad > 0:
        raise SpecError(f"pad {pad} must be below the kernel size {kh}x{kw} (a window of "
                        "padding only)")
    return (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1


def conv2d(n: int, c: int, h: int, w: int, f: int, kh: int, kw: int, *, stride: int = 1,
           pad: int = 0, groups: int = 1, dtype: str | Dtype = "f32", layout: str = "nchw",
           serial: bool | None = None, target: str | Target = "avx2") -> Spec:
    """The Spec of torch's ``conv2d(x, weight, stride=stride, padding=pad, groups=groups)``
    (no bias): ``x`` is ``n×c×h×w``, ``weight`` is ``f×(c/groups)×kh×kw``, the output
    ``n×f×oh×ow``. ``groups`` is 1 or, for a depthwise conv, ``c`` (with ``f == c``: one
    filter per channel, ``weight`` ``c×1×kh×kw`` in either layout).

    ``layout="nhwc"`` keeps the image and the output channels-last in memory (torch's
    ``channels_last``; the callable takes and returns such arrays without a copy) and the
    weights as ``kh×kw×c×f`` (HWIO); the default is NCHW and OIHW, as torch's defaults.
    ``serial`` as for ``matmul``."""
    n, c, h, w, f, kh, kw = (_size(nm, v) for nm, v in zip(
        ("n", "c", "h", "w", "f", "kh", "kw"), (n, c, h, w, f, kh, kw)))
    oh, ow = conv_output(h, w, kh, kw, stride, pad)
    if layout not in CONV_LAYOUTS:
        raise SpecError(f"layout must be one of {', '.join(CONV_LAYOUTS)}, got "
                        f"{_short_repr(layout)}")
    depthwise = _groups(groups, c, f)
    params = (int(stride), int(pad), (h + 2 * pad - kh) % stride, (w + 2 * pad - kw) % stride)
    if depthwise:
        spec = _spec(PrimKind.DEPTHWISE, (n, c, oh, ow, kh, kw), params, dtype, serial, target)
    else:
        spec = _spec(PrimKind.CONV, (n, f, c, oh, ow, kh, kw), params, dtype, serial, target)
    if layout == "nhwc":
        from morello.rewrites.conv import HWIO, NHWC
        # A depthwise conv's [C, 1, KH, KW] weights are channels-last already.
        relaid = ((0, NHWC), (2, NHWC)) if depthwise else ((0, NHWC), (1, HWIO), (2, NHWC))
        for i, lay in relaid:
            t = spec.operands[i]
            spec = spec.with_operand(i, fresh(t.shape, t.dtype, t.level, lay))
        spec = spec.canonical()
    return spec


def _groups(groups, c: int, f: int) -> bool:
    """Whether a conv of these ``groups`` is depthwise, or SpecError for groups morello
    does not compile."""
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise SpecError(f"groups must be an integer, got {_short_repr(groups)}")
    if groups == 1:
        return False
    if groups != c:
        raise SpecError(f"groups must be 1 or C = {c} (depthwise), got {groups}")
    if f != c:
        raise SpecError(f"a depthwise conv (groups = C) has F = C = {c} filters, got F = {f}")
    return True


BLOCK_STEPS = ("bias", "add", "relu")


def conv_block(n: int, c: int, h: int, w: int, f: int, kh: int, kw: int, *,
               steps: tuple[str, ...] = ("bias", "relu"), stride: int = 1, pad: int = 0,
               groups: int = 1, dtype: str | Dtype = "f32", layout: str = "nchw",
               serial: bool | None = None, target: str | Target = "avx2") -> Spec:
    """The chain of ``conv2d(n, c, h, w, f, kh, kw, ...)`` and then ``steps`` over its
    output: ``"bias"`` (one per output channel, ``1×F×1×1``), ``"add"`` (a residual of the
    output's shape), ``"relu"``. A ResNet block's ``relu(conv(x) + r)`` is
    ``steps=("add", "relu")``. The callable takes the steps' operands last step first,
    then ``x`` and the weights (``morello.compose``): ``fn(bias, x, w)``. With
    ``layout="nhwc"`` the residual and the output are channels-last too; with
    ``groups=c`` the conv is depthwise (a MobileNet block's ``relu(dw(x) + bias)``)."""
    conv = conv2d(n, c, h, w, f, kh, kw, stride=stride, pad=pad, groups=groups, dtype=dtype,
                  layout=layout, serial=serial, target=target)
    if not steps or any(s not in BLOCK_STEPS for s in steps):
        raise SpecError(f"conv_block's steps are some of {', '.join(BLOCK_STEPS)}, got "
                        f"{_short_repr(steps)}")
    shape = conv.output.shape
    make = {"bias": channel_bias, "add": add, "relu": relu}
    after = [make[s](*shape, dtype=dtype, serial=serial, target=target) for s in steps]
    if layout == "nhwc":
        after = [channels_last(s) for s in after]
    return chain(conv, *after)


# The operations of the command line: name -> (kind, constructor).
OPERATIONS = {
    "matmul": (PrimKind.MATMUL, matmul), "add": (PrimKind.ADD, add),
    "mul": (PrimKind.MUL, mul), "relu": (PrimKind.RELU, relu),
    "fill": (PrimKind.FILL, fill), "broadcast": (PrimKind.BROADCAST, broadcast),
    "max": (PrimKind.MAX, reduce_max), "sum": (PrimKind.SUM, reduce_sum),
    "softmax": (PrimKind.SOFTMAX, softmax), "bias": (PrimKind.ADD_BROADCAST, add_bias),
    "channel-bias": (PrimKind.ADD_CHANNEL, channel_bias), "conv": (PrimKind.CONV, conv2d),
    "transpose": (PrimKind.TRANSPOSE, transpose),
}
CONSTRUCTORS = {name: make for name, (_, make) in OPERATIONS.items()}
