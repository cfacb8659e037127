"""Convolutions: morello's programs next to im2col + numpy's matmul and torch's conv2d, on
one thread, with the FMA peak of each target's vectors measured in the same rounds.

    python benchmarks/conv.py [--rounds 5] [--layers stem 3x3 1x1 3x3s2 7x7 tiny dw dws2 dw112]
                              [--targets avx2 avx512] [--layout nchw nhwc]
                              [--torch-isa avx2|native]

Each morello program is synthesized, verified against numpy first, and timed inside C
into one output array; im2col + numpy (the windows gathered into a matrix, one BLAS
matmul, the output reordered to NCHW; not for the depthwise layers) and torch (NCHW
tensors, and channels_last: the same channels-last image morello's program reads) are
timed through Python, each checked against numpy first.
The depthwise layers (``groups = C``, MobileNet's) keep torch's ``C x 1 x KH x KW``
weights in both layouts. All
timers run in each of ``--rounds`` interleaved rounds; the table gives medians, GFLOP/s,
the fraction of the peak, and the median per-round ratios to the peers. torch is held
to AVX2 when only AVX2 programs are timed, so that both sides use the same vector width:
its oneDNN (``ONEDNN_MAX_CPU_ISA``) and its MKL (``MKL_ENABLE_INSTRUCTIONS``: torch runs
NCHW 1x1 convs as MKL matmuls, measured at 130 % of the AVX2 peak without it);
``--torch-isa native`` lets it pick.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
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

# name -> (n, c, h, w, f, kh, kw, stride, pad, groups): ResNet-50's layers, a tiny conv,
# and MobileNet-v1's depthwise 3x3s (128 channels at 56², at stride 1 and 2; 32 at 112²).
LAYERS = {
    "stem": (1, 3, 224, 224, 64, 7, 7, 2, 3, 1),
    "3x3": (1, 64, 56, 56, 64, 3, 3, 1, 1, 1),
    "1x1": (1, 256, 56, 56, 64, 1, 1, 1, 0, 1),
    "3x3s2": (1, 128, 56, 56, 128, 3, 3, 2, 1, 1),
    "7x7": (1, 512, 7, 7, 512, 3, 3, 1, 1, 1),
    "tiny": (1, 4, 32, 32, 8, 3, 3, 1, 1, 1),
    "dw": (1, 128, 56, 56, 128, 3, 3, 1, 1, 128),
    "dws2": (1, 128, 56, 56, 128, 3, 3, 2, 1, 128),
    "dw112": (1, 32, 112, 112, 32, 3, 3, 1, 1, 32),
}


def im2col_numpy(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """The classic lowering in numpy: every window a row of one matrix, one matmul."""
    n, c, _, _ = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]  # [n, c, oh, ow, kh, kw]
    oh, ow = win.shape[2:4]
    cols = np.ascontiguousarray(win.transpose(0, 2, 3, 1, 4, 5)).reshape(n * oh * ow, -1)
    out = cols @ w.reshape(f, -1).T
    return np.ascontiguousarray(out.reshape(n, oh, ow, f).transpose(0, 3, 1, 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--layers", nargs="+", choices=sorted(LAYERS), default=list(LAYERS))
    ap.add_argument("--targets", nargs="+", choices=sorted(TARGETS),
                    help="default: avx2, and avx512 where the host runs it")
    ap.add_argument("--layout", nargs="+", choices=("nchw", "nhwc"), default=["nchw", "nhwc"])
    ap.add_argument("--torch-isa", choices=("avx2", "native"),
                    help="the widest ISA torch's oneDNN and MKL may use (default: avx2 when only "
                         "avx2 programs are timed, else native)")
    args = ap.parse_args()
    targets = args.targets or [t for t in ("avx2", "avx512") if host_lacks(TARGETS[t]) is None]
    torch_isa = args.torch_isa or ("avx2" if targets == ["avx2"] else "native")
    if torch_isa == "avx2":
        hold_torch_to_avx2()
    # One core's FMA peak in each timed target's vectors; peers against torch's widest.
    peak_of = {t: fma_peak(TARGETS[t]) for t in {*targets, "avx2"}}
    peer_isa = "avx2" if torch_isa == "avx2" else max(
        targets, key=lambda t: max(TARGETS[t].vector_bytes))
    torch = optional_torch()
    conv = torch.nn.functional.conv2d if torch is not None else None
    rows = []
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "conv.sqlite")
        for name in args.layers:
            n, c, h, w, f, kh, kw, stride, pad, groups = LAYERS[name]
            rng = np.random.default_rng(0)
            x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
            wt = rng.uniform(-1, 1, (f, c // groups, kh, kw)).astype(np.float32)
            want = (conv2d_numpy if groups == 1 else depthwise_numpy)(x, wt, stride, pad)
            timers, searches = {}, {}
            xl = channels_last(x)  # the channels-last image both sides read
            for tgt in targets:
                for lay in args.layout:
                    t0 = time.perf_counter()
                    spec = morello.conv2d(n, c, h, w, f, kh, kw, stride=stride, pad=pad,
                                          groups=groups, layout=lay, target=tgt)
                    prog = morello.synthesize(spec, target=tgt, db=db)
                    searches[f"{tgt} {lay}"] = time.perf_counter() - t0
                    fn = prog.compile()
                    ok, err = prog.verify(fn)
                    assert ok, f"{name} {tgt} {lay} does not match numpy ({err})"
                    ins = [x, wt]
                    if lay == "nhwc":
                        ins = [xl, weights_hwio(wt) if groups == 1 else wt]
                    out = fn(*ins)
                    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
                    timers[f"morello {tgt} {lay}"] = c_timer(fn, ins, out)
            if groups == 1:
                got = im2col_numpy(x, wt, stride, pad)
                np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
                timers["im2col+numpy"] = py_timer(lambda x=x, wt=wt, s=stride, p=pad:
                                                  im2col_numpy(x, wt, s, p))
            if torch is not None:
                tx, tw = torch.from_numpy(x), torch.from_numpy(wt)
                assert np.allclose(conv(tx, tw, stride=stride, padding=pad, groups=groups).numpy(),
                                   want, rtol=1e-3, atol=1e-3)
                timers["torch nchw"] = py_timer(lambda tx=tx, tw=tw, s=stride, p=pad, g=groups:
                                                conv(tx, tw, stride=s, padding=p, groups=g))
                cx = torch.from_numpy(xl)  # channels_last already: the same memory
                assert cx.is_contiguous(memory_format=torch.channels_last)
                cw = tw.contiguous(memory_format=torch.channels_last)
                timers["torch channels_last"] = py_timer(
                    lambda cx=cx, cw=cw, s=stride, p=pad, g=groups:
                    conv(cx, cw, stride=s, padding=p, groups=g))
            flops = 2 * n * f * (c // groups) * kh * kw * want.shape[2] * want.shape[3]
            rows.append((name, flops, timers, searches))
        times, peak = interleaved_rounds([r[2] for r in rows], peak_of, args.rounds)
    print("this run: FMA peak of one core " + ", ".join(
        f"{t} {v:.1f} GFLOP/s" for t, v in sorted(peak.items())) + f", {args.rounds} rounds"
          + (f"; torch's ISA (oneDNN, MKL): {torch_isa}" if torch else "; torch not importable")
          + "\n")
    print("| layer | program | GFLOP/s | % of peak | vs im2col+numpy | vs torch nchw "
          "| vs torch channels_last | search s |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, flops, timers, searches), t in zip(rows, times):
        for k in timers:
            med = statistics.median(t[k])
            isa = k.split()[1] if k.startswith("morello") else peer_isa
            cells = [name, k, f"{flops / med / 1e9:.1f}",
                     f"{100 * flops / med / 1e9 / peak[isa]:.0f} % ({isa})"]
            for peer in ("im2col+numpy", "torch nchw", "torch channels_last"):
                if peer in t and k.startswith("morello"):
                    ratio = statistics.median(p / m for p, m in zip(t[peer], t[k]))
                    cells.append(f"{ratio:.2f}x")
                else:
                    cells.append("")
            key = k.removeprefix("morello ")
            cells.append(f"{searches[key]:.1f}" if key in searches else "")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
