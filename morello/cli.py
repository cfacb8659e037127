"""The ``morello`` command line: synthesize, emit, run, benchmark; inspect the database."""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from morello.errors import MorelloError

EPILOG = """\
examples:
  morello synth matmul 64 64 64          print the cheapest Impl tree with costs
  morello emit matmul 7 13 97 > k.c      print the C source (AVX2 intrinsics)
  morello run matmul 8 8 8 --batch 4     build, run on random inputs, check against numpy
  morello bench matmul 64 64 64 --json   ... and time it inside C (best of repeats)
  morello db stats                       what the database holds
  morello calibrate                      measure the cost model's constants on this host

Results of every search are kept in a database (default: $XDG_CACHE_HOME/morello/<target>.db,
i.e. ~/.cache/morello/avx2.db) and reused by later searches, for any shape; --db chooses
another file.
"""


def _add_spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("op", choices=["matmul"], help="the operation (only matmul so far)")
    p.add_argument("m", type=int, help="rows of lhs and out")
    p.add_argument("k", type=int, help="reduction size (cols of lhs, rows of rhs)")
    p.add_argument("n", type=int, help="cols of rhs and out")
    p.add_argument("--batch", type=int, default=1, metavar="B",
                   help="batch size: B independent matmuls (default 1)")
    p.add_argument("--dtype", default="f32", help="element type (default f32)")
    p.add_argument("--target", default="avx2", help="target ISA (default avx2)")
    p.add_argument("--db", metavar="PATH", default=None,
                   help="database file to read and extend (default: user cache dir)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="threads: parallel loops are searched and run on N OpenMP "
                        "threads (default 1: serial code)")
    _add_calibration_arg(p)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _add_calibration_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", metavar="PATH", default=None,
                   help="cost constants: a file written by `morello calibrate`, or 'builtin' "
                        "(default: $MORELLO_CALIBRATION, else the file `morello calibrate` "
                        "wrote, if any, else builtin)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="morello",
        description="Synthesize the provably cheapest AVX2 C kernel for a tensor Spec "
                    "(under morello's affine cost model), then build, verify and time it.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("synth", help="print the optimal Impl tree, one line per node "
                       "with its Spec and cost")
    _add_spec_args(p)
    p = sub.add_parser("emit", help="print the C source of the optimal Impl")
    _add_spec_args(p)
    p = sub.add_parser("run", help="build with the host C compiler, run on random inputs "
                       "and check against numpy (exit 0 only if it matches)")
    _add_spec_args(p)
    p = sub.add_parser("bench", help="synthesize, build, verify and time the kernel")
    _add_spec_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--repeats", type=int, default=7, help="timed repeats (default 7)")
    p = sub.add_parser("db", help="inspect the database")
    p.add_argument("what", choices=["stats"])
    p.add_argument("--db", metavar="PATH", default=None)
    p.add_argument("--target", default="avx2")
    p.add_argument("--threads", type=int, default=1)
    _add_calibration_arg(p)
    p.add_argument("--json", action="store_true")
    p = sub.add_parser(
        "calibrate", help="measure the cost model's constants on this machine",
        description="Time microbenchmarks of the kernels and memory levels on this host "
                    "(about 15 s a run, 3 runs by default), print them, and write the cost constants (in units of a "
                    "quarter of a vector FMA at peak) to a calibration file that later searches use. "
                    "Results of searches under other constants go to another database.")
    p.add_argument("--target", default="avx2", help="target ISA (default avx2)")
    p.add_argument("--out", metavar="PATH", default=None,
                   help="file to write (default: $XDG_CONFIG_HOME/morello/"
                        "calibration-<target>.json)")
    p.add_argument("--dry-run", action="store_true", help="measure and print; write nothing")
    p.add_argument("--quick", action="store_true",
                   help="a twentieth of the measuring time (rougher constants; for tests)")
    p.add_argument("--runs", type=int, default=3, metavar="R",
                   help="measure R times and keep each constant's median (default 3)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _progress(quiet: bool):
    if quiet:
        return None
    from morello.search import stderr_progress

    return stderr_progress


def _program(args):
    import morello

    spec = morello.matmul(args.m, args.k, args.n, batch=args.batch, dtype=args.dtype,
                          target=args.target, serial=args.threads == 1)
    quiet = args.quiet or getattr(args, "json", False)
    prog = morello.synthesize(spec, target=args.target, db=args.db, progress=_progress(quiet),
                              threads=args.threads, calibration=args.calibration)
    if not quiet and prog.synthesis_seconds > 0.5:
        print(file=sys.stderr)
    return prog


def _inputs(prog, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, size=o.shape).astype(o.dtype.np)
            for o in prog.spec.operands[:-1]]


def verify(prog, fn) -> tuple[bool, float]:
    """Run ``fn`` on random inputs; compare with numpy. Returns (ok, max abs error)."""
    ins = _inputs(prog)
    out = fn(*ins)
    ref = prog.reference(*ins)
    k = prog.spec.shape[2]
    err = float(np.max(np.abs(out - ref))) if out.size else 0.0
    ok = bool(np.allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1, k)))
    return ok, err


def _time(fn, ins, repeats: int) -> float:
    once = fn.time(*ins, iters=1)
    iters = max(1, min(1_000_000, int(0.05 / max(once, 1e-9))))
    fn.time(*ins, iters=iters)  # warm-up
    return min(fn.time(*ins, iters=iters) for _ in range(max(1, repeats)))


def _numpy_seconds(ins, repeats: int) -> float:
    a, b = ins
    if a.shape[0] == 1:  # plain 2-D matmul: numpy's fastest path for batch 1
        a, b = a[0], b[0]
    once = time.perf_counter()
    np.matmul(a, b)
    once = time.perf_counter() - once
    iters = max(1, min(100_000, int(0.05 / max(once, 1e-7))))
    best = float("inf")
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        for _ in range(iters):
            np.matmul(a, b)
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def cmd_synth(args) -> int:
    prog = _program(args)
    print(prog.impl.pformat())
    return 0


def cmd_emit(args) -> int:
    prog = _program(args)
    sys.stdout.write(prog.c_source)
    return 0


def _need_compiler() -> None:
    from morello.codegen.build import find_compiler

    find_compiler()


def cmd_run(args) -> int:
    _need_compiler()
    prog = _program(args)
    fn = prog.compile()
    ok, err = verify(prog, fn)
    print(f"{prog.spec.logical_str()}: {'matches numpy' if ok else 'MISMATCH'} "
          f"(max abs error {err:.3g})")
    return 0 if ok else 1


def cmd_bench(args) -> int:
    _need_compiler()
    prog = _program(args)
    fn = prog.compile()
    ok, err = verify(prog, fn)
    flops = prog.spec.flops()
    result = {
        "spec": prog.spec.logical_str(),
        "threads": prog.target.processors,
        "cost": prog.cost,
        "verified": ok,
        "max_abs_error": err,
        "synthesis_seconds": prog.synthesis_seconds,
        "specs_solved": prog.stats.specs_solved,
        "logical_specs": prog.stats.logical_specs,
    }
    if ok:
        ins = _inputs(prog)
        secs = _time(fn, ins, args.repeats)
        np_secs = _numpy_seconds(ins, args.repeats)
        result.update(seconds_per_call=secs, gflops=flops / secs / 1e9,
                      numpy_seconds_per_call=np_secs, numpy_gflops=flops / np_secs / 1e9)
    else:
        result.update(seconds_per_call=None, gflops=None)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:24} {v:.6g}" if isinstance(v, float) else f"{k:24} {v}")
    return 0 if ok else 1


def cmd_db(args) -> int:
    from pathlib import Path

    from morello import db as dbmod
    from morello.memory import parse_target

    tgt = parse_target(args.target, args.threads, args.calibration)
    path = Path(args.db) if args.db else dbmod.default_path(tgt.db_key)
    stats = dbmod.stats(path, tgt.db_key)
    if args.json:
        print(json.dumps(stats))
    else:
        for k, v in stats.items():
            print(f"{k:24} {v}")
    return 0


def cmd_calibrate(args) -> int:
    from pathlib import Path

    from morello import calibrate, costs
    from morello.memory import TARGETS

    if args.target not in TARGETS:
        raise MorelloError(f"unknown target {args.target!r}; known: {', '.join(TARGETS)}")
    if args.runs < 1:
        raise MorelloError(f"--runs must be >= 1, got {args.runs}")
    path = Path(args.out) if args.out else costs.default_path(args.target)
    if not args.dry_run:
        _check_writable_file(path)
    result = calibrate.run(TARGETS[args.target],
                           progress=None if args.json else lambda m: print(m, file=sys.stderr),
                           quick=args.quick, runs=args.runs)
    if not args.dry_run:
        costs.save(path, args.target, result.constants, result.measured_ns, result.host)
    if args.json:
        print(json.dumps({"constants": result.constants.to_json(),
                          "measured_ns": result.measured_ns,
                          "path": None if args.dry_run else str(path)}))
    else:
        print(result.table())
        if not args.dry_run:
            print(f"wrote {path}; later searches use these constants (their results go "
                  f"to databases keyed {args.target}@{result.constants.fingerprint()})")
    return 0


def _check_writable_file(path) -> None:
    if path.is_dir():
        raise MorelloError(f"{path} is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise MorelloError(f"cannot create {path.parent}: {e.strerror or e}") from None
    import os

    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise MorelloError(f"cannot write {path}")


COMMANDS = {"synth": cmd_synth, "emit": cmd_emit, "run": cmd_run, "bench": cmd_bench,
            "db": cmd_db, "calibrate": cmd_calibrate}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except MorelloError as e:
        print(f"morello: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nmorello: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
