"""GB/s of the non-matmul primitives in L1, in L2 and from main memory, next to numpy and
to this machine's streaming bandwidth, measured in the same run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/primitives.py [--rounds 7] [--quick]

For each primitive and size, the synthesized program is verified against numpy first; then
each round times morello's program (inside C) and numpy's same operation into a
preallocated output (``KindInfo.reference``, through Python), back to back, so both see the
machine in the same mood. GB/s count every operand's bytes once (a write-allocate costs the
hardware one more read per written line, uncounted for both). The streaming roof is
``morello calibrate``'s read microbenchmark (vector loads through 128 MiB), measured before
and after the table; the main-memory column's ratio is against the lower of the two.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

# One thread for numpy's OpenBLAS (before numpy loads it), whatever the caller's environment.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import morello  # noqa: E402
from morello import calibrate  # noqa: E402
from morello.kinds import KINDS  # noqa: E402
from morello.memory import AVX2  # noqa: E402

# (label, constructor, sizes in L1 / L2 / main memory, keyword arguments)
CASES = [
    ("add", morello.add, [(8, 160), (64, 320), (2048, 4096)], {}),
    ("mul", morello.mul, [(8, 160), (64, 320), (2048, 4096)], {}),
    ("relu", morello.relu, [(16, 128), (128, 256), (4096, 4096)], {}),
    ("max dim=1", morello.reduce_max, [(16, 200), (128, 400), (4096, 4096)], {"dim": 1}),
    ("sum dim=0", morello.reduce_sum, [(16, 200), (128, 400), (4096, 4096)], {"dim": 0}),
    ("broadcast dim=1", morello.broadcast, [(16, 200), (128, 400), (4096, 4096)],
     {"dim": 1}),
    ("fill -inf", morello.fill, [(32, 128), (256, 256), (4096, 4096)],
     {"value": -np.inf}),
]
WHERE = ("L1", "L2", "main memory")


def stream_gbs() -> float:
    lib = calibrate._lib(AVX2)
    return 64 / calibrate.stream_read_ns(lib)


def _numpy_call(spec, ins):
    ref = KINDS[spec.kind].reference
    out = np.zeros(spec.output.shape, spec.output.dtype.np)
    return lambda: ref(spec.params, ins, out)


def _seconds_numpy(call, budget: float) -> float:
    t0 = time.perf_counter()
    call()
    once = max(time.perf_counter() - t0, 1e-7)
    iters = max(1, int(budget / once))
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    return (time.perf_counter() - t0) / iters


def measure(spec, rounds: int, budget: float):
    prog = morello.synthesize(spec, db=False)
    fn = prog.compile()
    ok, err = prog.verify(fn)
    if not ok:
        raise SystemExit(f"{spec.logical_str()}: MISMATCH against numpy (error {err})")
    ins = prog.random_inputs()
    nbytes = sum(o.bytes for o in spec.operands)
    # Into one output array, written once before timing, as numpy's is (a fresh one per
    # timing put its page faults into morello's time: relu and broadcast from main
    # memory read as 0.5-0.6x their speed).
    out = np.zeros(spec.output.shape, spec.output.dtype.np)
    once = fn.time(*ins, iters=1, out=out)
    iters = max(1, int(budget / max(once, 1e-9)))
    fn.time(*ins, iters=iters, out=out)
    call = _numpy_call(spec, ins)
    call()
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(nbytes / fn.time(*ins, iters=iters, out=out) / 1e9)
        theirs.append(nbytes / _seconds_numpy(call, budget) / 1e9)
    return prog, statistics.median(ours), statistics.median(theirs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="3 rounds of 10 ms")
    args = ap.parse_args()
    rounds, budget = (3, 0.01) if args.quick else (args.rounds, 0.03)
    before = stream_gbs()
    print(f"streaming read bandwidth before: {before:.1f} GB/s")
    print("| primitive | where | shape | morello GB/s | numpy GB/s | morello / numpy | "
          "synthesis s |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for label, make, sizes, kw in CASES:
        for where, shape in zip(WHERE, sizes):
            spec = make(*shape, **kw)
            prog, ours, theirs = measure(spec, rounds, budget)
            rows.append((label, where, ours))
            print(f"| {label} | {where} | {'x'.join(map(str, shape))} | {ours:.1f} | "
                  f"{theirs:.1f} | {ours / theirs:.2f} | {prog.synthesis_seconds:.2f} |",
                  flush=True)
    after = stream_gbs()
    roof = min(before, after)
    print(f"streaming read bandwidth after: {after:.1f} GB/s")
    print("\nmain memory against the streaming roof (lower of before/after):")
    for label, where, ours in rows:
        if where == "main memory":
            print(f"  {label}: {ours:.1f} GB/s = {100 * ours / roof:.0f}% of {roof:.1f}")


if __name__ == "__main__":
    main()
