"""The embedding API: build a Spec, synthesize it, get C and a callable kernel.

Spec constructors (``matmul``, ``add``, ``mul``, ``relu``, ``fill``, ``broadcast``,
``reduce_max``, ``reduce_sum``) return canonical Specs over row-major operands in main
memory; ``synthesize`` returns a ``Program`` that can be emitted, compiled, verified
against the kind's numpy reference (``morello.kinds``) and timed."""
from __future__ import annotations

import atexit
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from morello import db as dbmod
from morello import layouts, limits
from morello.cost import MAX_COST
from morello.dtypes import Dtype, parse_dtype
from morello.errors import DatabaseError, MorelloError, SpecError
from morello.impl import Impl, reconstruct, replay
from morello.memory import Level, Target, parse_target
from morello.search import Engine, SearchStats
from morello.specs import PrimKind, Spec, check_dtypes, operand_shapes
from morello.tensorspec import TensorSpec, fresh
from morello.verify import compare


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
    for s in specs:
        if isinstance(s.kind, compose.Chain):
            raise SpecError("a chain step must be a primitive Spec, not a chain")
        why = compose.chain_step_reason(s.kind)
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
           pad: int = 0, dtype: str | Dtype = "f32", layout: str = "nchw",
           serial: bool | None = None, target: str | Target = "avx2") -> Spec:
    """The Spec of torch's ``conv2d(x, weight, stride=stride, padding=pad)`` (no bias):
    ``x`` is ``n×c×h×w``, ``weight`` is ``f×c×kh×kw``, the output ``n×f×oh×ow``.

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
    params = (int(stride), int(pad), (h + 2 * pad - kh) % stride, (w + 2 * pad - kw) % stride)
    spec = _spec(PrimKind.CONV, (n, f, c, oh, ow, kh, kw), params, dtype, serial, target)
    if layout == "nhwc":
        from morello.rewrites.conv import HWIO, NHWC
        for i, lay in ((0, NHWC), (1, HWIO), (2, NHWC)):
            t = spec.operands[i]
            spec = spec.with_operand(i, fresh(t.shape, t.dtype, t.level, lay))
        spec = spec.canonical()
    return spec


# The operations of the command line: name -> (kind, constructor).
OPERATIONS = {
    "matmul": (PrimKind.MATMUL, matmul), "add": (PrimKind.ADD, add),
    "mul": (PrimKind.MUL, mul), "relu": (PrimKind.RELU, relu),
    "fill": (PrimKind.FILL, fill), "broadcast": (PrimKind.BROADCAST, broadcast),
    "max": (PrimKind.MAX, reduce_max), "sum": (PrimKind.SUM, reduce_sum),
    "softmax": (PrimKind.SOFTMAX, softmax), "bias": (PrimKind.ADD_BROADCAST, add_bias),
    "conv": (PrimKind.CONV, conv2d),
}
CONSTRUCTORS = {name: make for name, (_, make) in OPERATIONS.items()}


class DatabaseWarning(UserWarning):
    """A database can be read but not written: new results stay in this process."""


# A session's Engine is dropped after a save once it holds this many logical Specs: the
# store keeps every result, so a long-lived process does not grow without bound.
ENGINE_MAX_SPECS = 2_000_000


class _Session:
    """One (target, database) in this process: its store, and its Engine once needed.

    Calls are serialized by ``lock`` (the Engine and the store's connection are not
    thread-safe), so threads may share a session."""

    def __init__(self, target: Target, db_path: Path | None) -> None:
        self.target = target
        self.db_path = db_path
        self.lock = threading.RLock()
        self.store = dbmod.Store(db_path, target) if db_path is not None else None
        self.roots: dict[str, tuple[list, int]] = {}  # not yet saved
        self._engine: Engine | None = None
        if self.store is not None and not self.store.writable:
            warnings.warn(f"database {db_path} is read-only: it answers what it holds, "
                          "and new results are kept in this process only",
                          DatabaseWarning, stacklevel=4)
        # The shipped database answers what the user's does not (read-only, under it).
        self.base = None
        shipped = dbmod.shipped_path() if db_path is not None else None
        if shipped is not None and shipped.resolve() != db_path.resolve():  # type: ignore[union-attr]
            try:
                self.base = dbmod.Store(shipped, target, readonly=True)
            except DatabaseError as e:
                warnings.warn(f"the shipped database is unusable, ignored: {e}",
                              DatabaseWarning, stacklevel=4)

    def root(self, text: str) -> tuple[list, int] | None:
        found = self.roots.get(text)
        for store in (self.store, self.base):
            if found is None and store is not None:
                found = store.root(text)
        return found

    def engine(self, progress) -> Engine:
        if self._engine is None:
            self._engine = Engine(self.target, store=self.store, base=self.base)
        self._engine.progress = progress
        return self._engine

    def drop_engine(self) -> None:
        """Forget the Engine (after an error inside it, or when it has grown large)."""
        self._engine = None

    def save(self, stats: dict | None = None) -> int:
        """Write what the Engine found (and the new roots) to the store; the pages
        written. Without a writable store, results stay in the Engine's working memo."""
        if self.store is None or not self.store.writable:
            return 0
        eng = self._engine
        try:
            if eng is None:
                written = self.store.save(None, [], self.roots, stats)
            else:
                written = self.store.save(eng.pages, eng.table_keys, self.roots, stats,
                                          eng.store_ids, eng.persist)
        except BaseException:
            self.drop_engine()  # its pages may claim versions the file does not hold
            raise
        if eng is not None and eng.graph.n_ids > ENGINE_MAX_SPECS:
            self.drop_engine()
        self.roots.clear()
        return written


_SESSIONS: dict[tuple[str, str | None], _Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(target: Target, db_path: Path | None) -> _Session:
    key = (target.db_key, None if db_path is None else str(db_path.absolute()))
    with _SESSIONS_LOCK:
        if key not in _SESSIONS:
            _SESSIONS[key] = _Session(target, db_path)
        return _SESSIONS[key]


@atexit.register
def close_sessions() -> None:
    """Close every open database of this process (later calls open them again)."""
    with _SESSIONS_LOCK:
        for sess in _SESSIONS.values():
            for store in (sess.store, sess.base):
                if store is not None:
                    store.close()
        _SESSIONS.clear()


def _replay_root(sess: _Session, spec: Spec) -> Impl | None:
    """The stored optimum of a Spec asked for before, if its trace still replays to it."""
    root = sess.root(str(spec))
    if root is None:
        return None
    trace, cost = root
    try:
        impl = replay(spec, sess.target, trace)
    except (MorelloError, IndexError, StopIteration, TypeError, KeyError):
        return None
    return impl if impl.cost.main == cost else None


@dataclass
class Program:
    """A synthesized program: the Spec, its optimal Impl, cost and C source."""

    spec: Spec
    target: Target
    impl: Impl
    stats: SearchStats
    synthesis_seconds: float
    _c: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (f"<Program {self.spec.logical_str()} on {self.target.name}: cost "
                f"{self.cost}, {sum(1 for _ in self.impl.walk())} Impl nodes>")

    @property
    def cost(self) -> int:
        return self.impl.cost.main

    def operand_bytes(self) -> int:
        """Bytes of the Spec's operands (what a caller allocates)."""
        return sum(o.bytes for o in self.spec.operands)

    def buffer_bytes(self) -> int:
        """Bytes of the heap buffers the program allocates, summed over every buffer
        of the tree (an upper bound of what is live at once)."""
        total = 0
        for node in self.impl.walk():
            applied = node.action.apply(node.spec, self.target)
            allocs = getattr(applied, "allocs", None) or (
                getattr(applied, "alloc", None), getattr(applied, "alloc2", None))
            for alloc in allocs:
                if alloc is not None and not alloc.level.counts_registers:
                    total += alloc.bytes
        return total

    def too_large_to_run(self) -> str | None:
        """Why this program cannot run on this machine (its operands, a numpy
        reference and its buffers do not fit in available memory), or None."""
        return limits.too_large_to_run(self.memory_to_run())

    def memory_to_run(self) -> int:
        """Bytes that running and verifying it needs: the operands, a numpy reference
        of the output, random inputs drawn in float64, and the program's buffers."""
        return self.operand_bytes() * 3 + self.buffer_bytes()

    @property
    def c_source(self) -> str:
        if self._c is None:
            from morello.codegen import emit_c

            self._c = emit_c(self.impl, self.target, threads=self.target.processors)
        return self._c

    def compile(self):
        """Build the C with the host compiler; return a callable ``fn(*inputs, out=None)``
        (inputs in operand order, e.g. ``fn(lhs, rhs)`` for a matmul)."""
        from morello.codegen import CompiledProgram, compile_c
        from morello.targets import host_lacks

        reason = host_lacks(self.target)
        if reason:
            raise MorelloError(reason)
        src = self.c_source
        path = compile_c(src, self.target.cflags, openmp="#pragma omp" in src)
        ops = self.spec.operands
        if self.spec.kind.info.output != len(ops) - 1:
            raise MorelloError(f"{self.spec.kind.title}: only programs whose output is "
                               "the last operand can be called")
        return CompiledProgram(path, [o.shape for o in ops], [o.dtype.np for o in ops],
                               len(ops) - 1, self.spec.kind.info.operands,
                               [_memory_order(o, self.spec) for o in ops])

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs, one per operand before the output (``random_array``)."""
        limits.check_runnable(self.memory_to_run(), self.spec.logical_str())
        rng = np.random.default_rng(seed)
        return [random_array(rng, o.shape, o.dtype) for o in self.spec.operands[:-1]]

    def reference(self, *inputs) -> np.ndarray:
        """What the program computes, by numpy (the kind's reference)."""
        out = self.spec.output
        return self.spec.kind.info.reference(self.spec.params, list(inputs),
                                               np.zeros(out.shape, out.dtype.np))

    def verify(self, fn=None, seed: int = 0) -> tuple[bool, float]:
        """Run the compiled program (``fn``, or a fresh ``compile()``) on random inputs
        and compare with ``reference``. Returns (matches, max abs error)."""
        fn = self.compile() if fn is None else fn
        ins = self.random_inputs(seed)
        out = fn(*ins)
        return compare(self.spec, out, self.reference(*ins))


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: Dtype) -> np.ndarray:
    """Floats uniform in [-1, 1) (rounded to bf16 for bf16); integers uniform over the
    whole range of an 8-bit dtype, and over [-256, 256) for s16 and s32 (so that a matmul's
    int32 sums cannot overflow below k = 2^15)."""
    if dtype.is_float:
        return rng.uniform(-1, 1, size=shape).astype(np.float32).astype(dtype.np)
    info = np.iinfo(dtype.np)
    lo, hi = (info.min, info.max + 1) if dtype.size == 1 else (-256, 256)
    return rng.integers(lo, hi, size=shape).astype(dtype.np)


def _memory_order(t, spec: Spec) -> tuple[int, ...] | None:
    """The order of ``t``'s dims in memory for the callable: None for row-major, the
    permutation for another order of unpacked dims (column-major)."""
    if not t.level.has_layout:
        return None
    if t.layout == fresh(t.shape, t.dtype, t.level, layouts.row_major(len(t.shape))).layout:
        return None
    dims = t.layout.dims
    if not t.contiguous or any(d.pack is not None for d in dims) \
            or sorted(d.dim for d in dims) != [d for d in range(len(t.shape)) if t.shape[d] > 1]:
        raise MorelloError(f"{spec.logical_str()}: only row- and column-major operands can "
                           "be called")
    order = [d.dim for d in dims]
    ones = [d for d in range(len(t.shape)) if t.shape[d] == 1]
    full = sorted(ones + order, key=lambda d: (d not in ones, order.index(d)
                                               if d in order else d))
    return tuple(full)


def problem_target(tgt: Target, spec: Spec) -> Target:
    """The variant of ``tgt`` that prices ``spec``'s main memory where it lives: within
    the last-level cache ``Target.in_llc``; beyond it, for a memory-bound kind,
    ``Target.in_dram``; else ``tgt``."""
    if not tgt.streams_from_dram(spec):
        return tgt.in_llc()
    if spec.kind.info.staging == "views":
        # Memory-bound kinds only: a matmul's programs changed under the write-back
        # pricing to no gain (docs/model-notes.md).
        return tgt.in_dram()
    return tgt


def synthesize(spec: Spec, target: str | Target = "avx2", *, db=None,
               progress=None, threads: int = 1, calibration: str | None = None) -> Program:
    """Find the cheapest Impl of ``spec``.

    ``db``: None uses the default database (``$XDG_CACHE_HOME/morello/results-v12.sqlite``),
    a path uses that file (read-only files answer what they hold, with a
    ``DatabaseWarning``), False keeps results in memory only. ``progress(seen, solved, seconds)``
    is called about twice a second during long searches, and ``progress.saving(path)``, if
    the callback has it, before the database is written. ``threads``: processors the cost
    model assumes for parallel loops and OpenMP threads; with more than one, a Spec
    made serial by a constructor's default is searched parallel (``Spec.for_threads``),
    one made with ``serial=True`` stays serial.
    ``calibration``: the cost constants, ``"builtin"`` or a calibration file (default: see
    ``morello.memory.parse_target``). A Spec whose main-memory operands fit the
    last-level cache is searched for the target's LLC variant (``Target.in_llc``: runs of
    main memory start from L3); a memory-bound one (softmax, elementwise, ...) whose
    operands exceed it, for its DRAM variant (``Target.in_dram``): outputs written there
    cost their write-back, and may be stored past the caches (``problem_target``).
    """
    if not isinstance(spec, Spec):
        raise SpecError(f"synthesize takes a Spec (from morello.matmul, morello.add, ...), "
                        f"got {type(spec).__name__}")
    limits.check_threads(threads)
    if calibration is not None and not isinstance(calibration, str):
        raise SpecError(f"calibration must be 'builtin' or a file path (str), got "
                        f"{_short_repr(calibration)}")
    if progress is not None and not callable(progress):
        raise SpecError(f"progress must be callable, got {_short_repr(progress)}")
    tgt = problem_target(_target(target, threads, calibration), spec)
    limits.check_points(spec.kind.title, spec.shape)
    db_path = dbmod.resolve(db)
    spec = spec.for_threads(threads).canonical()
    t0 = time.perf_counter()
    sess = _session(tgt, db_path)
    with sess.lock:
        impl = _replay_root(sess, spec)
        if impl is not None:
            return Program(spec, tgt, impl, SearchStats(), time.perf_counter() - t0)
        eng = sess.engine(progress)
        before = (eng.solver.table_hits, eng.pages.stats())
        try:
            sol, stats = eng.solve(spec)
        except KeyboardInterrupt:
            # Every result stored so far is complete: keep them for the next run.
            sess.save()
            sess.drop_engine()
            raise
        except BaseException:
            sess.drop_engine()  # its state is not to be trusted after an error
            raise
        if sol is None:
            if sess.store is not None and Engine(tgt).solve(spec)[0] is not None:
                sess.drop_engine()
                raise _corrupt(db_path, spec, "they claim it has no implementation")
            raise SpecError(f"no implementation of {spec} fits the memory limits")
        try:
            impl = reconstruct(spec, tgt, eng.lookup)
        except (MorelloError, KeyError) as e:
            if sess.store is None:
                raise
            sess.drop_engine()
            reason = f"a sub-Spec has no result: {e}" if isinstance(e, KeyError) else str(e)
            raise _corrupt(db_path, spec, reason[:300]) from None
        if impl.cost.main >= MAX_COST:
            raise SpecError(f"the cost of {spec.logical_str()} overflows the cost model "
                            "(saturated at 2^62): refused")
        if impl.cost.main != sol.cost.main:
            sess.drop_engine()
            raise _corrupt(db_path, spec, "the program they give does not cost what they "
                           "claim")
        seconds = time.perf_counter() - t0
        sess.roots[str(spec)] = (impl.trace(), impl.cost.main)
        if sess.store is not None:
            saving = getattr(progress, "saving", None)
            if saving is not None and stats.specs_solved and sess.store.writable:
                saving(db_path)
            sess.save(_search_stats(stats, eng, before))
        return Program(spec, tgt, impl, stats, seconds)


def _corrupt(db_path, spec: Spec, reason: str) -> DatabaseError:
    return DatabaseError(f"the stored results of {db_path} do not rebuild a program for "
                         f"{spec.logical_str()} ({reason}); the database is corrupt: delete "
                         "it or pass another --db")


def _search_stats(stats: SearchStats, eng: Engine, before: tuple[int, dict]) -> dict:
    """What ``morello db stats`` reports of the last search: (Spec, limits) pairs solved
    and answered by the database, and how its pages were found."""
    hits0, pages0 = before
    pages = eng.pages.stats()
    d = {k: pages[k] - pages0[k] for k in ("hits", "loads", "evictions", "absent")}
    answered = eng.solver.table_hits - hits0
    asked = answered + stats.specs_solved
    return {"specs_solved": stats.specs_solved, "seconds": round(stats.seconds, 3),
            "answered_by_database": answered,
            "database_hit_rate": round(answered / asked, 4) if asked else 0.0,
            "page_cache_hit_rate": round(d["hits"] / (d["hits"] + d["loads"]), 4)
            if d["hits"] + d["loads"] else 0.0,
            **{f"page_{k}": v for k, v in d.items()}}
