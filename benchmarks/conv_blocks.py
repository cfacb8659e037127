"""CNN blocks as chains: conv -> bias -> relu and conv -> add (a residual) -> relu, each
one morello program, next to torch's ops on the same arrays, on one thread.

    python benchmarks/conv_blocks.py [--rounds 5] [--layers tiny issue 3x3 1x1 ...]
                                     [--blocks bias add] [--targets avx2 avx512]
                                     [--layout nchw nhwc] [--torch-isa avx2|native]

Each morello chain is synthesized, verified against numpy first, and timed inside C into
one output array. torch runs the block as a user writes it: ``relu(conv2d(x, w) + b)``
(three ops: ``b`` shaped ``1×F×1×1``; for the residual ``relu(conv2d(x, w) + r)``), and
as ``relu_(conv2d(x, w, bias))`` (its conv adds the bias; relu in place): two ops. Both
take NCHW tensors, and channels_last ones for the channels-last programs. All timers run
in each of ``--rounds`` interleaved rounds with the FMA peak measured then; the table
gives medians and the median per-round ratios (above 1: morello faster). torch is held
to AVX2 as in ``benchmarks/conv.py`` when only AVX2 programs are timed.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from conv import LAYERS as CONV_LAYERS
from timers import (
    c_timer,
    channels_last,
    fma_peak,
    hold_torch_to_avx2,
    interleaved_rounds,
    optional_torch,
    py_timer,
    weights_hwio,
)

import morello
from morello.kinds import conv2d_numpy, depthwise_numpy
from morello.memory import TARGETS, host_lacks

# The example (16 -> 32 at 20², pad 1) beside conv.py's layers.
LAYERS = {"issue": (1, 16, 20, 20, 32, 3, 3, 1, 1, 1), **CONV_LAYERS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--layers", nargs="+", choices=sorted(LAYERS),
                    default=["issue", "tiny", "3x3", "1x1"])
    ap.add_argument("--blocks", nargs="+", choices=("bias", "add"), default=["bias", "add"])
    ap.add_argument("--targets", nargs="+", choices=sorted(TARGETS),
                    help="default: avx2, and avx512 where the host runs it")
    ap.add_argument("--layout", nargs="+", choices=("nchw", "nhwc"), default=["nchw", "nhwc"])
    ap.add_argument("--torch-isa", choices=("avx2", "native"),
                    help="the widest ISA torch may use (default: avx2 when only avx2 "
                         "programs are timed, else native)")
    args = ap.parse_args()
    targets = args.targets or [t for t in ("avx2", "avx512") if host_lacks(TARGETS[t]) is None]
    torch_isa = args.torch_isa or ("avx2" if targets == ["avx2"] else "native")
    if torch_isa == "avx2":
        hold_torch_to_avx2()
    peak_of = {t: fma_peak(TARGETS[t]) for t in {*targets, "avx2"}}
    torch = optional_torch()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "blocks.sqlite")
        for name in args.layers:
            n, c, h, w, f, kh, kw, stride, pad, groups = LAYERS[name]
            rng = np.random.default_rng(0)
            x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
            wt = rng.uniform(-1, 1, (f, c // groups, kh, kw)).astype(np.float32)
            y = (conv2d_numpy if groups == 1 else depthwise_numpy)(x, wt, stride, pad)
            for block in args.blocks:
                other = (rng.uniform(-1, 1, (1, f, 1, 1)) if block == "bias"
                         else rng.uniform(-1, 1, y.shape)).astype(np.float32)
                want = np.maximum(y + other, 0)
                timers, searches = {}, {}
                for tgt in targets:
                    for lay in args.layout:
                        t0 = time.perf_counter()
                        spec = morello.conv_block(n, c, h, w, f, kh, kw, steps=(block, "relu"),
                                                  stride=stride, pad=pad, groups=groups,
                                                  layout=lay, target=tgt)
                        prog = morello.synthesize(spec, target=tgt, db=db)
                        searches[f"{tgt} {lay}"] = time.perf_counter() - t0
                        fn = prog.compile()
                        ok, err = prog.verify(fn)
                        assert ok, f"{name} {block} {tgt} {lay} does not match numpy ({err})"
                        ins = [other, x, wt]
                        if lay == "nhwc":
                            ins = [channels_last(other) if block == "add" else other,
                                   channels_last(x), weights_hwio(wt) if groups == 1 else wt]
                        out = fn(*ins)
                        np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
                        timers[f"morello {tgt} {lay}"] = c_timer(fn, ins, out)
                if torch is not None:
                    F = torch.nn.functional  # noqa: N806 (torch's own name)
                    for fmt, conv_in in (("nchw", None), ("channels_last", torch.channels_last)):
                        tx, tw, to = (torch.from_numpy(a) for a in (x, wt, other))
                        if conv_in is not None:
                            tx, tw = (t.contiguous(memory_format=conv_in) for t in (tx, tw))
                            if block == "add":
                                to = to.contiguous(memory_format=conv_in)

                        def three(tx=tx, tw=tw, to=to, s=stride, p=pad, g=groups, F=F):
                            return torch.relu(F.conv2d(tx, tw, stride=s, padding=p, groups=g)
                                              + to)
                        assert np.allclose(three().numpy(), want, rtol=1e-3, atol=1e-3)
                        timers[f"torch {fmt} 3 ops"] = py_timer(three)
                        if block == "bias":
                            tb = to.reshape(f)

                            def two(tx=tx, tw=tw, tb=tb, s=stride, p=pad, g=groups, F=F):
                                return F.conv2d(tx, tw, tb, stride=s, padding=p,
                                                groups=g).relu_()
                            assert np.allclose(two().numpy(), want, rtol=1e-3, atol=1e-3)
                            timers[f"torch {fmt} conv(bias)+relu_"] = py_timer(two)
                flops = 2 * n * f * (c // groups) * kh * kw * y.shape[2] * y.shape[3]
                rows.append((f"{name} +{block}", flops, timers, searches))
        times, peak = interleaved_rounds([r[2] for r in rows], peak_of, args.rounds)
    print("this run: FMA peak of one core " + ", ".join(
        f"{t} {v:.1f} GFLOP/s" for t, v in sorted(peak.items())) + f", {args.rounds} rounds"
          + (f"; torch's ISA: {torch_isa}" if torch else "; torch not importable") + "\n")
    peers = ("torch nchw 3 ops", "torch channels_last 3 ops", "torch nchw conv(bias)+relu_",
             "torch channels_last conv(bias)+relu_")
    print("| block | program | GFLOP/s (conv's flops) | vs " + " | vs ".join(peers)
          + " | search s |")
    print("|---" * (4 + len(peers)) + "|")
    for (name, flops, timers, searches), t in zip(rows, times):
        for k in timers:
            med = statistics.median(t[k])
            cells = [name, k, f"{flops / med / 1e9:.1f}"]
            for peer in peers:
                if peer in t and k.startswith("morello"):
                    cells.append(f"{statistics.median(p / m for p, m in zip(t[peer], t[k])):.2f}x")
                else:
                    cells.append("")
            key = k.removeprefix("morello ")
            cells.append(f"{searches[key]:.1f}" if key in searches else "")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
