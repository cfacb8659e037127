"""Before/after: the programs two morellos emit for the same matmuls (or row softmaxes),
alternated in one process.

    python benchmarks/ab_programs.py --baseline DIR [--target avx512] [--rounds 11]
        [--dtypes u8,s8,s32] [--rhs-layout cm] [MxKxN ...]
    python benchmarks/ab_programs.py --baseline DIR --op softmax [ROWSxCOLS ...]
    python benchmarks/ab_programs.py --calibration-before builtin \
        --calibration-after FILE [...]

``DIR`` holds another morello (``pip install --target DIR .`` of an older commit, or a
copy of its ``morello/`` with ``codegen/`` as ``morello/codegen``). Each morello emits its
program for every shape (``morello emit``, in a subprocess with its own ``PYTHONPATH``);
both are compiled with the same compiler and flags, verified against numpy, then timed
inside C in alternating rounds. The report gives both medians and the median of the
per-round ratios (after/before): on a shared machine only that ratio means much.
``--calibration-before/--calibration-after`` give each side's cost constants
(``builtin`` or a calibration file, as ``morello emit --calibration``); without
``--baseline`` both sides are this morello, so the two differ only by their constants.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from morello.codegen.build import compile_c
from morello.dtypes import parse_dtype
from morello.memory import TARGETS, host_lacks


def emit(pythonpath: str | None, shape: tuple[int, ...], target: str,
         dtypes: str, rhs_layout: str, op: str = "matmul",
         calibration: str | None = None) -> str:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    else:
        env.pop("PYTHONPATH", None)
    extra = ["--dtypes", dtypes, "--rhs-layout", rhs_layout] if op == "matmul" else []
    if calibration is not None:
        extra += ["--calibration", calibration]
    p = subprocess.run([sys.executable, "-m", "morello", "emit", op, *map(str, shape),
                        "--target", target, *extra],
                       capture_output=True, text=True, env=env,
                       cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise SystemExit(f"emit failed ({pythonpath or 'this morello'}): "
                         f"{p.stderr.strip().splitlines()[-1:]}")
    return p.stdout


def _random(rng, shape: tuple[int, int], dt: np.dtype) -> np.ndarray:
    if not np.issubdtype(dt, np.integer):  # f32, and bf16 (ml_dtypes)
        return rng.uniform(-1, 1, shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dt)


def load(source: str, target: str, operands: int = 3):
    lib = ctypes.CDLL(str(compile_c(source, TARGETS[target].cflags)))
    lib.bench.restype = ctypes.c_double
    lib.bench.argtypes = [ctypes.c_void_p] * operands + [ctypes.c_long]
    return lib


def softmax_rows(args, base: str) -> None:
    """The same comparison for ``softmax ROWS COLS`` (along the last dim), in ns per
    element."""
    print("| shape | before ns/elem | after ns/elem | median ratio before/after (speedup) |")
    print("|---|---|---|---|")
    for text in args.shapes:
        r, c = map(int, text.split("x"))
        libs = {name: load(emit(path, (r, c), args.target, "", "", "softmax", cal),
                           args.target, 2)
                for name, path, cal in sides(args, base)}
        x = np.random.default_rng(0).uniform(-8, 8, (r, c)).astype(np.float32)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
        y = np.zeros_like(x)
        for name, lib in libs.items():
            y[:] = 0
            if lib.bench(x.ctypes.data, y.ctypes.data, 1) < 0:
                raise SystemExit(f"{name} {text}: the kernel could not allocate")
            np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)
        iters = max(1, int(0.03 / libs["after"].bench(x.ctypes.data, y.ctypes.data, 1)))
        ns: dict[str, list[float]] = {name: [] for name in libs}
        for _ in range(args.rounds):
            for name, lib in libs.items():
                ns[name].append(lib.bench(x.ctypes.data, y.ctypes.data, iters) / x.size * 1e9)
        ratio = statistics.median(b / a for a, b in zip(ns["after"], ns["before"]))
        print(f"| {text} | {statistics.median(ns['before']):.3f} | "
              f"{statistics.median(ns['after']):.3f} | {ratio:.2f} |", flush=True)


def sides(args, base: str | None):
    """``(name, PYTHONPATH, calibration)`` of the two sides."""
    return (("before", base, args.calibration_before), ("after", None, args.calibration_after))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", metavar="DIR",
                    help="the other morello (default: this one, then give calibrations)")
    ap.add_argument("--calibration-before", metavar="PATH|builtin")
    ap.add_argument("--calibration-after", metavar="PATH|builtin")
    ap.add_argument("--target", choices=sorted(TARGETS), default="avx2")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--rhs-layout", choices=("rm", "cm"), default="rm",
                    help="cm: rhs stored column-major (gemma's W[N×K] rows)")
    ap.add_argument("--dtypes", default="f32,f32,f32",
                    help="lhs,rhs,out dtypes (integer ones are checked exactly)")
    ap.add_argument("--op", choices=("matmul", "softmax"), default="matmul",
                    help="softmax: shapes are ROWSxCOLS (default 512x1024 4096x4096)")
    ap.add_argument("shapes", nargs="*")
    args = ap.parse_args()
    if reason := host_lacks(TARGETS[args.target]):
        raise SystemExit(reason)
    if args.baseline is None and args.calibration_before == args.calibration_after:
        raise SystemExit("give --baseline, or two different --calibration-before/-after")
    base = str(Path(args.baseline).resolve()) if args.baseline else None
    print(f"target {args.target}; {args.rounds} alternating rounds, each >= 30 ms inside C\n")
    if args.op == "softmax":
        args.shapes = args.shapes or ["512x1024", "4096x4096"]
        softmax_rows(args, base)
        return
    args.shapes = args.shapes or ["64x64x64", "256x256x256", "512x512x512"]
    dts = [np.dtype(parse_dtype(d).np) for d in args.dtypes.split(",")]
    print("| shape | before GOPS | after GOPS | median ratio after/before |")
    print("|---|---|---|---|")
    for text in args.shapes:
        m, k, n = map(int, text.split("x"))
        libs = {name: load(emit(path, (m, k, n), args.target, args.dtypes, args.rhs_layout,
                                calibration=cal), args.target)
                for name, path, cal in sides(args, base)}
        rng = np.random.default_rng(0)
        a, b = (_random(rng, shape, dt) for shape, dt in (((m, k), dts[0]), ((k, n), dts[1])))
        want = a.astype(dts[2]) @ b.astype(dts[2])
        stored = np.ascontiguousarray(b.T) if args.rhs_layout == "cm" else b
        ptrs = [a.ctypes.data, stored.ctypes.data]
        for name, lib in libs.items():
            c = np.zeros((m, n), dts[2])
            if lib.bench(*ptrs, c.ctypes.data, 1) < 0:
                raise SystemExit(f"{name} {text}: the kernel could not allocate")
            if dts[2].kind == "f":
                np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3 * k ** 0.5)
            else:
                np.testing.assert_array_equal(c, want)
        c = np.zeros((m, n), dts[2])
        iters = max(1, int(0.03 / libs["after"].bench(*ptrs, c.ctypes.data, 1)))
        speed: dict[str, list[float]] = {name: [] for name in libs}
        for _ in range(args.rounds):
            for name, lib in libs.items():
                speed[name].append(2 * m * k * n / lib.bench(*ptrs, c.ctypes.data, iters) / 1e9)
        ratio = statistics.median(x / y for x, y in zip(speed["after"], speed["before"]))
        print(f"| {text} | {statistics.median(speed['before']):.1f} | "
              f"{statistics.median(speed['after']):.1f} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
