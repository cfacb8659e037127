"""Compose chains: morello, numpy and (when importable) torch, side by side in one run on
one thread, with the search's program next to the unfused one and a hand-fused one.

    OPENBLAS_NUM_THREADS=1 python benchmarks/chains.py [--rounds 7] [--only NAME]
        [--target avx512]

Chains: attention ``softmax(Q @ Kt) @ V`` at SEQ×DIM 128×64 and 512×64,
``relu(A @ B + bias)`` at 256³, and a row softmax of a matmul (128×64×128).

For each chain, every program is verified against numpy first, then timed:

- ``search``: what ``morello.synthesize`` chose (timed inside C, best of rounds);
- ``unfused``: the same chain with every intermediate whole in main memory
  (``Bufferize(0, GL)`` at every split; the rest searched): the separately optimal
  programs of each step, one after the other;
- ``fused``: a loop over rows of the output (16 at a time, fewer if L1 cannot hold the
  tiles), every intermediate tile in L1
  (hand-chosen, the rest searched): what a fusing compiler would write;
- numpy (the steps as numpy expressions into preallocated arrays) and torch
  (``torch.softmax``/``torch.relu`` over ``torch.matmul``; for attention also
  ``scaled_dot_product_attention`` with scale 1) through Python.

Timing: every contender once per round (C: best of 3 batches of ~20 ms; Python the
same), ``--rounds`` interleaved rounds; the table gives the median time of each and the
median over rounds of each ratio, so a neighbour's load on a shared machine hits all
contenders alike.

The model cost of each morello program is printed beside its time, so a reader can see
whether the model ranks fused against unfused the way this machine does.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

# One thread for numpy's OpenBLAS (before numpy loads it), whatever the caller's environment.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from timers import c_timer, optional_torch, py_timer  # noqa: E402

import morello  # noqa: E402
from morello import Bufferize, TileOut  # noqa: E402
from morello.memory import Level  # noqa: E402


def _softmax_rows(x):
    y = x - x.max(-1, keepdims=True)
    np.exp(y, out=y)
    y /= y.sum(-1, keepdims=True)
    return y


def chains(torch, target: str):
    """(name, Spec, numpy function, torch function or None, splits) per chain."""
    out = []
    t = {"target": target}
    for seq, dim in ((128, 64), (512, 64)):
        spec = morello.attention(seq, dim, **t)

        def np_att(v, q, kt):
            return _softmax_rows(q @ kt) @ v

        t_att = None
        if torch is not None:
            def t_att(v, q, kt):
                return torch.matmul(torch.softmax(torch.matmul(q, kt), -1), v)
        out.append((f"attention {seq}×{dim}", spec, np_att, t_att, 2))
    n = 256
    spec = morello.chain(morello.matmul(n, n, n, **t), morello.add_bias(1, n, n, **t),
                         morello.relu(1, n, n, **t))

    def np_mbr(bias, a, b):
        y = a @ b
        y += bias
        return np.maximum(y, 0, out=y)

    t_mbr = None
    if torch is not None:
        def t_mbr(bias, a, b):
            return torch.relu(torch.addmm(bias[0], a[0], b[0]))
    out.append((f"matmul+bias+relu {n}³", spec, np_mbr, t_mbr, 2))
    spec = morello.chain(morello.matmul(128, 64, 128, **t), morello.softmax(128, 128, **t))
    t_sm = None
    if torch is not None:
        def t_sm(a, b):
            return torch.softmax(torch.matmul(a, b), -1)
    out.append(("softmax(matmul) 128×64×128", spec,
                lambda a, b: _softmax_rows(a @ b), t_sm, 1))
    return out


def _fused(spec, splits: int, db, target: str):
    """The chain over tiles of 16 output rows (fewer when L1 cannot hold the tiles),
    every intermediate tile in L1."""
    for rows in (16, 8, 4, 2, 1):
        try:
            return morello.schedule(spec, [TileOut(1, rows)] + [Bufferize(0, Level.L1)] * splits,
                                    target=target, db=db)
        except morello.MorelloError:
            continue
    raise AssertionError("no fused schedule fits L1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default=None, help="run the chains whose name contains this")
    ap.add_argument("--target", default="avx2", help="avx2 (default) or avx512")
    args = ap.parse_args()
    torch = optional_torch()
    print(f"target {args.target}; torch: "
          f"{'not importable' if torch is None else torch.__version__}\n")
    print("| chain | search µs (cost) | unfused µs (cost) | fused µs (cost) | numpy µs | "
          "torch µs | torch SDPA µs | numpy/morello | best torch/morello | search s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    trees = []
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "chains.sqlite")
        for name, spec, np_fn, t_fn, splits in chains(torch, args.target):
            if args.only and args.only not in name:
                continue
            t0 = time.perf_counter()
            best = morello.synthesize(spec, target=args.target, db=db)
            search = time.perf_counter() - t0
            unfused = morello.schedule(spec, [Bufferize(0, Level.GL)] * splits,
                                       target=args.target, db=db)
            fused = _fused(spec, splits, db, args.target)
            ins = best.random_inputs(seed=1)
            want = np_fn(*ins)
            out = np.empty(spec.output.shape, np.float32)
            # name -> a function that times one batch of calls: seconds per call.
            timers = {}
            costs = []
            for label, prog in (("search", best), ("unfused", unfused), ("fused", fused)):
                fn = prog.compile()
                ok, err = prog.verify(fn)
                assert ok, f"{name}: does not match numpy ({err})"
                np.testing.assert_allclose(fn(*ins), want, rtol=1e-4, atol=1e-5)
                timers[label] = c_timer(fn, ins, out)
                costs.append(prog.cost)
            timers["numpy"] = py_timer(lambda f=np_fn, a=ins: f(*a))
            if t_fn is not None:
                tins = [torch.from_numpy(x) for x in ins]
                timers["torch"] = py_timer(lambda f=t_fn, a=tins: f(*a))
                if name.startswith("attention"):
                    v, q, kt = tins
                    k = kt.transpose(-1, -2).contiguous()
                    f = torch.nn.functional.scaled_dot_product_attention
                    timers["sdpa"] = py_timer(lambda f=f, q=q, k=k, v=v: f(q, k, v, scale=1.0))
            # Interleaved rounds (every contender once per round), medians over rounds:
            # a neighbour's load on this shared machine hits all of them alike.
            times: dict[str, list[float]] = {k: [] for k in timers}
            for _ in range(args.rounds):
                for k, timer in timers.items():
                    times[k].append(timer())
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio = {k: statistics.median(a / b for a, b in zip(times[k], times["search"]))
                     for k in times}
            cells = " | ".join(f"{med[k] * 1e6:.1f} ({c:,})"
                               for k, c in zip(("search", "unfused", "fused"), costs))
            t_best = min((ratio[k] for k in ("torch", "sdpa") if k in ratio), default=None)
            print(f"| {name} | {cells} | {med['numpy'] * 1e6:.1f} | "
                  f"{med['torch'] * 1e6:.1f} | " if "torch" in med else
                  f"| {name} | {cells} | {med['numpy'] * 1e6:.1f} | - | ", end="")
            print(f"{med['sdpa'] * 1e6:.1f} | " if "sdpa" in med else "- | ", end="")
            print(f"{ratio['numpy']:.2f}× | "
                  f"{'-' if t_best is None else f'{t_best:.2f}×'} | {search:.1f} |",
                  flush=True)
            trees.append((name, best.impl.pformat()))
    for name, tree in trees:
        lines = tree.splitlines()
        print(f"\nThe program the search chose for {name} (first 12 of {len(lines)} lines):")
        print("\n".join(lines[:12]))


if __name__ == "__main__":
    main()
