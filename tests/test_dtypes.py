"""Dtypes beside f32: bf16 weights widened to f32, exact u8/s8 → s32 matmuls; the dtype
rules of Specs, the conversion Moves and the kernels that use them, against numpy."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import morello
from morello import layouts
from morello.dtypes import Dtype, parse_dtype, widens
from morello.errors import SpecError
from morello.memory import AVX2, Level
from morello.specs import PrimKind, Spec
from morello.tensorspec import fresh


def _kernels(prog) -> set[str]:
    return {str(n.action) for n in prog.impl.walk() if not n.children}


def test_dtype_names_and_numpy_types():
    assert parse_dtype("bf16") is Dtype.BF16 and Dtype.BF16.np == ml_dtypes.bfloat16
    assert parse_dtype("i8") is parse_dtype("s8") is parse_dtype(np.int8) is Dtype.S8
    assert parse_dtype(ml_dtypes.bfloat16) is Dtype.BF16
    with pytest.raises(SpecError, match="ml_dtypes.bfloat16"):
        parse_dtype(np.uint16)
    assert widens(Dtype.BF16, Dtype.F32) and widens(Dtype.U8, Dtype.S32)
    assert not widens(Dtype.F32, Dtype.BF16) and not widens(Dtype.S8, Dtype.F32)


@pytest.mark.parametrize("dtypes, words", [
    ("f32,s8,s32", "does not widen"),
    ("bf16,bf16,bf16", "computes in f32/s32"),
    ("f32,bf16", "takes 3 dtypes"),
    ("u8,s8,s16", "computes in f32/s32"),
])
def test_bad_dtype_combinations_are_refused(dtypes, words):
    with pytest.raises(SpecError, match=words):
        morello.matmul(4, 4, 4, dtypes=dtypes)


def test_only_matmul_moves_and_fills_leave_f32():
    with pytest.raises(SpecError, match="computes in f32"):
        morello.softmax(4, 8, dtype="bf16")
    with pytest.raises(SpecError, match="only be filled with 0"):
        morello.fill(8, value=-np.inf, dtype="s32")


@pytest.mark.parametrize("shape", [(5, 3), (40, 40), (1,)])
def test_bf16_fills_store_the_bits_of_their_value(shape):
    """A bf16 fill with -inf stores 0xFF80 (the sweep found zeros: -INFINITY assigned to
    a uint16_t), with 0 zeros; both match numpy exactly."""
    for value, bits in ((-np.inf, 0xFF80), (0.0, 0)):
        prog = morello.synthesize(morello.fill(*shape, value=value, dtype="bf16"), db=False)
        out = prog.compile()()
        assert (out.view(np.uint16) == bits).all(), prog.c_source
        ok, err = prog.verify()
        assert ok, err


def _calibration(tmp_path, **changes) -> str:
    """A calibration file: the built-in AVX2 constants with ``changes``."""
    from dataclasses import replace

    from morello import costs

    path = tmp_path / "cal.json"
    costs.save(path, "avx2", replace(AVX2.costs, **changes), {}, "test")
    return str(path)


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("parallel, streams, kernel", [(250, 250, "DotProductRows"),
                                                       (162, 108, "DotProductStripes"),
                                                       (88, 88, "DotProductStripes")])
@pytest.mark.parametrize("k, n", [(2048, 4096), (1024, 8192)])
def test_gemma_matvec_reads_rows_in_turn_or_side_by_side_as_calibrated(
        tmp_path, dtype, parallel, streams, kernel, k, n):
    """gemma's orientation from main memory: where weight rows read side by side cost
    twice as much per line as one stream, as page-long runs (``gl_line_parallel``) and as
    long ones (``gl_line_streams``), the search reads the rows one after another
    (DotProductRows); where long runs side by side cost less (0.86x on a Zen 4 host), it
    reads 8 stripes of rows side by side (DotProductStripes), as it does where any side
    by side read is cheaper. (Slightly dearer lines do not outweigh the fewer loads and
    shifts per weight of the stripes.) Either way the program matches numpy."""
    cal = _calibration(tmp_path, gl_line_parallel=parallel, gl_line_streams=streams)
    prog = morello.synthesize(morello.matmul(1, k, n, dtypes=("f32", dtype, "f32"),
                                             rhs_layout="cm"), db=False, calibration=cal)
    assert kernel in _kernels(prog), prog.impl.pformat()
    fn = prog.compile()
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
    w = rng.uniform(-1, 1, (n, k)).astype(ml_dtypes.bfloat16 if dtype == "bf16"
                                          else np.float32)
    want = x @ w.astype(np.float32).T
    np.testing.assert_allclose(fn(x, w.T), want, rtol=1e-4, atol=1e-5 * k)


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("k, n", [(16, 16), (64, 24), (4096, 64), (96, 136)])
def test_dot_stripes_kernel_matches_numpy(k, n):
    """DotProductStripes alone, scheduled by hand over a whole [1,k]x[k,n]: 8 stripes of
    n/8 columns (one, three, eight or seventeen a stripe), k down to one step and at its
    limit, the 8 sums stored to columns n/8 apart."""
    from morello import Move, Select, ToAccum, schedule
    from morello.memory import Level as Lv

    for dtype in ("bf16", "f32"):
        spec = morello.matmul(1, k, n, dtypes=("f32", dtype, "f32"), rhs_layout="cm")
        prog = schedule(spec, [Move(0, Lv.L1), Move(2, Lv.L1), ToAccum(), None,
                               Select("DotProductStripes")])
        assert "DotProductStripes" in _kernels(prog), prog.impl.pformat()
        ok, err = prog.verify(prog.compile())
        assert ok, err


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("k, n", [(16, 16), (4096, 64), (1024, 32)])
def test_dot_stripes_prefetch_only_beyond_the_last_level_cache(k, n):
    """Where a problem's main-memory operands exceed the last-level cache (here one of
    64 KiB), DotProductStripes prefetches each stripe ``gl_prefetch`` lines ahead into L2
    (k from 32), and again at half that where the weights alone exceed it (bf16 1024x32
    is 64 KiB: once; ``avx2.STRIPES``); within it, or with ``gl_prefetch`` 0, it
    does not. Within it, each bf16
    vector is pinned in a register for its two widenings; beyond, not. Each matches
    numpy."""
    from dataclasses import replace

    from morello import Move, Select, ToAccum, schedule
    from morello.memory import Level as Lv

    steps = [Move(0, Lv.L1), Move(2, Lv.L1), ToAccum(), None, Select("DotProductStripes")]
    small_llc = replace(AVX2, llc_bytes=64 << 10)
    for dtype in ("bf16", "f32"):
        spec = morello.matmul(1, k, n, dtypes=("f32", dtype, "f32"), rhs_layout="cm")
        ahead = f"+ {64 * AVX2.costs.gl_prefetch}, _MM_HINT_T1"
        for tgt, want in ((small_llc, k >= 32), (AVX2, False),
                          (replace(small_llc, costs=replace(AVX2.costs, gl_prefetch=0)),
                           False)):
            prog = schedule(spec, steps, tgt)
            assert (ahead in prog.c_source) == want, (tgt.llc_bytes, tgt.costs)
            half = f"+ {32 * AVX2.costs.gl_prefetch}, _MM_HINT_T1"
            assert (half in prog.c_source) == (want and spec.operands[1].bytes > tgt.llc_bytes)
            # bf16 vectors held for both widenings within the LLC only (kernels.base).
            pinned = '__asm__("" : "+v"(w0));' in prog.c_source
            within = not tgt.needs_dram(sum(o.bytes for o in spec.operands))
            assert pinned == (dtype == "bf16" and within)
            ok, err = prog.verify(prog.compile())
            assert ok, err


def test_dot_stripes_takes_whole_columns_only():
    """Each stripe is one run of memory only when the columns are whole and adjacent."""
    from morello import Move, Select, Split, ToAccum, schedule
    from morello.errors import RewriteError

    spec = morello.matmul(1, 8192, 64, dtypes=("f32", "bf16", "f32"), rhs_layout="cm")
    head = [Move(2, Level.L1), ToAccum(), None, Split(4096), Move(0, Level.L1)]
    with pytest.raises(RewriteError, match="DotProductStripes does not apply"):
        schedule(spec, head + [Select("DotProductStripes")])


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("k, n", [(32, 1), (64, 3), (4096, 2), (96, 5)])
def test_dot_rows_kernel_matches_numpy(k, n):
    """DotProductRows alone, scheduled by hand over a whole [1,k]x[k,n] (n odd, n = 1 into
    a scalar, k at its limit): the split copy of x, four chains, a sum per column."""
    from morello import Move, Select, ToAccum, schedule
    from morello.memory import Level as Lv

    for dtype in ("bf16", "f32"):
        spec = morello.matmul(1, k, n, dtypes=("f32", dtype, "f32"), rhs_layout="cm")
        prog = schedule(spec, [Move(0, Lv.L1), Move(2, Lv.L1), ToAccum(), None,
                               Select("DotProductRows")])
        assert "DotProductRows" in _kernels(prog), prog.impl.pformat()
        ok, err = prog.verify(prog.compile())
        assert ok, err


def test_dot_rows_takes_whole_columns_only():
    """Columns cut along k are separate runs: read in turn each starts anew (2.2x slower
    than 8 side by side on a Zen 4 host), so DotProductRows does not take them."""
    from morello import Move, Select, Split, TileOut, ToAccum, schedule
    from morello.errors import RewriteError

    spec = morello.matmul(1, 8192, 64, dtypes=("f32", "bf16", "f32"), rhs_layout="cm")
    head = [Move(2, Level.L1), ToAccum(), None, Split(4096), Move(0, Level.L1)]
    with pytest.raises(RewriteError, match="DotProductRows does not apply"):
        schedule(spec, head + [Select("DotProductRows")])
    prog = schedule(spec, head + [TileOut(2, 8), Select("DotProductLoop")])
    ok, err = prog.verify(prog.compile())
    assert ok, err
    whole = morello.matmul(1, 4096, 64, dtypes=("f32", "bf16", "f32"), rhs_layout="cm")
    prog = schedule(whole, [Move(0, Level.L1), Move(2, Level.L1), ToAccum(), None,
                            Select("DotProductRows")])
    ok, err = prog.verify(prog.compile())
    assert ok, err


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("k, n, layout, kernel", [
    (64, 128, "rm", "WidenAxpyLoop"),     # x @ W: 64 columns at once, shift and mask
    (16, 8, "rm", "VectorWidenBf16"),     # x @ W: bf16 rows widened into registers
    (33, 72, "rm", "WidenAxpyLoop"),      # both, and an odd k
    (256, 64, "cm", "DotProduct"),        # gemma: W's rows dotted with x (in cache here:
                                          # in turn or side by side cost about the same)
    (24, 40, "cm", None),
])
def test_bf16_matvec_matches_numpy(k, n, layout, kernel):
    prog = morello.synthesize(morello.matmul(1, k, n, dtypes=("f32", "bf16", "f32"),
                                             rhs_layout=layout), db=False)
    if kernel:
        assert any(name.startswith(kernel) for name in _kernels(prog)), prog.impl.pformat()
    fn = prog.compile()
    ok, err = prog.verify(fn)
    assert ok, err
    # Against numpy f32 on the exactly widened weights, through the callable as a user
    # calls it: W itself (rm) or the transpose of gemma's W[n×k] (cm); uint16 views too.
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
    w = rng.uniform(-1, 1, (k, n)).astype(ml_dtypes.bfloat16)
    if layout == "cm":
        w = np.ascontiguousarray(w.T).T
    want = x @ w.astype(np.float32)
    np.testing.assert_allclose(fn(x, w), want, rtol=1e-5, atol=1e-5 * k)
    np.testing.assert_allclose(fn(x, w.view(np.uint16)), want, rtol=1e-5, atol=1e-5 * k)
    with pytest.raises(ValueError, match="expected bfloat16 or its uint16 view"):
        fn(x, w.astype(np.float32))


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("k, prefetches", [(8, False), (64, True)])
def test_widen_axpy_prefetches_only_along_a_long_k(k, prefetches):
    """WidenAxpyLoop prefetches its rows' lines four tiles ahead only when it walks a long
    k itself (a column walk, which the hardware prefetchers do not follow); over the few
    rows of a split k (8 side-by-side row streams) they only cost (``avx2.py``)."""
    from morello import Move, Select, ToAccum, schedule
    spec = morello.matmul(1, k, 64, dtypes=("f32", "bf16", "f32"))
    prog = schedule(spec, [Move(0, Level.L1), Move(2, Level.L1), ToAccum(), None,
                           Select("WidenAxpyLoop")])
    assert ("_mm_prefetch(" in prog.c_source) is prefetches
    ok, err = prog.verify(prog.compile())
    assert ok, err


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("k, n, split", [(48, 192, 16), (8, 128, None), (512, 1024, None)])
def test_widen_axpy_sweep_keeps_out_in_even_odd_order_only_within_a_call(k, n, split):
    """WidenAxpySweep puts out's columns in even/odd order per 16 before its loops and
    back after them: under a split of k, each call after the first starts from the sums
    of the calls before, in columns' order (a wrong reordering mixes them up)."""
    from morello import Move, Select, Split, ToAccum, schedule
    spec = morello.matmul(1, k, n, dtypes=("f32", "bf16", "f32"))
    steps = [Move(0, Level.L1), Move(2, Level.L1), ToAccum(), None]
    steps += [Split(split)] if split else []
    prog = schedule(spec, steps + [Select("WidenAxpySweep")])
    ok, err = prog.verify(prog.compile())
    assert ok, err


def test_widen_axpy_sweep_is_for_problems_within_the_last_level_cache():
    """Beyond the LLC x.W keeps WidenAxpyLoop's loop nest (which prefetches there); in
    cache the search takes the sweep (x.W 1x512x1024: 1.04-1.13x the nest, avx2)."""
    from morello.kernels.avx2 import BY_NAME
    spec = morello.matmul(1, 512, 1024, dtypes=("f32", "bf16", "f32"))
    prog = morello.synthesize(spec, target=AVX2, db=False)
    assert "WidenAxpySweep" in _kernels(prog), prog.impl.pformat()
    accum = next(n.spec for n in prog.impl.walk() if n.spec.kind is PrimKind.MATMUL_ACCUM)
    sweep = BY_NAME["WidenAxpySweep"]
    assert sweep.check(accum, AVX2) is None
    assert "last-level cache" in sweep.check(accum, AVX2.in_dram())


@pytest.mark.isa("avx2")
def test_widen_axpy_prefetches_into_l2_beyond_the_last_level_cache():
    """Over a split k, where the problem exceeds the last-level cache (here one of 64
    KiB), each row's lines some way ahead go into L2: ``gl_prefetch`` lines, at most an
    eighth of a row of W (a row of 2048 bf16: 8 lines, 512 bytes)."""
    from dataclasses import replace

    from morello import Move, Select, Split, TileOut, ToAccum, schedule
    spec = morello.matmul(1, 64, 2048, dtypes=("f32", "bf16", "f32"))
    steps = [Move(0, Level.L1), Move(2, Level.L1), ToAccum(), None, Split(8), TileOut(2, 64),
             Select("WidenAxpyLoop")]
    for llc, want in ((64 << 10, True), (AVX2.llc_bytes, False)):
        prog = schedule(spec, steps, replace(AVX2, llc_bytes=llc))
        assert ("+ 512, _MM_HINT_T1);" in prog.c_source) is want, prog.impl.pformat()
        # and the same lines 8 rows below, which the next iteration of Split(8) reads
        assert ("(row + 8 * rs), _MM_HINT_T1);" in prog.c_source) is want
        assert ('__asm__("" : "+v"(w0));' in prog.c_source) is not want  # kernels.base
        ok, err = prog.verify(prog.compile())
        assert ok, err


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("n, below", [(16384, True), (32768, False)])
def test_widen_axpy_prefetches_rows_below_only_within_l2(n, below):
    """Beyond the last-level cache, WidenAxpyLoop also prefetches its lines in the rows
    that the enclosing Split(8) reads next, when those come no more than L2's 256 KiB
    later (8 rows of 16384 bf16: 256 KiB; of 32768: 512 KiB, which L2 would lose)."""
    from dataclasses import replace

    from morello import Move, Select, Split, TileOut, ToAccum, schedule
    spec = morello.matmul(1, 16, n, dtypes=("f32", "bf16", "f32"))
    steps = [Move(0, Level.L1), Move(2, Level.L2), ToAccum(), None, Split(8),
             TileOut(2, 64), Move(2, Level.L1), Select("WidenAxpyLoop")]
    prog = schedule(spec, steps, replace(AVX2, llc_bytes=64 << 10))
    assert "_MM_HINT_T1);" in prog.c_source, prog.impl.pformat()
    assert ("(row + 8 * rs), _MM_HINT_T1);" in prog.c_source) is below
    ok, err = prog.verify(prog.compile())
    assert ok, err


@pytest.mark.isa("avx2")
def test_widening_copy_kernel():
    src = fresh((1, 100), Dtype.BF16, Level.L1, layouts.row_major(2))
    dst = fresh((1, 100), Dtype.F32, Level.L1, layouts.row_major(2))
    spec = Spec(PrimKind.MOVE, (1, 100), (src, dst), True, AVX2.max_limits())
    prog = morello.synthesize(spec, db=False)
    assert "WidenCopyBf16" in _kernels(prog), prog.impl.pformat()
    x = np.random.default_rng(2).standard_normal((1, 100)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(prog.compile()(x), x.astype(np.float32))


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("src, dst", [("u8", "s16"), ("s8", "s16"), ("u8", "s32"),
                                      ("s8", "s32"), ("s16", "s32")])
def test_integer_widening_copy_kernel(src, dst):
    """Vector steps and a scalar tail (100 = 6 x 16 + 4), the extremes included."""
    sd, dd = parse_dtype(src), parse_dtype(dst)
    ops = tuple(fresh((1, 100), d, Level.L1, layouts.row_major(2)) for d in (sd, dd))
    prog = morello.synthesize(Spec(PrimKind.MOVE, (1, 100), ops, True, AVX2.max_limits()),
                              db=False)
    assert "WidenCopyInt" in _kernels(prog), prog.impl.pformat()
    info = np.iinfo(sd.np)
    x = np.random.default_rng(3).integers(info.min, info.max, (1, 100), endpoint=True)
    x[0, :2], x[0, -2:] = (info.min, info.max), (info.max, info.min)
    x = x.astype(sd.np)
    got = prog.compile()(x)
    assert got.dtype == dd.np
    np.testing.assert_array_equal(got, x.astype(dd.np))


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("m, k, n, dtypes", [
    (16, 16, 16, "u8,s8,s32"),
    (5, 6, 24, "s8,s8,s32"),
    (7, 10, 32, "u8,u8,s32"),
])
def test_integer_matmul_is_exact(m, k, n, dtypes):
    prog = morello.synthesize(morello.matmul(m, k, n, dtypes=dtypes), db=False)
    assert {"PairMaddS16", "WidenPairPack"} <= _kernels(prog), prog.impl.pformat()
    fn = prog.compile()
    ok, err = prog.verify(fn)
    assert ok and err == 0.0
    # The extremes: every product at its largest magnitude (255 * -128), every pair sum
    # beyond s16 (vpmaddubsw would saturate there; vpmaddwd on s16 does not).
    lt, rt, _ = (parse_dtype(d).np for d in dtypes.split(","))
    a = np.full((m, k), np.iinfo(lt).max, lt)
    b = np.full((k, n), np.iinfo(rt).min if rt == np.int8 else np.iinfo(rt).max, rt)
    got = fn(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a.astype(np.int32) @ b.astype(np.int32))


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("m, k, n, kernel", [
    (8, 8, 8, "MaddubsLoop"),       # quads of rhs rows, vpmaddubsw over all of k
    (5, 6, 24, "MultAddSat16Loop"),  # k not a multiple of 4: the scalar loop
])
def test_saturating_matmul_matches_its_reference(m, k, n, kernel):
    from morello.kinds import _sat16_products

    prog = morello.synthesize(morello.matmul(m, k, n, dtypes="u8,s8,s32", saturate=True),
                              db=False)
    assert kernel in _kernels(prog), prog.impl.pformat()
    fn = prog.compile()
    ok, err = prog.verify(fn)
    assert ok and err == 0.0
    # Where it saturates: 255 * 127 twice is 64770, clipped to 32767 per pair; the exact
    # product differs, the saturating reference does not.
    a = np.full((m, k), 255, np.uint8)
    b = np.full((k, n), 127, np.int8)
    got = fn(a, b)
    np.testing.assert_array_equal(got, _sat16_products(a[None], b[None])[0])
    assert (got != a.astype(np.int32) @ b.astype(np.int32)).all()
    # Below 128 it never saturates: the exact product.
    small = (a // 2).astype(np.uint8)
    np.testing.assert_array_equal(fn(small, b), small.astype(np.int32) @ b.astype(np.int32))


def test_saturate_needs_u8_s8_s32():
    with pytest.raises(SpecError, match="saturate=True"):
        morello.matmul(4, 4, 4, dtypes="s8,s8,s32", saturate=True)


@pytest.mark.parametrize("target_name, rows", [("avx2", 4), ("avx512", 8)])
def test_x_w_beyond_the_llc_sweeps_whole_weight_rows_four_at_a_time_on_avx2(
        target_name, rows):
    """Beyond the last-level cache, loops that sweep a few whole bf16 weight rows side by
    side save on their lines (``cost.sweep_saving``) where the target measured it (AVX2):
    x.W then reads 4 rows of W at a time over all its columns; on AVX-512 8. Each is
    checked against numpy where the host runs it."""
    from dataclasses import replace

    from morello.memory import AVX512, host_lacks
    base = {"avx2": AVX2, "avx512": AVX512}[target_name]
    target = replace(base, llc_bytes=256 << 10)
    spec = morello.matmul(1, 64, 16384, dtypes=("f32", "bf16", "f32"), target=target)
    prog = morello.synthesize(spec, target=target, db=False)
    path = [str(n.action) for n in prog.impl.walk()]
    sweep = path.index("TileOut(dim=2, size=64)")
    assert path[sweep - 1] == f"Split(size={rows})", prog.impl.pformat()
    assert any(k.startswith("WidenAxpyLoop") for k in _kernels(prog))
    if host_lacks(target) is None:
        ok, err = prog.verify(prog.compile())
        assert ok, err


def test_whole_row_sweeps_expand_natively_as_in_python():
    """The native core's loop rows (with their sweep savings) equal the Python rewrites
    for every Spec a search of a bf16 x.W with rows long enough to save meets."""
    from test_engine import native_rows, python_rows

    from morello.search import Engine

    eng = Engine(AVX2)
    sol, _ = eng.solve(morello.matmul(1, 8, 8192, dtypes=("f32", "bf16", "f32")))
    assert sol is not None
    saving = 0
    for i in range(eng.graph.n_ids):
        spec = eng.spec_of(i)
        rows = python_rows(spec)
        assert native_rows(eng, i) == rows, spec
        saving += any(r[1] < 0 for r in rows)
    assert saving, "no loop of the search discounted anything"
