"""The ``morello`` command line: synthesize, emit, run, benchmark; inspect the database."""
from __future__ import annotations

import argparse
import json
import sqlite3
import sys

from morello import limits, timing
from morello.api import OPERATIONS
from morello.cli_precompute import add_precompute_parser, cmd_precompute
from morello.compose import chain_step_reason
from morello.errors import MorelloError
from morello.memory import calibration_source

EPILOG = """\
operations (OP SIZES...):
  matmul M K N [--batch B]     out[b] = lhs[b] @ rhs[b]   (lhs BxMxK, rhs BxKxN)
  add|mul S1 [S2 S3 S4]         out = lhs + rhs, lhs * rhs (elementwise, 1 to 4 dims)
  bias S1 S2 [...] [--dim D]    out = lhs + bias, the bias repeated along D (default: the
                                rows, -2: one bias per column)
  channel-bias S1 S2 [...] [--dim D]
                                out = lhs + bias, the bias a vector along D (default 1:
                                one per channel of NxCxHxW, bias 1xCx1x1)
  relu S1 [...]                 dst = max(src, 0)
  transpose M N [--batch B]     dst[b] = src[b] transposed (src BxMxN, dst BxNxM)
  fill S1 [...] [--value=V]     dst = V (0 or -inf)
  broadcast S1 [...] --dim D    dst (S1 x ...) = src repeated along D (src has size 1 there)
  max|sum S1 [...] --dim D      dst = reduction of src along D (dst keeps D with size 1)
  softmax S1 [...] [--dim D]    dst = exp(src - max) / sum(exp(src - max)) along D
                                (default: the last dim)
  conv N C H W F KH KW [--stride S] [--pad P] [--layout nchw|nhwc] [--groups G]
                                torch's conv2d(x, weight) without bias: x NxCxHxW, weight
                                FxCxKHxKW, out NxFxOHxOW (NCHW; nhwc: channels-last x and
                                out, weight KHxKWxCxF); --groups C with F = C: depthwise
                                (weight Cx1xKHxKW in either layout)
  attention SEQ DIM             softmax(Q @ Kt) @ V (Q, V SEQxDIM, Kt DIMxSEQ): a chain
  chain 'STEP | STEP ...'       steps run left to right, each reading the previous
                                step's output. The first step is an operation as above
                                (`matmul 128 64 128`); a later one names only what the
                                previous output does not fix: `matmul N` (the output
                                is its lhs), `softmax [D]`, `bias [D]`, `relu`,
                                `add`, `mul`, `max D`, `sum D`; after a conv (its
                                --stride, --pad, --layout, --groups in its step), `bias` is one
                                per channel and `add` a residual. Examples:
                                chain 'matmul 128 64 128 | softmax | matmul 64'
                                chain 'matmul 256 256 256 | bias | relu'
                                chain 'conv 1 16 20 20 32 3 3 --pad 1 | bias | relu'

examples:
  morello synth matmul 64 64 64          print the cheapest Impl tree with costs
  morello emit matmul 7 13 97 > k.c      print the C source (AVX2 intrinsics)
  morello run matmul 8 8 8 --batch 4     build, run on random inputs, check against numpy
  morello bench matmul 64 64 64 --json   ... and time it inside C (best of repeats)
  morello bench add 512 1024             an elementwise add, next to numpy
  morello bench max 512 1024 --dim 1     row maxima
  morello bench softmax 128 1024         row softmax (decomposed by the search)
  morello bench attention 128 64         the attention chain (fused by the search)
  morello bench conv 1 64 56 56 64 3 3 --pad 1   a ResNet 3x3 layer, next to im2col+numpy
  morello bench conv 1 128 56 56 128 3 3 --pad 1 --groups 128   a MobileNet depthwise layer
  morello run chain 'matmul 64 32 64 | relu'   a matmul with its relu fused
  morello bench matmul 1 2048 16384 --dtypes f32,bf16,f32   x @ W, bf16 weights W
  morello bench matmul 1 2048 16384 --dtypes f32,bf16,f32 --rhs-layout cm
                                         the same with W stored 16384x2048 (gemma.cpp)
  morello run matmul 64 64 64 --dtypes u8,s8,s32     an exact integer matmul
  morello bench matmul 256 256 256 --dtypes u8,s8,s32 --saturate   vpmaddubsw's
  morello db stats                       what the database holds
  morello db check                       verify every page of the database
  morello db merge a.sqlite b.sqlite -o all.sqlite   combine databases
  morello calibrate                      measure the cost model's constants on this host

Results of every search are kept in a database (default:
$XDG_CACHE_HOME/morello/results-v12.sqlite) and reused by later searches, for any
shape; --db chooses another file. One file holds results for every target, thread
count, set of cost constants and version of the action table, each apart. Several
processes may search into one file at once; a read-only file answers what it holds.

Numbers are ASCII decimal integers (no Unicode digits, '_' or spaces). A Spec may have at
most 2^50 points (the product of its sizes): beyond that the cost model's costs would
overflow. A program too large for this machine's memory can be synthesized and emitted
(with a note); run and bench refuse it before searching.
"""

OPS = (*OPERATIONS, "attention", "chain")
# The operations a chain may start with, as the kind table says (a fill reads nothing).
CHAIN_OPS = tuple(name for name, (kind, _) in OPERATIONS.items()
                  if chain_step_reason(kind, innermost=True) is None)


def _int(text: str) -> int:
    try:
        return limits.parse_int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _int_list(text: str) -> list[int]:
    return [_int(t) for t in text.split(",")]


def _float(text: str) -> float:
    try:
        return limits.parse_float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("op", choices=OPS, metavar="OP",
                   help=f"the operation: {', '.join(OPS)} (see `morello --help`)")
    p.add_argument("sizes", nargs="+", metavar="SIZE",
                   help="matmul: M K N; conv: N C H W F KH KW; attention: SEQ DIM; "
                        "chain: its steps (see "
                        "`morello --help`); the others: the tensor's 1 to 4 sizes")
    p.add_argument("--batch", type=_int, default=1, metavar="B",
                   help="matmul only: B independent matmuls (default 1)")
    p.add_argument("--dim", type=_int, default=None, metavar="D",
                   help="max, sum: the dim reduced (negative counts from the end); "
                        "broadcast: the dim repeated; softmax: the dim normalized "
                        "(default: the last)")
    p.add_argument("--value", type=_float, default=0.0, metavar="V",
                   help="fill only: the value, 0 or -inf (write --value=-inf; default 0)")
    p.add_argument("--stride", type=_int, default=1, metavar="S",
                   help="conv only: the stride of both spatial dims (default 1)")
    p.add_argument("--pad", type=_int, default=0, metavar="P",
                   help="conv only: zero padding on each side of both spatial dims "
                        "(default 0)")
    p.add_argument("--groups", type=_int, default=1, metavar="G",
                   help="conv only: 1 (default) or C, a depthwise conv (one filter per "
                        "channel: F = C, weight Cx1xKHxKW in either layout)")
    p.add_argument("--layout", default="nchw", choices=("nchw", "nhwc"),
                   help="conv only: NCHW image and output, OIHW weights (default, as "
                        "torch), or nhwc: channels-last image and output, HWIO weights")
    p.add_argument("--dtype", default="f32",
                   help="element type of every operand: f32 (default), bf16, u8, s8, s16, "
                        "s32")
    p.add_argument("--dtypes", default=None, metavar="D,D,D",
                   help="matmul only: one dtype per operand (lhs,rhs,out), e.g. f32,bf16,f32 "
                        "(bf16 weights) or u8,s8,s32; inputs must widen exactly into the "
                        "output's dtype")
    p.add_argument("--saturate", action="store_true",
                   help="matmul with --dtypes u8,s8,s32 only: vpmaddubsw's product (each "
                        "k-pair's sum saturated to s16; never for u8 values < 128), faster "
                        "than the exact one")
    p.add_argument("--rhs-layout", default="rm", choices=("rm", "cm"),
                   help="matmul only: rhs row-major (rm, default) or column-major (cm: "
                        "the rows of a W[N x K] dotted with lhs, gemma's matvec)")
    p.add_argument("--target", default="avx2",
                   help="target ISA: avx2 (default), avx512 (16-lane register tiles; "
                        "run and bench need a CPU with avx512f), or native (avx512 where "
                        "this CPU has it, else avx2)")
    p.add_argument("--db", metavar="PATH", default=None,
                   help="database file to read and extend (default: "
                        "$XDG_CACHE_HOME/morello/results-v12.sqlite); a read-only file is "
                        "read, and new results are then kept in memory only")
    p.add_argument("--threads", type=_int, default=1, metavar="N",
                   help="threads: parallel loops are searched and run on N OpenMP "
                        f"threads (1 to {limits.MAX_THREADS}; default 1: serial code)")
    _add_calibration_arg(p)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _add_calibration_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", metavar="PATH", default=None,
                   help="cost constants: a file written by `morello calibrate`, or 'builtin' "
                        "(default: $MORELLO_CALIBRATION, else the file `morello calibrate` "
                        "wrote, if any, else this host's own, fitted on first use in a few "
                        "seconds and kept)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="morello",
        description="Synthesize the provably cheapest AVX2 C kernel for a tensor Spec "
                    "(under morello's affine cost model), then build, verify and time it.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    from morello import __version__

    parser.add_argument("--version", action="version", version=f"morello {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("synth", help="print the optimal Impl tree, one line per node "
                       "with its Spec and cost")
    _add_spec_args(p)
    p = sub.add_parser("emit", help="print the C source of the optimal Impl")
    _add_spec_args(p)
    p.add_argument("--name", metavar="NAME", default=None,
                   help="emit C to embed: one exported function `int NAME(...)` (no timing "
                        "harness, every helper static), so several kernels link into one "
                        "program")
    p.add_argument("--header", metavar="FILE", default=None,
                   help="with --name: also write a header declaring NAME (for C and C++) "
                        "to FILE")
    p = sub.add_parser("run", help="build with the host C compiler, run on random inputs "
                       "and check against numpy (exit 0 only if it matches)")
    _add_spec_args(p)
    p = sub.add_parser("bench", help="synthesize, build, verify and time the kernel")
    _add_spec_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--repeats", type=_int, default=7, metavar="R",
                   help=f"timed repeats (1 to {limits.MAX_REPEATS}; default 7)")
    p = sub.add_parser(
        "db", help="inspect, verify or merge results databases",
        description="The results database is a SQLite file of pages of solved Specs, one "
                    "context per target, cost constants and action table. "
                    "`stats` reports what it holds and how the last search used it; "
                    "`check` verifies every page and exits 2 if any is bad; `merge` "
                    "combines databases (say, of searches run on several machines) into "
                    "one.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  morello db stats\n  morello db stats --db my.sqlite --json\n"
               "  morello db check --db shipped.sqlite\n"
               "  morello db merge a.sqlite b.sqlite -o all.sqlite")
    dbsub = p.add_subparsers(dest="what", metavar="ACTION")
    q = dbsub.add_parser("stats", help="pages, boxes, Specs covered, bytes and the last "
                         "search's page-cache figures, per context")
    q.add_argument("--db", metavar="PATH", default=None,
                   help="the database (default: the user cache's)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q = dbsub.add_parser("check", help="verify the file and every page in it "
                         "(exit 0 if sound, 2 naming the first bad page)")
    q.add_argument("--db", metavar="PATH", default=None,
                   help="the database (default: the user cache's)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q = dbsub.add_parser("merge", help="merge databases into one (-o), validating each")
    q.add_argument("inputs", nargs="+", metavar="DB", help="databases to read")
    q.add_argument("-o", "--output", metavar="PATH", required=True,
                   help="the database to write (created if absent, else extended)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    p = sub.add_parser(
        "calibrate", help="measure the cost model's constants on this machine",
        description="Time microbenchmarks of the kernels and memory levels on this host "
                    "(about 4-15 s a run, 3 runs by default), print them, and write the "
                    "cost constants (in units of a quarter of a vector FMA at peak) to a "
                    "calibration file that later searches use (without it, a search fits "
                    "the constants on first use, more roughly). "
                    "Results of searches under other constants go to another database.")
    p.add_argument("--target", default="avx2",
                   help="target ISA: avx2 (default), avx512, or native (the widest this "
                        "CPU runs)")
    p.add_argument("--out", metavar="PATH", default=None,
                   help="file to write (default: $XDG_CONFIG_HOME/morello/"
                        "calibration-<target>.json)")
    p.add_argument("--dry-run", action="store_true", help="measure and print; write nothing")
    p.add_argument("--quick", action="store_true",
                   help="a twentieth of the measuring time (rougher constants; for tests)")
    p.add_argument("--runs", type=_int, default=3, metavar="R",
                   help="measure R times and keep each constant's median (default 3)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_precompute_parser(sub)
    return parser


def _progress(quiet: bool):
    if quiet:
        return None
    from morello.search import StderrProgress

    return StderrProgress()


def _spec(args):
    """The Spec the command line names; flags a kind has no parameter for are refused."""
    from morello.api import OPERATIONS

    op = args.op
    if op in ("attention", "chain"):
        return _chain_spec(args)
    args.sizes = [_size_arg(t) for t in args.sizes]
    kind, make = OPERATIONS[op]
    params = kind.info.params
    kw = dict(dtype=args.dtype, target=args.target, serial=args.threads == 1)
    conv_flags = args.stride != 1 or args.pad != 0 or args.layout != "nchw" \
        or args.groups != 1
    if op == "conv":
        if len(args.sizes) != 7:
            raise MorelloError(f"conv takes seven sizes N C H W F KH KW, got {len(args.sizes)}")
        if args.batch != 1 or args.dtypes is not None or args.rhs_layout != "rm" \
                or args.saturate or args.dim is not None or args.value != 0.0:
            raise MorelloError("conv takes --stride, --pad, --layout and --groups (the batch "
                               "is N)")
        return make(*args.sizes, stride=args.stride, pad=args.pad, layout=args.layout,
                    groups=args.groups, **kw)
    if conv_flags:
        raise MorelloError("--stride, --pad, --layout and --groups are for conv only")
    if op == "matmul":
        if len(args.sizes) != 3:
            raise MorelloError(f"matmul takes three sizes M K N, got {len(args.sizes)}")
        return make(*args.sizes, batch=args.batch, dtypes=args.dtypes,
                    rhs_layout=args.rhs_layout, saturate=args.saturate, **kw)
    if op == "transpose":
        if len(args.sizes) != 2:
            raise MorelloError(f"transpose takes two sizes M N, got {len(args.sizes)}")
        if args.dtypes is not None or args.rhs_layout != "rm" or args.saturate \
                or args.dim is not None or args.value != 0.0:
            raise MorelloError("transpose takes --batch only")
        return make(*args.sizes, batch=args.batch, **kw)
    if args.batch != 1:
        raise MorelloError("--batch is for matmul and transpose only")
    if args.dtypes is not None or args.rhs_layout != "rm" or args.saturate:
        raise MorelloError("--dtypes, --rhs-layout and --saturate are for matmul only")
    if "dim" in params:
        if args.dim is None and op in ("softmax", "bias", "channel-bias"):
            args.dim = {"softmax": -1, "bias": -2, "channel-bias": 1}[op]
        if args.dim is None:
            raise MorelloError(f"{op} needs --dim D (see `morello --help`)")
        kw["dim"] = args.dim
    elif args.dim is not None:
        raise MorelloError(f"--dim is not a parameter of {op}")
    if "value" in params:
        kw["value"] = args.value
    elif args.value != 0.0:
        raise MorelloError(f"--value is not a parameter of {op}")
    return make(*args.sizes, **kw)


def _size_arg(text: str) -> int:
    try:
        return limits.parse_int(text)
    except ValueError as e:
        raise MorelloError(f"argument SIZE: {e}") from None


# A later chain step: operation -> how many sizes it takes (matmul N; softmax, max, sum
# a dim).
_STEP_ARGS = {"matmul": (1, 1), "softmax": (0, 1), "bias": (0, 1), "relu": (0, 0),
              "add": (0, 0),
              "mul": (0, 0), "max": (1, 1), "sum": (1, 1)}


def _chain_spec(args):
    """``attention SEQ DIM`` or ``chain 'STEP | STEP ...'`` as a Compose Spec."""
    import morello

    for flag, default in (("batch", 1), ("dim", None), ("value", 0.0), ("dtypes", None),
                          ("rhs_layout", "rm"), ("saturate", False), ("stride", 1),
                          ("pad", 0), ("layout", "nchw")):
        if getattr(args, flag) != default:
            raise MorelloError(f"--{flag} is not a parameter of {args.op}")
    kw = dict(dtype=args.dtype, target=args.target, serial=args.threads == 1)
    if args.op == "attention":
        if len(args.sizes) != 2:
            raise MorelloError(f"attention takes two sizes SEQ DIM, got {len(args.sizes)}")
        seq, dim = (_size_arg(t) for t in args.sizes)
        return morello.attention(seq, dim, **kw)
    text = " ".join(args.sizes)
    parts = [p.split() for p in text.split("|")]
    if len(parts) < 2 or any(not p for p in parts):
        raise MorelloError("a chain is 'STEP | STEP ...' with at least two steps, e.g. "
                           "'matmul 128 64 128 | softmax' (see `morello --help`)")
    first, *rest = parts
    if first[0] not in CHAIN_OPS:
        what = "cannot start a chain" if first[0] in OPS else "unknown operation in the chain"
        if first[0] in OPERATIONS:  # say why, as the kind table does
            what += f": {chain_step_reason(OPERATIONS[first[0]][0], innermost=True)}"
        raise MorelloError(f"{first[0][:40]!r}: {what} (one of {', '.join(CHAIN_OPS)})")
    sub = argparse.Namespace(**vars(args))
    sub.op, sub.sizes = first[0], []
    words = iter(first[1:])
    for w in words:  # the first step may carry its flags (a conv's --stride, --pad, ...)
        flag, eq, val = w.partition("=")
        if flag in ("--dim", "--batch", "--value", "--stride", "--pad", "--layout",
                    "--groups"):
            val = val if eq else next(words, "")
            try:
                setattr(sub, flag[2:], val if flag == "--layout" else
                        limits.parse_float(val) if flag == "--value" else limits.parse_int(val))
            except ValueError as e:
                raise MorelloError(f"{flag} in the chain: {e}") from None
        else:
            sub.sizes.append(w)
    if not sub.sizes:
        raise MorelloError(f"the chain's first step {first[0]} needs its sizes")
    steps = [_spec(sub)]
    conv = first[0] == "conv"
    for step in rest:
        name, nums = step[0], [_size_arg(t) for t in step[1:]]
        if name not in _STEP_ARGS:
            raise MorelloError(f"{name[:40]!r} cannot be a later chain step (one of "
                               f"{', '.join(_STEP_ARGS)})")
        lo, hi = _STEP_ARGS[name]
        if not lo <= len(nums) <= hi:
            want = "no size" if hi == 0 else ("N" if name == "matmul" else "a dim D")
            raise MorelloError(f"chain step {name} takes {want}, got {len(nums)} sizes")
        shape = steps[-1].output.shape
        if name == "matmul":
            if len(shape) not in (2, 3):
                raise MorelloError("chain step matmul reads a matrix (or a batch of them), "
                                   f"got a tensor of {len(shape)} dims")
            b, m, k = (1, *shape) if len(shape) == 2 else shape
            steps.append(morello.matmul(m, k, nums[0], batch=b, **kw))
        elif name == "bias" and conv:  # a conv's bias: one per output channel
            steps.append(morello.channel_bias(*shape, dim=nums[0] if nums else 1, **kw))
        elif name in ("softmax", "max", "sum", "bias"):
            make = {"softmax": morello.softmax, "max": morello.reduce_max,
                    "sum": morello.reduce_sum, "bias": morello.add_bias}[name]
            default = -2 if name == "bias" else -1
            steps.append(make(*shape, dim=nums[0] if nums else default, **kw))
        else:
            make = {"relu": morello.relu, "add": morello.add, "mul": morello.mul}[name]
            steps.append(make(*shape, **kw))
        if conv and sub.layout == "nhwc":
            steps[-1] = morello.channels_last(steps[-1])
    return morello.chain(*steps)


def _program(args, run: bool = False):
    """Synthesize the command's Spec. ``run``: the program is to be run here, so a Spec
    whose operands cannot fit in memory is refused before the search."""
    import morello

    limits.check_threads(args.threads)
    if hasattr(args, "repeats"):
        limits.check_repeats("--repeats", args.repeats)
    spec = _spec(args)
    if run:
        limits.check_runnable(3 * sum(o.bytes for o in spec.operands), spec.logical_str())
    import warnings

    from morello.api import DatabaseWarning

    quiet = args.quiet or getattr(args, "json", False)
    progress = _progress(quiet)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DatabaseWarning)
            prog = morello.synthesize(spec, target=args.target, db=args.db,
                                      progress=progress, threads=args.threads,
                                      calibration=args.calibration)
    finally:
        if progress is not None:
            progress.close()
    for w in caught:
        if issubclass(w.category, DatabaseWarning):
            print(f"morello: note: {w.message}", file=sys.stderr)
    reason = prog.too_large_to_run()
    if run and reason:
        raise MorelloError(f"the program {reason}: it can be synthesized and emitted, "
                           "not run here")
    if reason:
        print(f"morello: note: the program {reason}: it can be emitted, not run here",
              file=sys.stderr)
    return prog


def cmd_synth(args) -> int:
    prog = _program(args)
    print(prog.impl.pformat())
    return 0


def cmd_emit(args) -> int:
    from morello.codegen import check_name, emit_c, emit_header

    if args.header is not None and args.name is None:
        raise MorelloError("--header needs --name (the function it declares)")
    if args.name is not None:
        check_name(args.name)
    if args.header is not None:
        from pathlib import Path

        _check_writable_file(Path(args.header))
    prog = _program(args)
    if args.name is None:
        sys.stdout.write(prog.c_source)
        return 0
    src = emit_c(prog.impl, prog.target, threads=prog.target.processors, name=args.name)
    if args.header is not None:
        try:
            Path(args.header).write_text(emit_header(prog.impl, args.name))
        except OSError as e:
            raise MorelloError(f"cannot write {args.header}: {e.strerror or e}") from None
    sys.stdout.write(src)
    return 0


def _need_compiler() -> None:
    from morello.codegen.build import find_compiler

    find_compiler()


def cmd_run(args) -> int:
    _need_compiler()
    prog = _program(args, run=True)
    fn = prog.compile()
    ok, err = prog.verify(fn)
    print(f"{prog.spec.logical_str()}: {'matches numpy' if ok else 'MISMATCH'} "
          f"(max abs error {err:.3g})")
    return 0 if ok else 1


def cmd_bench(args) -> int:
    _need_compiler()
    prog = _program(args, run=True)
    fn = prog.compile()
    ok, err = prog.verify(fn)
    flops = prog.spec.flops()
    nbytes = sum(o.bytes for o in prog.spec.operands)
    result = {
        "spec": prog.spec.logical_str(),
        "threads": prog.target.processors,
        "target": prog.target.name,
        "constants": calibration_source(prog.target.name.split("-")[0],
                                        getattr(args, "calibration", None)),
        "cost": prog.cost,
        "verified": ok,
        "max_abs_error": err,
        "synthesis_seconds": prog.synthesis_seconds,
        "specs_solved": prog.stats.specs_solved,
        "logical_specs": prog.stats.logical_specs,
    }
    if ok:
        ins = prog.random_inputs()
        secs = timing.seconds(fn, ins, args.repeats)
        # numpy on as many threads as morello's program, so that the two columns compare
        # kernels, not core counts.
        with timing.numpy_blas(prog.target.processors) as blas:
            np_secs = timing.numpy_seconds(prog.spec, ins, args.repeats)
        result.update(seconds_per_call=secs, gflops=flops / secs / 1e9,
                      gbytes_per_s=nbytes / secs / 1e9,
                      numpy_seconds_per_call=np_secs, numpy_gflops=flops / np_secs / 1e9,
                      numpy_gbytes_per_s=nbytes / np_secs / 1e9,
                      numpy_blas=" ".join(str(blas[k]) for k in ("library", "version")
                                          if blas[k]) or "unknown",
                      numpy_blas_kernel=blas["kernel"] or "unknown",
                      numpy_threads=blas["threads"] or "unknown")
    else:
        result.update(seconds_per_call=None, gflops=None)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            if k == "target" and (gloss := _target_gloss(prog.target)):
                v = f"{v} ({gloss})"
            print(f"{k:24} {v:.6g}" if isinstance(v, float) else f"{k:24} {v}")
    return 0 if ok else 1


def _target_gloss(t) -> str:
    """What a target variant's suffix means, for a reader of ``bench``'s table."""
    if t.gl_in_llc:
        return "the operands fit the last-level cache: main memory priced as L3"
    if t.gl_in_dram:
        return ("the operands exceed the last-level cache: main memory priced as DRAM, "
                "writes with their write-back")
    return ""


def cmd_db(args) -> int:
    from pathlib import Path

    from morello import db as dbmod

    if args.what is None:
        raise MorelloError("db needs an action: stats, check or merge "
                           "(see `morello db --help`)")
    if args.what == "merge":
        result = dbmod.merge([Path(p) for p in args.inputs], Path(args.output))
    else:
        path = Path(args.db) if args.db else dbmod.default_path()
        result = dbmod.stats(path) if args.what == "stats" else dbmod.check(path)
        shipped = dbmod.shipped_path()
        if args.what == "stats" and shipped is not None and shipped.resolve() != path.resolve():
            result["shipped"] = dbmod.stats(shipped)  # read under the user's
    if args.json:
        print(json.dumps(result))
    elif args.what == "stats":
        for title, r in (("", result), ("shipped database (read-only, under it)",
                                        result.get("shipped"))):
            if r is None:
                continue
            if title:
                print(title)
            for k, v in r.items():
                if k not in ("contexts", "shipped"):
                    print(f"{k:24} {v}")
            by_target: dict[str, list] = {}
            for c in r["contexts"]:  # a context per table family: summed per target
                by_target.setdefault(c["target"], []).append(c)
            for target_key, cs in by_target.items():
                total = {k: sum(c[k] for c in cs)
                         for k in ("pages", "boxes", "specs_covered", "roots")}
                print(f"target {target_key}: {len(cs)} families, {total['pages']} pages, "
                      f"{total['boxes']} boxes, {total['specs_covered']} Specs covered, "
                      f"{total['roots']} roots")
            if by_target:
                print("(each family's context: --json)")
    else:
        for k, v in result.items():
            print(f"{k:24} {v}")
    return 0


def cmd_calibrate(args) -> int:
    from pathlib import Path

    from morello import calibrate, costs
    from morello.memory import target_named

    target = target_named(args.target)
    if not 1 <= args.runs <= 100:
        raise MorelloError(f"--runs must be from 1 to 100, got {args.runs}")
    path = Path(args.out) if args.out else costs.default_path(target.name)
    if not args.dry_run:
        _check_writable_file(path)
    result = calibrate.run(target,
                           progress=None if args.json else lambda m: print(m, file=sys.stderr),
                           quick=args.quick, runs=args.runs)
    if not args.dry_run:
        costs.save(path, target.name, result.constants, result.measured_ns, result.host)
    if args.json:
        print(json.dumps({"constants": result.constants.to_json(),
                          "measured_ns": result.measured_ns,
                          "path": None if args.dry_run else str(path)}))
    else:
        print(result.table())
        if not args.dry_run:
            print(f"wrote {path}; later searches use these constants (their results go "
                  f"to databases keyed {target.name}@{result.constants.fingerprint()})")
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
            "db": cmd_db, "calibrate": cmd_calibrate, "precompute": cmd_precompute}


def _interrupt_on(*signums: int) -> None:
    """Make these signals stop the command like Ctrl-C (a search then saves what it
    solved before exiting)."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    for signum in signums:
        try:
            signal.signal(signum, handler)
        except (ValueError, OSError):  # not the main thread, or not on this platform
            pass


def main(argv: list[str] | None = None) -> int:
    import signal

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        print("morello: error: give a command: synth, emit, run, bench, db, calibrate or "
              "precompute "
              "(see `morello --help`)", file=sys.stderr)
        return 2
    _interrupt_on(signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else []))
    try:
        return COMMANDS[args.command](args)
    except MorelloError as e:
        print(f"morello: error: {e}", file=sys.stderr)
        return 2
    except sqlite3.Error as e:  # a database fault the store did not name (a bug of ours)
        print(f"morello: error: database error: {str(e)[:200]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nmorello: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
