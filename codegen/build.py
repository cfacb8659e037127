"""Build emitted C into a shared library with the host compiler and call it via ctypes."""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from morello.dtypes import Dtype, accepts
from morello.errors import BuildError

CFLAGS = ("-O3", "-std=gnu11", "-fPIC", "-shared")


def find_compiler() -> str:
    cc = os.environ.get("CC", "cc")
    path = shutil.which(cc)
    if path is None:
        raise BuildError(f"no C compiler found (looked for {cc!r}; set CC or install gcc)")
    return path


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = Path(base) / "morello" / "build"
    try:
        d.mkdir(parents=True, exist_ok=True)
        return d
    except OSError:
        return Path(tempfile.mkdtemp(prefix="morello-build-"))


def extra_flags() -> list[str]:
    """``$MORELLO_CFLAGS``, split on spaces: flags added after morello's own (e.g.
    ``-funroll-loops``, or ``-O2`` to override ``-O3``), for measuring compilers and flags
    on the same emitted C."""
    return os.environ.get("MORELLO_CFLAGS", "").split()


def compile_c(source: str, target_flags: tuple[str, ...], openmp: bool = False) -> Path:
    """Compile ``source`` to a shared library (cached by content, compiler and flags);
    return its path. ``$CC`` chooses the compiler, ``$MORELLO_CFLAGS`` adds flags."""
    cc = find_compiler()
    flags = (list(CFLAGS) + list(target_flags) + (["-fopenmp"] if openmp else [])
             + extra_flags())
    key = hashlib.sha256((source + " ".join(flags) + cc).encode()).hexdigest()[:20]
    d = cache_dir()
    so = d / f"k{key}.so"
    if so.exists():
        return so
    src = d / f"k{key}.c"
    src.write_text(source)
    tmp = d / f"k{key}.{os.getpid()}.so"
    proc = subprocess.run([cc, *flags, "-o", str(tmp), str(src)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        hint = ""
        if openmp and "omp.h" in proc.stderr:
            # clang finds OpenMP's header only with its runtime installed.
            hint = ("\n(parallel kernels need OpenMP: with clang, install its runtime, "
                    "e.g. libomp-dev, or build with gcc: CC=gcc)")
        raise BuildError(f"C compiler failed ({cc}):\n{proc.stderr.strip()[:4000]}{hint}")
    os.replace(tmp, so)
    return so


# A cache line: outputs the callable allocates start on one (numpy's start 16 bytes
# off a line as often as not, and a vector row then straddles two lines on every load
# or store: a channels-last depthwise conv ran 1.5x slower so).
LINE_BYTES = 64


def empty_aligned(shape: tuple[int, ...], dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` whose data starts on a cache line."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.empty(n + LINE_BYTES, np.uint8)
    start = -raw.ctypes.data % LINE_BYTES
    return raw[start:start + n].view(dt).reshape(shape)


class CompiledProgram:
    """A loaded program: ``fn(*inputs, out=None)`` runs it on arrays.

    Inputs are numpy arrays, or anything ``numpy.asarray`` takes without copying
    element types (objects with ``__array__`` or the buffer protocol), of exactly the
    operand's dtype (no silent conversion) and shape (a leading batch of 1 may be left
    out). Inputs that are not C-contiguous and aligned (Fortran order, strided views,
    offset buffers) are copied first; so is an input that overlaps ``out``, so
    ``fn(x, y, out=x)`` is correct. ``out``, if given, must be a writeable,
    C-contiguous, aligned numpy array of the output's dtype and shape. Misuse raises
    ``ValueError`` with one line; ``MemoryError`` if the kernel cannot allocate."""

    def __init__(self, path: Path, operand_shapes, dtypes, n_inputs: int,
                 names: tuple[str, ...] | None = None, orders=None) -> None:
        self.path = path
        # Per operand (the output last, if given), the order of its dims in memory (None:
        # row-major): such an operand is passed as the array of its transpose
        # (``a.transpose(order)``); such an output is returned as a view in logical order.
        self.orders = list(orders) if orders else [None] * n_inputs
        self.out_order = self.orders[n_inputs] if len(self.orders) > n_inputs else None
        self.lib = ctypes.CDLL(str(path))
        self.shapes = [tuple(s) for s in operand_shapes]
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.n_inputs = n_inputs
        self.names = tuple(names) if names else tuple(f"operand {i}"
                                                      for i in range(len(self.shapes)))
        ptr = ctypes.c_void_p
        self._kernel = self.lib.kernel
        self._kernel.argtypes = [ptr] * len(self.shapes)
        self._kernel.restype = ctypes.c_int
        self._bench = self.lib.bench
        self._bench.argtypes = [ptr] * len(self.shapes) + [ctypes.c_long]
        self._bench.restype = ctypes.c_double

    def _array(self, i: int, a) -> np.ndarray:
        if isinstance(a, np.ndarray):
            return a
        if hasattr(a, "__array__") or _has_buffer(a):
            try:
                return np.asarray(a)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{self.names[i]}: cannot view {type(a).__name__} as an "
                                f"array ({str(e)[:100]})") from None
        raise ValueError(f"{self.names[i]} must be an array (numpy, or anything with "
                        f"__array__ or the buffer protocol), got {type(a).__name__}")

    def _check(self, i: int, a: np.ndarray) -> None:
        want = self.dtypes[i]
        if not accepts(want, a.dtype):
            order = " (byte-swapped)" if a.dtype.newbyteorder() == want else ""
            mod = "ml_dtypes" if want == Dtype.BF16.np else "numpy"
            also = " or its uint16 view" if want == Dtype.BF16.np else ""
            raise ValueError(f"{self.names[i]} has dtype {a.dtype}{order}, expected {want}"
                             f"{also} (convert with .astype({mod}.{want}))")
        shape = self.shapes[i]
        if not (a.shape == shape or (len(shape) > 1 and shape[0] == 1
                                     and a.shape == shape[1:])):
            raise ValueError(f"{self.names[i]} has shape {a.shape}, expected {shape}"
                             + (f" or {shape[1:]}" if len(shape) > 1 and shape[0] == 1
                                else ""))

    def _args(self, inputs, out):
        if len(inputs) != self.n_inputs:
            raise ValueError(f"expected {self.n_inputs} inputs, got {len(inputs)}")
        arrs = []
        for i, a in enumerate(inputs):
            a = self._array(i, a)
            self._check(i, a)
            arrs.append(a)
        oshape = self.shapes[-1]
        o = len(self.shapes) - 1
        order = self.out_order
        if out is None:
            squeeze = (arrs[0].ndim == len(oshape) - 1) if arrs else False
            shape = oshape[1:] if squeeze else oshape
            if order is None:
                out = empty_aligned(shape, self.dtypes[-1])
            else:
                order = _drop_batch(order) if squeeze else order
                out = empty_aligned(tuple(shape[d] for d in order),
                                    self.dtypes[-1]).transpose(np.argsort(order))
        else:
            if not isinstance(out, np.ndarray):
                raise ValueError(f"out must be a numpy array, got {type(out).__name__}")
            self._check(o, out)
            mem = out
            if order is not None:
                mem = out.transpose(_drop_batch(order) if out.ndim < len(order) else order)
            if not (mem.flags.c_contiguous and mem.flags.aligned):
                raise ValueError("out must be C-contiguous and aligned" if order is None else
                                 f"out must be contiguous and aligned in the order {order}"
                                 " of its dims (channels-last)")
            if not out.flags.writeable:
                raise ValueError("out must be writeable")
        # The kernel reads inputs while it writes out: an overlapping input is copied
        # first. So is one that is not C-contiguous and aligned.
        for i, a in enumerate(arrs):
            order = self.orders[i] if i < len(self.orders) else None
            if order is not None:
                if a.ndim < len(order):  # the batch of 1 left out
                    order = _drop_batch(order)
                a = arrs[i] = a.transpose(order)
            if not (a.flags.c_contiguous and a.flags.aligned) \
                    or np.may_share_memory(a, out):
                arrs[i] = np.array(a, order="C", copy=True)
        return arrs, out

    def __call__(self, *inputs, out=None) -> np.ndarray:
        arrs, out = self._args(inputs, out)
        if self._kernel(*[a.ctypes.data for a in arrs], out.ctypes.data) != 0:
            raise MemoryError("the kernel could not allocate its buffers")
        return out

    def time(self, *inputs, iters: int = 10, out=None) -> float:
        """Seconds per call, measured inside C over ``iters`` calls (1 to 10^6)."""
        from morello.limits import check_repeats

        iters = check_repeats("iters", iters)
        arrs, out = self._args(inputs, out)
        secs = float(self._bench(*[a.ctypes.data for a in arrs], out.ctypes.data, iters))
        if secs < 0:
            raise MemoryError("the kernel could not allocate its buffers")
        return secs


def _drop_batch(order: tuple[int, ...]) -> tuple[int, ...]:
    """A memory order without its leading batch dim (an array given without it)."""
    return tuple(d - 1 for d in order if d != 0)


def _has_buffer(a) -> bool:
    try:
        memoryview(a).release()
    except TypeError:
        return False
    return True
