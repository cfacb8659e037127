"""Softmax along the last dim: morello, numpy and (when importable) torch, side by side in
one run on one thread, in ns per element; for the input that does not fit in cache, also
the fraction of this machine's streaming bandwidth, measured in the same run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/softmax.py [--rounds 7] [--targets avx2 avx512]

``--targets``: morello's programs for each (default: avx2, and avx512 where the host runs
it), timed in the same rounds; the ratios are against the last target's program.
Every morello kernel is verified against numpy first. morello is timed inside C, numpy
(``exp(x - max) / sum``, into preallocated arrays) and torch (``torch.softmax(x, -1,
out=...)``) through Python, each the best of 3 batches of about 20 ms, in ``--rounds``
interleaved rounds; the table gives median times and the median of per-round ratios.
Bandwidth: the bytes a softmax must move (read src, write dst: 8 bytes per element) over
its time, against ``calibrate``'s streaming read (the memory roof of
``benchmarks/roofline.py``), measured in every round for the largest input (the median
of the per-round fractions).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from timers import c_timer, optional_torch, py_timer

import morello
from morello import calibrate
from morello.memory import AVX2, AVX512, host_lacks, parse_target

SHAPES = [(1, 16384), (128, 128), (512, 1024), (4096, 4096)]  # the last: 64 MiB




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--targets", nargs="+", default=None, metavar="TARGET",
                    help="morello targets to time (default: avx2, and avx512 if the host "
                         "runs it)")
    args = ap.parse_args()
    targets = args.targets or ["avx2"] + ([] if host_lacks(AVX512) else ["avx512"])
    for t in targets:
        if (why := host_lacks(parse_target(t))) is not None:
            raise SystemExit(f"this host cannot run {t} code: {why}")
    last = targets[-1]
    torch = optional_torch()
    lib = calibrate._lib(AVX2)

    def read_bw() -> float:
        return 64 / (min(lib.cal_read(128 << 20, 64, 1) for _ in range(3)) * 1e9)

    read_gbs = read_bw()
    print(f"streaming read bandwidth (one core, this run): {read_gbs:.1f} GB/s\n")
    cols = " | ".join(f"morello {t} ns/elem" for t in targets)
    print(f"| shape | {cols} | numpy ns/elem | torch ns/elem | numpy/morello | "
          "torch/morello | morello GB/s (% of read bw) | search s |")
    print("|---|" + "---|" * (len(targets) + 7))
    trees = []
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "softmax.sqlite")
        for shape in SHAPES:
            fns, search = {}, 0.0
            for t in targets:
                t0 = time.perf_counter()
                prog = morello.synthesize(morello.softmax(*shape), t, db=db)
                search = time.perf_counter() - t0
                fn = prog.compile()
                ok, err = prog.verify(fn)
                assert ok, f"{shape} {t}: does not match numpy ({err})"
                fns[t] = fn
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            out = np.empty_like(x)
            m = np.empty((shape[0], 1), np.float32)
            s = np.empty((shape[0], 1), np.float32)

            def numpy_softmax(x=x, out=out, m=m, s=s):
                np.max(x, axis=-1, keepdims=True, out=m)
                np.subtract(x, m, out=out)
                np.exp(out, out=out)
                np.sum(out, axis=-1, keepdims=True, out=s)
                np.divide(out, s, out=out)

            timers = {t: c_timer(f, [x], out) for t, f in fns.items()}
            timers["numpy"] = py_timer(numpy_softmax)
            if torch is not None:
                tx, to = torch.from_numpy(x), torch.empty(shape)
                timers["torch"] = py_timer(lambda tx=tx, to=to: torch.softmax(tx, -1, out=to))
            times: dict[str, list[float]] = {k: [] for k in timers}
            bws = []
            for _ in range(args.rounds):  # interleaved: a neighbour's load hits all alike
                for k, timer in timers.items():
                    times[k].append(timer())
                if shape == SHAPES[-1]:
                    bws.append(read_bw())
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio = {k: statistics.median(a / b for a, b in zip(v, times[last]))
                     for k, v in times.items()}
            n = x.size
            gbs = 8 * n / med[last] / 1e9
            bw = statistics.median(bws) if bws else read_gbs
            pct = statistics.median(8 * n / t / 1e9 / b for t, b in zip(
                times[last], bws)) if bws else gbs / read_gbs
            tt = med.get("torch")
            vs_torch = "-" if tt is None else f"{ratio['torch']:.2f}×"
            ns = " | ".join(f"{med[t] / n * 1e9:.3f}" for t in targets)
            print(f"| {shape[0]}×{shape[1]} | {ns} | "
                  f"{med['numpy'] / n * 1e9:.3f} | "
                  f"{'-' if tt is None else f'{tt / n * 1e9:.3f}'} | {ratio['numpy']:.2f}× | "
                  f"{vs_torch} | "
                  f"{gbs:.1f} ({100 * pct:.0f} % of {bw:.1f}) | {search:.2f} |", flush=True)
            trees.append((shape, prog.impl.pformat()))
    for shape, tree in trees:
        print(f"\nThe program the search chose for {shape[0]}×{shape[1]} ({last}):\n{tree}")


if __name__ == "__main__":
    main()
