"""Softmax along the last dim: morello, numpy and (when importable) torch, side by side in
one run on one thread, in ns per element; for the input that does not fit in cache, also
the fraction of this machine's streaming bandwidth, measured in the same run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/softmax.py [--rounds 7]

Every morello kernel is verified against numpy first. morello is timed inside C (best of
rounds of >= 20 ms); numpy (``exp(x - max) / sum``, into preallocated arrays) and torch
(``torch.softmax(x, -1, out=...)``) through Python, best of rounds. Bandwidth: the bytes
a softmax must move (read src, write dst: 8 bytes per element) over its time, against
``calibrate``'s streaming read (the memory roof of ``benchmarks/roofline.py``).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import morello
from morello import calibrate
from morello.memory import AVX2

SHAPES = [(1, 16384), (128, 128), (512, 1024), (4096, 4096)]  # the last: 64 MiB


def _best(f, rounds: int) -> float:
    f()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        if time.perf_counter() - t0 > 0.02:
            break
        n *= 2
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    lib = calibrate._lib(AVX2)
    read_gbs = 64 / (min(lib.cal_read(128 << 20, 64, 1) for _ in range(5)) * 1e9)
    print(f"streaming read bandwidth (one core, this run): {read_gbs:.1f} GB/s\n")
    print("| shape | morello ns/elem | numpy ns/elem | torch ns/elem | morello vs numpy | "
          "morello GB/s (% of read bw) | search s |")
    print("|---|---|---|---|---|---|---|")
    trees = []
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "softmax.sqlite")
        for shape in SHAPES:
            t0 = time.perf_counter()
            prog = morello.synthesize(morello.softmax(*shape), db=db)
            search = time.perf_counter() - t0
            fn = prog.compile()
            ok, err = prog.verify(fn)
            assert ok, f"{shape}: does not match numpy ({err})"
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            out = np.empty_like(x)
            iters = max(1, int(0.02 / max(fn.time(x, iters=1, out=out), 1e-9)))
            ours = min(fn.time(x, iters=iters, out=out) for _ in range(args.rounds))
            m = np.empty((shape[0], 1), np.float32)
            s = np.empty((shape[0], 1), np.float32)

            def numpy_softmax(x=x, out=out, m=m, s=s):
                np.max(x, axis=-1, keepdims=True, out=m)
                np.subtract(x, m, out=out)
                np.exp(out, out=out)
                np.sum(out, axis=-1, keepdims=True, out=s)
                np.divide(out, s, out=out)

            theirs = _best(numpy_softmax, args.rounds)
            tt = None
            if torch is not None:
                tx, to = torch.from_numpy(x), torch.empty(shape)
                tt = _best(lambda tx=tx, to=to: torch.softmax(tx, -1, out=to), args.rounds)
            n = x.size
            gbs = 8 * n / ours / 1e9
            print(f"| {shape[0]}×{shape[1]} | {ours / n * 1e9:.3f} | {theirs / n * 1e9:.3f} | "
                  f"{'-' if tt is None else f'{tt / n * 1e9:.3f}'} | {theirs / ours:.2f}× | "
                  f"{gbs:.1f} ({100 * gbs / read_gbs:.0f} %) | {search:.2f} |")
            trees.append((shape, prog.impl.pformat()))
    for shape, tree in trees:
        print(f"\nThe program the search chose for {shape[0]}×{shape[1]}:\n{tree}")


if __name__ == "__main__":
    main()
