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


def compile_c(source: str, target_flags: tuple[str, ...], openmp: bool = False) -> Path:
    """Compile ``source`` to a shared library (cached by content); return its path."""
    cc = find_compiler()
    flags = list(CFLAGS) + list(target_flags) + (["-fopenmp"] if openmp else [])
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
        raise BuildError(f"C compiler failed ({cc}):\n{proc.stderr.strip()[:4000]}")
    os.replace(tmp, so)
    return so


class CompiledProgram:
    """A loaded program: ``fn(*inputs, out=None)`` runs it on numpy arrays."""

    def __init__(self, path: Path, operand_shapes, dtypes, n_inputs: int) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.shapes = [tuple(s) for s in operand_shapes]
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.n_inputs = n_inputs
        ptr = ctypes.c_void_p
        self._kernel = self.lib.kernel
        self._kernel.argtypes = [ptr] * len(self.shapes)
        self._kernel.restype = None
        self._bench = self.lib.bench
        self._bench.argtypes = [ptr] * len(self.shapes) + [ctypes.c_long]
        self._bench.restype = ctypes.c_double

    def _check(self, i: int, a) -> np.ndarray:
        if not isinstance(a, np.ndarray):
            raise ValueError(f"operand {i} must be a numpy array, got {type(a).__name__}")
        if a.dtype != self.dtypes[i]:
            raise ValueError(f"operand {i} has dtype {a.dtype}, expected {self.dtypes[i]}")
        shape = self.shapes[i]
        if not (a.shape == shape or (shape[0] == 1 and a.shape == shape[1:])):
            raise ValueError(f"operand {i} has shape {a.shape}, expected {shape}")
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        return a

    def _args(self, inputs, out):
        if len(inputs) != self.n_inputs:
            raise ValueError(f"expected {self.n_inputs} inputs, got {len(inputs)}")
        arrs = [self._check(i, a) for i, a in enumerate(inputs)]
        oshape = self.shapes[-1]
        if out is None:
            squeeze = arrs and arrs[0].ndim == len(oshape) - 1
            out = np.empty(oshape[1:] if squeeze else oshape, self.dtypes[-1])
        else:
            if not out.flags.c_contiguous or not out.flags.writeable:
                raise ValueError("out must be a writeable C-contiguous array")
            self._check(len(self.shapes) - 1, out)
        return arrs, out

    def __call__(self, *inputs, out=None) -> np.ndarray:
        arrs, out = self._args(inputs, out)
        self._kernel(*[a.ctypes.data for a in arrs], out.ctypes.data)
        return out

    def time(self, *inputs, iters: int = 10, out=None) -> float:
        """Seconds per call, measured inside C over ``iters`` calls."""
        arrs, out = self._args(inputs, out)
        return float(self._bench(*[a.ctypes.data for a in arrs], out.ctypes.data, iters))
