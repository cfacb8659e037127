"""What the hardening tests share: misuse cases of a compiled callable, the outcome
rules every probe asserts, and counters of how many tries each probe made.

A misuse *case* calls a compiled program ``fn`` in a possibly wrong way and returns
either an output and the numpy reference it must equal, or raises. The rule
(``check_outcome``): a call either raises one of the documented exceptions with a
one-line message, or returns a result that matches numpy. Never a silently wrong result,
never another exception.

``TRIES`` counts, per probe name, the inputs tried in this process; ``conftest.py``
prints them at the end of a run (the closing notes' tables come from there).
"""
from __future__ import annotations

import array
import collections
import contextlib
import io
import signal

import numpy as np

from morello.errors import MorelloError
from morello.verify import compare

TRIES: collections.Counter[str] = collections.Counter()
FAILURES: collections.Counter[str] = collections.Counter()

# What misuse may raise: ValueError, MorelloError (SpecError is both; DatabaseError for a
# bad db=), or Python's own TypeError for a call of the wrong form (a missing or unknown
# keyword).
ALLOWED = (ValueError, TypeError, MorelloError)


class Hang(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: int):
    """Raise Hang in the main thread after ``seconds``."""
    def fire(signum, frame):
        raise Hang(f"no answer after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv: list[str], seconds: int = 600) -> tuple[int, str, str]:
    """``morello ARGV`` in this process: (exit status, stdout, stderr); Hang after
    ``seconds``."""
    from morello import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with deadline(seconds):
                code = cli.main(list(argv))
        except SystemExit as e:  # argparse: --help, --version, usage errors
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


class Wrapped:
    """An array-like from 'another library': only ``__array__``."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)


def _fortran(a):
    return np.asfortranarray(a)


def _strided(a):
    big = np.zeros(tuple(2 * s for s in a.shape), a.dtype)
    view = big[tuple(slice(None, None, 2) for _ in a.shape)]
    view[...] = a
    return view


def _misaligned(a):
    buf = np.zeros(a.nbytes + 1, np.uint8)
    view = np.frombuffer(buf.data, a.dtype, a.size, offset=1).reshape(a.shape)
    view[...] = a
    return view


def _membuf(a):
    return memoryview(np.ascontiguousarray(a))


def _pyarray(a):
    if a.dtype != np.float32 or a.ndim != 1:
        return np.ascontiguousarray(a)  # array.array is 1-D only
    return array.array("f", a.tolist())


# Inputs transformed in ways that must still give the right answer.
GOOD_INPUTS = {
    "fortran order": _fortran, "strided view": _strided, "misaligned buffer": _misaligned,
    "memoryview": _membuf, "array.array": _pyarray, "__array__ object": Wrapped,
    "read-only": lambda a: _readonly(a.copy()),
}


def _readonly(a):
    a.flags.writeable = False
    return a


# Inputs that must be refused.
BAD_INPUTS = {
    "float64": lambda a: a.astype(np.float64), "int32": lambda a: a.astype(np.int32),
    "float16": lambda a: a.astype(np.float16), "big-endian": lambda a: a.astype(">f4"),
    "list": lambda a: a.tolist(), "None": lambda a: None, "scalar": lambda a: 1.5,
    "0-d": lambda a: np.float32(1.0), "extra dim": lambda a: a[None, None],
    "one more element": lambda a: np.zeros(a.size + 1, a.dtype),
    "transposed shape": lambda a: np.zeros(a.shape[::-1] + (2,), a.dtype),
    "string": lambda a: "abc", "object array": lambda a: a.astype(object),
}


def cases(prog, fn, seed: int = 0):
    """(name, thunk) pairs: every misuse of ``fn`` a caller could make. A thunk returns
    (output, reference) or raises."""
    ins = prog.random_inputs(seed)
    ref = prog.reference(*ins)
    n = len(ins)
    oshape = prog.spec.output.shape
    odt = prog.spec.output.dtype.np
    out_cases = []

    def call(args, **kw):
        return lambda: (fn(*args, **kw), ref)

    out_cases.append(("right arguments", call(ins)))
    out_cases.append(("out given", call(ins, out=np.full(oshape, np.nan, odt))))
    for i in range(n):
        for name, f in GOOD_INPUTS.items():
            args = list(ins)
            args[i] = f(ins[i])
            out_cases.append((f"input {i} {name}", call(args)))
        for name, f in BAD_INPUTS.items():
            args = list(ins)
            args[i] = f(ins[i])
            out_cases.append((f"input {i} {name}", call(args)))
    out_cases.append(("one input too many", call([*ins, ins[0] if ins else np.zeros(1)])))
    if n:
        out_cases.append(("one input too few", call(ins[:-1])))
    for name, o in {
        "out float64": np.zeros(oshape, np.float64),
        "out wrong shape": np.zeros(tuple(s + 1 for s in oshape), odt),
        "out list": np.zeros(oshape, odt).tolist(),
        "out Fortran order": np.asfortranarray(np.zeros(oshape + (2,), odt))[..., 0],
        "out read-only": _readonly(np.zeros(oshape, odt)),
        "out strided": _strided(np.zeros(oshape, odt)),
        "out misaligned": _misaligned(np.zeros(oshape, odt)),
        "out scalar": 0.0,
    }.items():
        out_cases.append((name, call(ins, out=o)))
    for i in range(n):
        out_cases.append((f"out overlaps input {i}", _overlap(fn, prog, ins, i)))
        if ins[i].shape == oshape and ins[i].dtype == odt:
            out_cases.append((f"out is input {i}", _same(fn, prog, ins, i)))
    for iters in (0, -1, 1.5, True, None, 10**9):
        out_cases.append((f"time(iters={iters!r})",
                          lambda iters=iters: (fn.time(*ins, iters=iters), None)))
    return out_cases


def _same(fn, prog, ins, i):
    def thunk():
        args = [a.copy() for a in ins]
        ref = prog.reference(*args)
        return fn(*args, out=args[i]), ref
    return thunk


def _overlap(fn, prog, ins, i):
    """``out`` and input ``i`` are views of one buffer that partly overlap."""
    def thunk():
        a = ins[i]
        oshape = prog.spec.output.shape
        osize = int(np.prod(oshape))
        start = max(1, a.size // 2)
        buf = np.zeros(max(a.size, start + osize), a.dtype)
        buf[:a.size] = a.ravel()
        args = list(ins)
        args[i] = buf[:a.size].reshape(a.shape)
        ref = prog.reference(*[x.copy() for x in args])
        out = buf[start:start + osize].reshape(oshape)
        return fn(*args, out=out), ref
    return thunk


def check_outcome(prog, thunk) -> str:
    """Run a case; 'ok' (matched numpy), 'refused' (a documented one-line error) or
    'timed' (a time() call returned a positive number). Raises AssertionError on a wrong
    result, an undocumented exception or a message of more than one line."""
    try:
        out, ref = thunk()
    except ALLOWED as e:
        msg = str(e)
        assert msg and "\n" not in msg and len(msg) < 400, f"{type(e).__name__}: {msg!r}"
        return "refused"
    if ref is None:
        assert isinstance(out, float) and out > 0, out
        return "timed"
    ok, err = compare(prog.spec, out, ref)
    assert ok, f"silently wrong result: max abs error {err}"
    return "ok"


# The random-Spec sweep: user-level Specs of every kind, shapes 1 to 200 (odd sizes
# included), batches, every supported dtype, some with parallel loops.
SWEEP_MAX_POINTS = 1 << 22  # keeps one run of the sweep within minutes


MATMUL_DTYPES = [("f32", "f32", "f32"), ("f32", "bf16", "f32"), ("bf16", "bf16", "f32"),
                 ("u8", "s8", "s32"), ("s8", "s8", "s32"), ("u8", "u8", "s32"),
                 ("s16", "s8", "s32"), ("s32", "s32", "s32")]


def random_user_spec(rng: np.random.Generator):
    """(Spec, threads) drawn at random over every kind the API constructs."""
    from morello.api import OPERATIONS
    from morello.dtypes import SUPPORTED

    op = str(rng.choice(sorted(OPERATIONS)))
    make = OPERATIONS[op][1]
    if op == "conv":
        return random_conv(rng, serial=rng.random() >= 0.2, block=rng.random() < 0.3)
    parallel = rng.random() < 0.2
    kw: dict = {"serial": not parallel}
    if op == "matmul":  # every mix of dtypes a matmul takes, f32 most often
        kw["dtypes"] = MATMUL_DTYPES[int(rng.choice([0, 0, 0, rng.integers(len(MATMUL_DTYPES))]))]
    elif op == "fill":  # any dtype (integers are filled with 0)
        kw["dtype"] = SUPPORTED[int(rng.integers(len(SUPPORTED)))]
    else:
        kw["dtype"] = "f32"

    def size() -> int:  # small sizes and odd ones more often than a uniform draw
        return int(rng.choice([rng.integers(1, 9), rng.integers(1, 65), rng.integers(1, 201)]))

    while True:
        if op == "matmul":
            shape = [size() for _ in range(3)]
            batch = int(rng.choice([1, 1, 1, rng.integers(1, 5)]))
            points = batch * shape[0] * shape[1] * shape[2]
            if points <= SWEEP_MAX_POINTS:
                return make(*shape, batch=batch, **kw), 2 if parallel else 1
            continue
        rank = 2 if op == "transpose" else int(rng.integers(1, 5))
        shape = [size() for _ in range(rank)]
        if int(np.prod(shape)) > SWEEP_MAX_POINTS:
            continue
        if op == "transpose":
            kw["batch"] = int(rng.choice([1, 1, rng.integers(1, 4)]))
        if op in ("max", "sum", "broadcast", "bias", "channel-bias"):  # any dim: rank 1 too
            kw["dim"] = int(rng.integers(rank))
        if op == "fill":
            kw["value"] = float(rng.choice([0.0, -np.inf])) if kw["dtype"].is_float else 0.0
        return make(*shape, **kw), 2 if parallel else 1


BLOCKS = (("bias",), ("relu",), ("bias", "relu"), ("add", "relu"), ("add",))


def random_conv(rng: np.random.Generator, serial: bool = True, block: bool = False):
    """(Spec, threads): a conv of small odd sizes, any kernel, stride and padding that
    leave an output, either layout, a quarter of them depthwise; with ``block``, a chain
    of it and later steps (``morello.conv_block``)."""
    from morello.api import conv2d, conv_block
    from morello.errors import SpecError

    while True:
        n, c, f = (int(rng.choice([1, 1, 2])), int(rng.integers(1, 17)),
                   int(rng.integers(1, 25)))
        h, w = (int(rng.integers(1, 25)) for _ in range(2))
        kh, kw = (int(rng.choice([1, 1, 3, 3, rng.integers(1, 8)])) for _ in range(2))
        stride = int(rng.choice([1, 1, 2, rng.integers(1, 4)]))
        pad = int(rng.integers(0, max(kh, kw)))
        layout = str(rng.choice(["nchw", "nhwc"]))
        groups = 1
        if c > 1 and rng.random() < 0.25:  # depthwise: one filter per channel
            groups, f = c, c
        try:
            if block:
                steps = BLOCKS[int(rng.integers(len(BLOCKS)))]
                spec = conv_block(n, c, h, w, f, kh, kw, steps=steps, stride=stride, pad=pad,
                                  groups=groups, serial=serial, layout=layout)
            else:
                spec = conv2d(n, c, h, w, f, kh, kw, stride=stride, pad=pad, groups=groups,
                              serial=serial, layout=layout)
        except SpecError:
            continue
        return spec, 1 if serial else 2


def sweep_one(spec, threads: int, db, seed: int = 0,
              target: str = "avx2") -> tuple[bool, float]:
    """Synthesize ``spec`` for ``target`` into ``db``, build, run it on random inputs,
    compare with numpy: (matches, max abs error)."""
    import morello

    prog = morello.synthesize(spec, target, db=db, threads=threads)
    return prog.verify(seed=seed)
