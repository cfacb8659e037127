"""Print the figures the closing notes quote, from one run on this machine.

    OPENBLAS_NUM_THREADS=1 python benchmarks/report.py [MxKxN ...] [--target avx2|avx512]

For each f32 matmul shape: cold synthesis (empty database, a fresh process), warm synthesis
(same database, a second process), Specs solved and per second, peak RSS, database bytes,
memo boxes vs Specs covered, and the verified kernel's GFLOP/s (timed inside C, best of
repeats) next to numpy's (one thread) measured in the same process.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SHAPES = [(8, 8, 8), (64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (7, 13, 97)]

CHILD = r"""
import json, resource, sys, time
import morello
m, k, n, db, bench, target = sys.argv[1:7]
prog = morello.synthesize(morello.matmul(int(m), int(k), int(n)), target, db=db)
out = {"synthesis_seconds": prog.synthesis_seconds, "specs_solved": prog.stats.specs_solved,
       "cost": prog.cost}
if bench == "1":
    from morello import timing
    fn = prog.compile()
    ok, err = prog.verify(fn)
    out["verified"] = ok
    if ok:
        ins = prog.random_inputs()
        secs = timing.seconds(fn, ins, 7)
        out["gflops"] = prog.spec.flops() / secs / 1e9
        out["numpy_gflops"] = prog.spec.flops() / timing.numpy_seconds(prog.spec, ins, 7) / 1e9
out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def run(m, k, n, db, bench, target):
    t0 = time.perf_counter()
    # numpy on one thread, whatever the caller's environment (the table says so).
    env = {"OPENBLAS_NUM_THREADS": "1", **os.environ}
    p = subprocess.run([sys.executable, "-c", CHILD, str(m), str(k), str(n), db, bench, target],
                       capture_output=True, text=True, cwd=tempfile.gettempdir(), env=env)
    if p.returncode:
        raise SystemExit(p.stderr)
    out = json.loads(p.stdout)
    out["wall_seconds"] = time.perf_counter() - t0
    return out


def main() -> None:
    from morello.db import stats

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shapes", nargs="*", metavar="MxKxN",
                    help="matmul shapes (default: 8^3, 64^3, 256^3, 1024^3, 7x13x97)")
    ap.add_argument("--target", default="avx2", help="avx2 (default) or avx512")
    args = ap.parse_args()
    try:
        shapes = [tuple(int(x) for x in a.split("x")) for a in args.shapes] or SHAPES
    except ValueError:
        raise SystemExit("shapes are MxKxN, e.g. 64x64x64") from None
    if any(len(s) != 3 or min(s) < 1 for s in shapes):
        raise SystemExit("shapes are MxKxN, e.g. 64x64x64")
    print("| shape | cold s | cold process s (incl. start, DB write) | Specs solved | Specs/s | "
          "peak RSS MiB | warm s | DB bytes | boxes | Specs covered | GFLOP/s | "
          "numpy GFLOP/s (1 thread) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m, k, n in shapes:
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "bench.db")
            cold = run(m, k, n, db, "0", args.target)
            warm = run(m, k, n, db, "1", args.target)
            st = stats(db)
        rate = cold["specs_solved"] / max(cold["synthesis_seconds"], 1e-9)
        g = warm.get("gflops")
        print(f"| {m}×{k}×{n} | {cold['synthesis_seconds']:.2f} | "
              f"{cold['wall_seconds']:.2f} | {cold['specs_solved']} | "
              f"{rate:,.0f} | {cold['peak_rss_mib']:.0f} | {warm['synthesis_seconds']:.3f} | "
              f"{st['bytes']:,} | {st['boxes']:,} | {st['specs_covered']:,} | "
              f"{format(g, '.1f') if g else 'FAILED'} | {warm.get('numpy_gflops', 0):.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
