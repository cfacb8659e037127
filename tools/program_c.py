"""Write the emitted C of a fixed corpus of programs on every target into a directory.

    python tools/program_c.py OUT [-j N] [--only TEXT]

The corpus is the canary's (``morello.canary.corpus``) and the Specs the benchmark
programs search (``benchmarks/``: report, roof, matvec, softmax, int_matmul, chains,
host_fit). Each program is synthesized with the built-in constants and no database and
written to ``OUT/<target>/<name>.c``. A refactor that must not change the emitted code
proves it by running this before and after and diffing the two directories
(``diff -r before after``).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def benchmark_specs(target: str) -> list[tuple[str, Callable, int]]:
    """``(name, make Spec, threads)`` for the Specs the benchmark programs search."""
    import morello as m

    t = {"target": target}
    bf16 = ("f32", "bf16", "f32")
    cases: list[tuple[str, Callable, int]] = []
    for s in [(8, 8, 8), (64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (7, 13, 97)]:
        cases.append((f"report matmul {'x'.join(map(str, s))}",
                      lambda s=s: m.matmul(*s, **t), 1))
    for b, mm, k, n in [(1, 512, 512, 512), (8, 128, 128, 128), (1, 1, 2048, 16384),
                        (1, 16, 16, 16), (4, 8, 8, 8)]:
        cases.append((f"roof matmul b{b} {mm}x{k}x{n}",
                      lambda a=(b, mm, k, n): m.matmul(*a[1:], batch=a[0], **t), 1))
    for b, mm, k, n in [(1, 1024, 1024, 1024), (8, 128, 128, 128)]:
        cases.append((f"roof matmul b{b} {mm}x{k}x{n} 2t",
                      lambda a=(b, mm, k, n): m.matmul(*a[1:], batch=a[0], **t), 2))
    for k, n in [(2048, 16384), (512, 1024), (4096, 4096)]:
        for lay in ("rm", "cm"):
            cases.append((f"matvec bf16 1x{k}x{n} {lay}",
                          lambda k=k, n=n, lay=lay: m.matmul(1, k, n, dtypes=bf16,
                                                             rhs_layout=lay, **t), 1))
    for s in [(1, 16384), (128, 128), (512, 1024), (4096, 4096)]:
        cases.append((f"softmax {'x'.join(map(str, s))}", lambda s=s: m.softmax(*s, **t), 1))
    for n in (64, 256, 512):
        for dts in ("u8,s8,s32", "u8,s8,s32 sat", "s16,s16,s32"):
            cases.append((f"int matmul {n} {dts}",
                          lambda n=n, dts=dts: m.matmul(n, n, n, dtypes=dts.split()[0],
                                                        saturate="sat" in dts, **t), 1))
    for seq, dim in ((128, 64), (512, 64)):
        cases.append((f"attention {seq}x{dim}", lambda a=(seq, dim): m.attention(*a, **t), 1))
    cases.append(("chain matmul|bias|relu 256",
                  lambda: m.chain(m.matmul(256, 256, 256, **t), m.add_bias(1, 256, 256, **t),
                                  m.relu(1, 256, 256, **t)), 1))
    cases.append(("chain matmul|softmax 128x64x128",
                  lambda: m.chain(m.matmul(128, 64, 128, **t), m.softmax(128, 128, **t)), 1))
    return cases


def corpus(target: str) -> list[tuple[str, Callable, int]]:
    from morello import canary

    return [(f"canary {n}", f, th) for n, f, th in canary.corpus(target)] \
        + benchmark_specs(target)


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".c"


def _emit(job: tuple[str, str]) -> tuple[str, str, str]:
    """``(target, name, C or the error's text)`` for one corpus entry."""
    import morello
    from morello.errors import MorelloError

    target, name = job
    make, threads = next((f, th) for n, f, th in corpus(target) if n == name)
    try:
        prog = morello.synthesize(make(), target, db=False, threads=threads,
                                  calibration="builtin")
        return target, name, prog.c_source
    except MorelloError as e:  # a dtype a target has no kernels for: the error is the output
        return target, name, f"/* {type(e).__name__}: {e} */\n"


def main() -> int:
    from morello import targets

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("-j", type=int, default=1, help="worker processes")
    ap.add_argument("--only", default=None, help="entries whose name contains this")
    args = ap.parse_args()
    jobs = [(t, n) for t in sorted(targets.all()) for n, _, _ in corpus(t)
            if args.only is None or args.only in n]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.j) as pool:
        for target, name, text in pool.map(_emit, jobs):
            path = args.out / target / _file_name(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"{target} {name}: {len(text)} bytes", file=sys.stderr)
    print(f"{len(jobs)} programs in {time.perf_counter() - t0:.0f} s into {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
