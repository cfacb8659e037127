"""x . W by rows of bf16 weights: each row scaled by a broadcast of x and summed into the
columns of out, widened by a shift and a mask, in any f32 vector type with a bf16 pair
widening (``VecType.widen_even``/``widen_odd``): WidenAxpyLoop over up to 64 columns
and WidenAxpySweep over all of out (``rows(vt)``).
"""
from __future__ import annotations

from morello.cost import (
    move_cost,
    run_cost,
)
from morello.dtypes import Dtype
from morello.kernels.base import (
    F32,
    L1,
    MEM,
    Kernel,
    Reason,
    VecType,
    pin_widened,
)
from morello.memory import Level, Target
from morello.specs import PrimKind, Spec


def axpy_why_not(spec: Spec, block: int) -> Reason:
    """WidenAxpyLoop's rule, for vectors of ``block`` bf16."""
    b, m, k, n = spec.shape
    if (b, m) != (1, 1) or n % block or n > 64:
        return f"needs a [1,1,k]x[1,k,n] product, n a multiple of {block} up to 64"
    return _axpy_operands(spec)


def _axpy_operands(spec: Spec) -> Reason:
    """The operands of WidenAxpyLoop and WidenAxpySweep."""
    lhs, rhs, out = spec.operands
    if lhs.level is not Level.L1 or not lhs.contiguous or lhs.dtype is not Dtype.F32:
        return "lhs must be contiguous f32 in L1"
    if rhs.dtype is not Dtype.BF16 or rhs.level.counts_registers:
        return "rhs must be bf16 in memory"
    if rhs.stream_dim != 2 or rhs.contig < 1 or rhs.layout.is_packed:
        return "rhs rows must be contiguous"
    if out.level is not Level.L1 or not out.contiguous or out.dtype is not Dtype.F32:
        return "out must be a contiguous f32 row in L1"
    return None


# WidenAxpyLoop prefetches only over more rows than this (see _axpy_emit).
AXPY_PREFETCH_MIN_K = 16


def _widen_fma_row(w, rhs, nb: int, vt: VecType) -> None:
    """One row of bf16 weights at ``row`` times the broadcast ``x``, ``nb`` vectors of
    ``2 * vt.lanes`` bf16: each loaded once, its even columns (the lane shifted left by
    16) into ``e{j}``, its odd ones (the lane masked by ``hi``) into ``o{j}``."""
    block = 2 * vt.lanes
    for j in range(nb):
        w.line(f"{vt.int_type} w{j} = {vt.load_bits(f'row + {block * j}')}; "
               f"{pin_widened(rhs, f'w{j}')}")
        w.line(f"e{j} = {vt.fma}(x, {vt.widen_even(f'w{j}')}, e{j});")
        w.line(f"o{j} = {vt.fma}(x, {vt.widen_odd(f'w{j}')}, o{j});")


def axpy_emit(w, spec, ops, vt: VecType) -> None:
    """Rows of bf16 weights scaled by x and summed, widened without a shuffle: each
    32-bit lane of ``2 * vt.lanes`` loaded bf16 holds an even and an odd column, so the
    even columns accumulate the lane shifted left by 16 and the odd ones the lane masked;
    the two are interleaved back into out once, after all of k."""
    lhs, rhs, out = ops
    k, n = spec.shape[2], spec.shape[3]
    block = 2 * vt.lanes
    nb = n // block
    # Beyond the last-level cache (``OperandView.prefetch_lines``), the lines some way
    # along each row into L2, at most an eighth of a whole row of W ahead (further, they
    # land in another row; into L1 they evict what is being read).
    row_lines = rhs.ref.buffer.tensor.shape[-1] * rhs.spec.dtype.size // 64
    ahead = min(rhs.prefetch_lines, row_lines // 8)
    # And the same lines k rows below, which the enclosing split of k reads next, after
    # the rest of these rows (k whole rows of W later), where that is no further than L2
    # holds (within the LLC nothing is prefetched: there it only cost).
    whole_k = rhs.ref.buffer.tensor.shape[-2]
    below = ahead and 1 < k < whole_k and k * row_lines * 64 <= rhs.prefetch_room
    with w.block("{"):
        w.line(vt.hi_mask())
        w.line(f"const uint16_t *restrict row = {rhs.ptr(0)};")
        w.line(f"const long rs = {rhs.ptr_at((0, 1, 0)) + ' - row' if k > 1 else '0'};")
        for j in range(nb):
            w.line(f"{vt.c_type} e{j} = {vt.zeros}, o{j} = {vt.zeros};")
        with w.block(f"for (long q = 0; q < {k}; q++, row += rs) {{"):
            x = vt.splat("*" + lhs.ptr("q"))
            w.line(f"const {vt.c_type} x = {x};")
            # This row's lines four column tiles ahead, which the loop over tiles reads
            # soon, where the kernel walks a long k itself (down a column of tiles). Over
            # the few rows of a split k the tiles run along 8 rows side by side, which
            # the hardware prefetchers follow, and the prefetches only cost.
            if k > AXPY_PREFETCH_MIN_K:
                for line in range(0, 2 * n, 64):
                    w.line(vt.prefetch(f"(row + {4 * n + line // 2})", Level.L1))
            elif ahead:
                for line in range(0, 2 * n, 64):
                    w.line(vt.prefetch(f"row + {64 * ahead + line}", Level.L2))
                    if below:
                        w.line(vt.prefetch(f"(row + {k} * rs){f' + {line}' if line else ''}",
                                           Level.L2))
            _widen_fma_row(w, rhs, nb, vt)
        # Unpacking puts even and odd columns side by side per 128-bit lane, so each half
        # of the block's columns is a lane permute of the two unpacked vectors.
        for decl in vt.interleave_setup():
            w.line(decl)
        for j in range(nb):
            w.line(f"const {vt.c_type} l{j} = {vt.op('unpacklo')}(e{j}, o{j}), "
                   f"h{j} = {vt.op('unpackhi')}(e{j}, o{j});")
            for half in (0, 1):
                p = out.ptr(block * j + block // 2 * half)
                w.line(vt.storeu(p, f"{vt.add}({vt.loadu(p)}, "
                                    f"{vt.interleave(f'l{j}', f'h{j}', half)})"))


def _axpy_row_cost(nb: int, c) -> int:
    """One row of k over ``nb`` vectors of bf16 in the axpy loops: a broadcast, and per
    vector a load, a shift and a mask (half a vector move each, as in the odd/even dot
    loop) and two FMAs; at least the FMA latency (8 chains in flight), which fewer than
    64 columns do not fill."""
    return max(nb * (2 * c.fma + 2 * c.vector_move) + c.broadcast, 8 * c.fma)


def axpy_cost(s: Spec, t: Target, block: int) -> int:
    """WidenAxpyLoop's cost, for vectors of ``block`` bf16.

    Beyond the LLC, the search sweeps 4 rows of W side by side on AVX2 (Split(4) above
    TileOut(64)), not by a discount here but by the loop that sweeps whole rows
    (``cost.sweep_saving``). Three pricings here failed: a discount for k <= 4 (the rows
    side by side are the sweep's, not k: the search split 8-row sweeps into calls of 4);
    the same paid back by loops over the rows of a column tile, with this cost the larger
    of arithmetic and reads (that hid the y epilogue: Split(1), all epilogue, won, and ran
    slower); and the larger of the two with the lines priced by k (the search took
    Split(8) over TileOut(32) over Split(2) calls). The arithmetic here is priced below
    the rate the loop reaches in L1 (docs/model-notes.md)."""
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    nb = n // block
    rhs = s.operands[1]
    per_k = _axpy_row_cost(nb, c)
    mem = move_cost(rhs, t) if rhs.level is not Level.L1 else 0
    return k * per_k + nb * 4 * c.vector_move + mem


# WidenAxpySweep's rows of W a column tile takes at a time, and its tile's columns.
SWEEP_ROWS, SWEEP_COLS = 8, 64


def sweep_check(spec: Spec, target: Target) -> Reason:
    """WidenAxpyLoop's operands, with all of out (at least two column tiles) and rows of
    W in multiples of ``SWEEP_ROWS``, in a problem within the last-level cache."""
    b, m, k, n = spec.shape
    if (b, m) != (1, 1) or n % SWEEP_COLS or n < 2 * SWEEP_COLS or k % SWEEP_ROWS:
        return (f"needs a [1,1,k]x[1,k,n] product, n a multiple of {SWEEP_COLS} (two tiles "
                f"or more) and k of {SWEEP_ROWS}")
    if target.gl_in_dram:
        return "not beyond the last-level cache (WidenAxpyLoop's prefetches are there)"
    return _axpy_operands(spec)


def sweep_emit(w, spec, ops, vt: VecType) -> None:
    """out += x W over all of out: the loop nest Split(8) over TileOut(64) over
    WidenAxpyLoop, but with out's columns in even/odd order (per ``2 * vt.lanes``: the
    even ones, then the odd ones) from its first row of W to its last, so that each tile's
    accumulators are loaded from out and stored back as they are, where WidenAxpyLoop
    interleaves them (two unpacks, two lane permutes and two adds per vector of bf16,
    every 8 rows). out is put in that order before and back after, once: by two-source
    permutes where the vector type has them, else by its even/odd split and unpacks."""
    lhs, rhs, out = ops
    k, n = spec.shape[2], spec.shape[3]
    lanes = vt.lanes
    block = 2 * lanes
    nb, half = SWEEP_COLS // block, block // 2
    V = vt.c_type
    with w.block("{"):
        w.line(vt.hi_mask())
        w.line(f"float *restrict y = {out.ptr(0)};")
        w.line(f"const float *restrict xs = {lhs.ptr(0)};")
        w.line(f"const uint16_t *restrict w0 = {rhs.ptr(0)};")
        w.line(f"const long rs = {rhs.ptr_at((0, 1, 0))} - w0;")
        if vt.permutes_two:  # lane i of the even (odd) half takes column 2i (2i + 1)
            for name, first in (("ev", 0), ("od", 1)):
                idx = ", ".join(str(first + 2 * i) for i in reversed(range(lanes)))
                w.line(f"const {vt.int_type} {name} = {vt.prefix}_set_epi32({idx});")
            for name, first in (("lo16", 0), ("hi16", lanes // 2)):
                idx = ", ".join(str(first + i // 2 + lanes * (i % 2))
                                for i in reversed(range(lanes)))
                w.line(f"const {vt.int_type} {name} = {vt.prefix}_set_epi32({idx});")
        with w.block(f"for (long g = 0; g < {n}; g += {block}) {{"):
            w.line(f"const {V} v0 = {vt.loadu('y + g')}, v1 = {vt.loadu(f'y + g + {half}')};")
            w.line(vt.storeu("y + g + 0", vt.even("v0", "v1")))
            w.line(vt.storeu(f"y + g + {half}", vt.odd("v0", "v1")))
        with w.block(f"for (long kk = 0; kk < {k}; kk += {SWEEP_ROWS}) {{"):
            with w.block(f"for (long c = 0; c < {n}; c += {SWEEP_COLS}) {{"):
                w.line("const uint16_t *restrict row = w0 + kk * rs + c;")
                for j in range(nb):
                    w.line(f"{V} e{j} = {vt.loadu(f'y + c + {block * j}')}, "
                           f"o{j} = {vt.loadu(f'y + c + {block * j + half}')};")
                with w.block(f"for (long q = 0; q < {SWEEP_ROWS}; q++, row += rs) {{"):
                    w.line(f"const {V} x = {vt.splat('xs[kk + q]')};")
                    _widen_fma_row(w, rhs, nb, vt)
                for j in range(nb):
                    w.line(f"{vt.storeu(f'y + c + {block * j}', f'e{j}')} "
                           f"{vt.storeu(f'y + c + {block * j + half}', f'o{j}')}")
        with w.block(f"for (long g = 0; g < {n}; g += {block}) {{"):
            w.line(f"const {V} e = {vt.loadu('y + g')}, o = {vt.loadu(f'y + g + {half}')};")
            if vt.permutes_two:
                w.line(vt.storeu("y + g", f"{vt.op('permutex2var')}(e, lo16, o)"))
                w.line(vt.storeu(f"y + g + {lanes}", f"{vt.op('permutex2var')}(e, hi16, o)"))
            else:
                w.line(f"const {V} l = {vt.op('unpacklo')}(e, o), "
                       f"h = {vt.op('unpackhi')}(e, o);")
                w.line(vt.storeu("y + g", vt.interleave("l", "h", 0)))
                w.line(vt.storeu(f"y + g + {lanes}", vt.interleave("l", "h", 1)))


def sweep_cost(s: Spec, t: Target, block: int) -> int:
    """WidenAxpyLoop's arithmetic per tile of ``SWEEP_ROWS`` x ``SWEEP_COLS`` (vectors of
    ``block`` bf16), with a load and a store per accumulator where it prices an
    interleaving epilogue at twice that; the two reorderings of out; W's lines as the loop
    nest pays them (every row one run, its tiles read in turn:
    ``rewrites.tile.stream_discount``)."""
    k, n = s.shape[2], s.shape[3]
    c = t.costs
    nb = SWEEP_COLS // block
    rhs = s.operands[1]
    per_k = _axpy_row_cost(nb, c)
    tiles = (k // SWEEP_ROWS) * (n // SWEEP_COLS)
    reorder = 2 * (n // block) * 4 * c.vector_move
    if rhs.level is Level.GL:
        mem = t.hit_cost[Level.GL] * rhs.units(t) + run_cost(n * rhs.dtype.size, t) * k
    else:
        mem = move_cost(rhs, t)
    return tiles * (SWEEP_ROWS * per_k + nb * 2 * c.vector_move) + reorder + mem




def rows(vt: VecType, vrf_regs: int = 12) -> tuple[Kernel, ...]:
    """WidenAxpyLoop and WidenAxpySweep in the f32 vector type ``vt`` (names end in
    ``vt.suffix``), needing ``vrf_regs`` vector registers beyond their operands."""
    block = 2 * vt.lanes
    sfx = vt.suffix
    return (
        # Not in the reference (x . W there broadcasts x over widened rows in registers):
        # all of k over up to 64 columns, 8 accumulators, widened by shift and mask.
        Kernel(f"WidenAxpyLoop{sfx}", PrimKind.MATMUL_ACCUM,
               lambda spec, target: axpy_why_not(spec, block),
               lambda s, t: axpy_cost(s, t, block), vrf_regs,
               lambda w, spec, ops, _vt: axpy_emit(w, spec, ops, vt),
               f"x (f32 row) times bf16 weight rows summed into up to 64 columns of out "
               f"({block} bf16 a vector), over all of k (even/odd columns widened by a shift "
               "and a mask, interleaved at the end)", unit_dims=(0, 1), levels=(L1, MEM, L1),
               dtypes=(F32, (Dtype.BF16,), F32)),
        # Not in the reference: the loop nest above WidenAxpyLoop in cache, out's columns
        # kept in the widening's even/odd order throughout.
        Kernel(f"WidenAxpySweep{sfx}", PrimKind.MATMUL_ACCUM, sweep_check,
               lambda s, t: sweep_cost(s, t, block), vrf_regs,
               lambda w, spec, ops, _vt: sweep_emit(w, spec, ops, vt),
               f"x (f32 row) times bf16 weight rows summed into all of out: {SWEEP_ROWS} rows "
               f"of W over each {SWEEP_COLS} columns in turn ({block} bf16 a vector), out's "
               "columns in even/odd order meanwhile (reordered once before and once after)",
               unit_dims=(0, 1), levels=(L1, MEM, L1), dtypes=(F32, (Dtype.BF16,), F32)),
    )
