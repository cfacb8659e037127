"""The softmax family: the vector exp, the decomposition the search finds, and
softmax programs against numpy (large inputs, -inf and NaN included)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import morello
from morello.codegen import compile_c
from morello.codegen.emit import partial
from morello.kinds import PrimKind
from morello.memory import AVX2, Level
from morello.rewrites import Decompose, TileOut
from morello.verify import compare

pytestmark = pytest.mark.isa("avx2")

EXP_C = r'''
void vexp(const float *x, float *y, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, morello_exp8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = morello_expf(x[i]);
}
void nexp(const float *x, float *y, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, morello_exp8_neg(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = morello_expf(x[i]);
}
void sexp(const float *x, float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = morello_expf(x[i]);
}
'''


@pytest.fixture(scope="module")
def exp_lib():
    lib = ctypes.CDLL(str(compile_c(partial("prelude.c") + EXP_C, AVX2.cflags)))
    for f in (lib.vexp, lib.sexp, lib.nexp):
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    return lib


def _run(f, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, np.float32)
    y = np.empty_like(x)
    f(x.ctypes.data, y.ctypes.data, x.size)
    return y


@pytest.mark.parametrize("which", ["vexp", "sexp"])
def test_exp_is_within_2e7_relative_over_the_f32_range(exp_lib, which):
    """A sample of every f32 bit pattern whose exp is finite and nonzero (4 M values
    spread evenly over the patterns); every pattern measured 1.79e-7 over normal results
    (numpy's float32 exp: 2.1e-7). Subnormal results are within that relative error and
    half an ulp (the rounding to their grid): 1.53 ulps at the top of their range."""
    bits = np.arange(0, 2**32, 1021, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x) & (x > -104) & (x < 89)]
    y = _run(getattr(exp_lib, which), x)
    e = np.exp(x.astype(np.float64))
    normal = (e >= np.finfo(np.float32).tiny) & (e <= np.finfo(np.float32).max)
    rel = np.abs(y[normal] - e[normal]) / e[normal]
    assert rel.max() <= 2e-7, (rel.max(), x[normal][rel.argmax()])
    sub = e < np.finfo(np.float32).tiny
    assert (np.abs(y[sub] - e[sub]) <= 2e-7 * e[sub] + 2.0**-150).all()


def test_the_scalar_exp_is_the_vector_exp_bit_for_bit(exp_lib):
    """morello_expf (a row's tail) takes morello_exp8's steps, n rounded by the same
    added constant (no roundevenf, which clang 14 lacks): the same result for every
    sampled input, subnormal results and the range's ends included."""
    bits = np.arange(0, 2**32, 4093, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x) & (x > -110) & (x < 90)]
    x = np.concatenate([x, np.float32([-103.97, -87.34, -87.33, 88.0, 88.72])])
    x = np.concatenate([x, np.zeros(-len(x) % 8, np.float32)])
    np.testing.assert_array_equal(_run(exp_lib.vexp, x), _run(exp_lib.sexp, x))


def test_the_softmax_exp_of_non_positive_inputs(exp_lib):
    """morello_exp8_neg (the softmax kernels' exp of x - max <= 0): morello_exp8's error
    over normal results, exactly 0 below -87.68 and for -inf, between as morello_exp8's
    subnormal results, NaN propagates."""
    bits = np.arange(0, 2**31, 509, dtype=np.uint64).astype(np.uint32) | 0x80000000
    x = bits.view(np.float32)
    x = np.concatenate([x[np.isfinite(x) & (x > -200)], [-np.inf, np.nan, -88.0, -87.68,
                                                        -87.5, -87.34, 0.0, -0.0]])
    x = x.astype(np.float32)
    x = np.concatenate([x, np.zeros(-len(x) % 8, np.float32)])  # all on the vector path
    y = _run(exp_lib.nexp, x)
    e = np.exp(x.astype(np.float64))
    normal = e >= np.finfo(np.float32).tiny
    rel = np.abs(y[normal] - e[normal]) / e[normal]
    assert rel.max() <= 2e-7, (rel.max(), x[normal][rel.argmax()])
    low = ~normal & ~np.isnan(x)
    n = x.astype(np.float64) * np.log2(np.e)  # rounds to -127 below -126.5: the result is 0
    edge = np.abs(n + 126.5) < 1e-5
    zero = (n < -126.5) & ~edge
    near = np.abs(y - e) <= 2e-7 * e + 2.0**-150
    assert (y[zero] == 0).all() and ((y == 0) | near)[edge].all()
    sub = low & ~zero & ~edge
    assert sub.sum() > 50 and near[sub].all()
    assert np.isnan(y[np.isnan(x)]).all()


def test_exp_special_values(exp_lib):
    x = np.array([np.inf, -np.inf, np.nan, 88.73, 89.0, 1e30, -1e30, -103.98, 0.0, -0.0,
                  88.72, -87.0, 1e-30, -1e-30, 0.5, -0.5], np.float32)
    for f in (exp_lib.vexp, exp_lib.sexp):
        y = _run(f, x)
        with np.errstate(over="ignore"):
            want = np.exp(x.astype(np.float64)).astype(np.float32)
        np.testing.assert_allclose(y, want, rtol=2e-7)
        assert np.isnan(y[2]) and y[0] == np.inf and y[1] == 0.0


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return str(tmp_path_factory.mktemp("softmax") / "r.sqlite")


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=3), st.data())
def test_softmax_of_any_shape_and_dim_matches_numpy(db, shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    prog = morello.synthesize(morello.softmax(*shape, dim=dim), db=db)
    ok, err = prog.verify()
    assert ok, err


def _softmax_np(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


# 37: rows in L1; 20000: rows in L2, tiled (the sums of tiles added); 70000: rows longer
# than L2, the online merge over row tiles.
@pytest.mark.parametrize("cols,kind", [(37, None), (20000, "SoftmaxUnscaledAccum"),
                                       (70000, "SoftmaxDenomMaxAccum")])
def test_large_inputs_are_safe_and_special_values_behave(db, cols, kind):
    prog = morello.synthesize(morello.softmax(6, cols), db=db)
    if kind is not None:
        kinds = {n.spec.kind.title for n in prog.impl.walk()}
        assert kind in kinds, prog.impl.pformat()
    fn = prog.compile()
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((6, cols)) * 1e4).astype(np.float32)
    x[1] = 3e38  # all equal and huge: uniform
    x[2, :5] = -np.inf  # -inf gives 0
    x[3] = -np.inf  # a row of -inf: NaN, as numpy
    x[4, 7] = np.nan  # NaN propagates to its row
    x[5] = rng.uniform(-1, 1, cols).astype(np.float32) + 100  # exp(100) alone overflows
    with np.errstate(invalid="ignore"):
        want = _softmax_np(x, 1)
    got = fn(x)
    ok, err = compare(prog.spec, got, want)
    assert ok, err
    assert (got[2, :5] == 0).all() and np.isfinite(got[0]).all()
    np.testing.assert_allclose(got[1], 1 / cols, rtol=1e-6)
    assert np.isnan(got[3]).all() and np.isnan(got[4]).all()
    assert not np.isnan(np.delete(got, [3, 4], axis=0)).any()


def test_long_rows_take_the_online_merge_over_tiles_of_the_row():
    """A row larger than L2: the search tiles the scan dim with the online (FromParts)
    merge of partial maxima and denominators, then one normalizing pass (a row that fits
    L2 is read three times from there instead, with one exp per element)."""
    prog = morello.synthesize(morello.softmax(1, 131072), db=False)
    merges = [n for n in prog.impl.walk() if n.spec.kind.title == "SoftmaxDenomMaxAccum"]
    assert merges and any(str(n.action).startswith("Split") for n in merges)
    ok, err = prog.verify()
    assert ok, err


def test_the_search_finds_the_decomposition():
    """No hand schedule: the optimum of a plain Softmax Spec decomposes it (max, then
    denominator, then normalize) and never tiles the scan dim."""
    prog = morello.synthesize(morello.softmax(64, 256), db=False)
    acts = [n.action for n in prog.impl.walk()]
    assert sum(isinstance(a, Decompose) for a in acts) == 2
    kinds = {n.spec.kind.title for n in prog.impl.walk()}
    assert "FMax" in kinds
    assert {"SoftmaxDenom", "SoftmaxComplete"} <= kinds \
        or {"SoftmaxExp", "Sum", "DivReduced"} <= kinds \
        or {"SoftmaxUnscaled", "DivReduced"} <= kinds
    for n in prog.impl.walk():
        if n.spec.kind.info.scan and isinstance(n.action, TileOut):
            assert n.action.spec_dim(n.spec) != n.spec.params[0]


def test_the_scan_dim_cannot_be_tiled():
    spec = morello.softmax(8, 16)
    assert TileOut(1, 8).expand(spec, AVX2) is None
    assert TileOut(0, 4).expand(spec, AVX2) is not None


def test_every_decomposition_is_ranked_and_runs():
    """A one-exp decomposition is cheaper under the model for long rows; the others,
    scheduled by hand, still give the right answer."""
    from morello import schedule

    spec = morello.softmax(4, 512)
    best = morello.synthesize(spec, db=False)
    assert any(isinstance(n.action, Decompose) and n.action.variant in (1, 2)
               for n in best.impl.walk())
    for variant in (0, 1, 2):
        prog = schedule(spec, [TileOut(0, 1), Decompose(morello.Level.RF), None,
                               Decompose(morello.Level.RF, variant)])
        assert prog.cost >= best.cost
        ok, err = prog.verify()
        assert ok, (variant, err)


SOFTMAX_KINDS = [k for k in morello.specs.PrimKind
                 if k.info.family.startswith("Softmax")
                 or k.info.title in ("DivReduced", "DivReducedInto")]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_dp_equals_exhaustive_search_on_tiny_softmax_family_specs(data):
    """The DP (Cython core, with the scan kinds expanded in Python) finds what
    exhaustive enumeration finds, for every kind of the family."""
    from strategies import prim_spec_st, small_limits_st

    from morello.reference_dp import exhaustive_main_cost
    from morello.search import Engine

    spec = data.draw(prim_spec_st(kinds=SOFTMAX_KINDS, max_dim=2, ranks=(1, 2),
                                  limits=small_limits_st()).filter(lambda s: s.volume <= 2))
    target = AVX2.in_dram() if data.draw(st.booleans()) else AVX2
    sol, _ = Engine(target).solve(spec)
    assert (None if sol is None else sol.cost.main) == exhaustive_main_cost(spec, target)


def test_the_native_core_and_the_python_expansion_agree_on_softmax():
    from morello.search import Engine

    for spec in (morello.softmax(3, 20), morello.softmax(2, 3, 9, dim=1)):
        a, _ = Engine(AVX2).solve(spec)
        b, _ = Engine(AVX2, native=False).solve(spec)
        assert a is not None and a.cost == b.cost


def _loop_bodies(c: str) -> list[str]:
    """The text of each innermost ``for (long q ...)`` loop of emitted C."""
    bodies = []
    for part in c.split("for (long q")[1:]:
        bodies.append(part.split("}\n", 1)[0])
    return bodies


def test_a_row_loop_prefetches_the_next_rows_in_its_exp_pass(db):
    """Rows read from main memory in several passes (max, then exps, then the scale):
    the second pass, the exps, prefetches the same elements of the next tile of rows
    (``codegen.prefetch.Prefetcher._stream_next``), the first does not (the hardware follows
    that stream), and the last tile prefetches itself, not past the input. A one-pass
    row loop (relu) gets none. Both still match numpy."""
    prog = morello.synthesize(morello.softmax(64, 1024), db=db)
    c = prog.c_source
    assert c.count("p0_next = ") == 1, c
    with_pf = [b for b in _loop_bodies(c) if "_mm_prefetch((const char *)(p0_next" in b]
    assert with_pf and all("morello_exp8_neg" in b for b in with_pf), c
    assert not any("_max_ps" in b for b in with_pf)
    tiles = [n for n in prog.impl.walk() if str(n.action).startswith("TileOut(dim=0")]
    rows = tiles[0].children[0].spec.operands[0].shape[0]  # the outer loop's tile
    assert f"? {rows * 1024} : 0)" in c, c
    ok, err = prog.verify()
    assert ok, err
    relu = morello.synthesize(morello.relu(64, 1024), db=db)
    assert "_next" not in relu.c_source
    ok, err = relu.verify()
    assert ok, err
    assert "_MM_HINT_T0" in c and "_MM_HINT_T1" not in c  # within the LLC: into L1


@pytest.mark.parametrize("cols", [1024, 8192])
def test_beyond_the_last_level_cache_the_next_rows_go_into_l2(cols):
    """Where the problem streams from DRAM (here past an LLC of 256 KiB), the next rows are
    prefetched into L2, and rows too long for half of L1 (8192 floats: 32 KiB) are
    prefetched too (``_stream_next``). The programs still match numpy."""
    from dataclasses import replace

    prog = morello.synthesize(morello.softmax(64, cols),
                              replace(AVX2, llc_bytes=256 << 10), db=False)
    c = prog.c_source
    assert prog.target.gl_in_dram and c.count("p0_next = ") == 1, prog.impl.pformat()
    assert "_MM_HINT_T1" in c and "_MM_HINT_T0" not in c
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.parametrize("cols", [1024, 4096])
def test_beyond_the_last_level_cache_rows_are_prefetched_two_rows_ahead(cols):
    """From main memory the exps of one row prefetch the row two on, or the next tile's
    where a tile has two rows or more (``codegen.prefetch.DRAM_PASSES_AHEAD``): the next
    row's lines, asked for a row ahead, arrived too late for its max pass (4096x4096:
    1.08-1.16x). The last tiles prefetch themselves, not past the input."""
    import re
    from dataclasses import replace

    prog = morello.synthesize(morello.softmax(64, cols),
                              replace(AVX2, llc_bytes=256 << 10), db=False)
    tiles = [n for n in prog.impl.walk() if str(n.action).startswith("TileOut(dim=0")]
    rows = tiles[0].children[0].spec.operands[0].shape[0]  # the outer loop's tile
    ahead = -(-2 // rows)
    m = re.search(r"p0_next = p0 \+ \((\w+) \+ (\d+) < (\d+) \? (\d+) : 0\);", prog.c_source)
    assert m, prog.c_source
    assert (int(m[2]), int(m[3]), int(m[4])) == (ahead, 64 // rows, ahead * rows * cols)
    ok, err = prog.verify()
    assert ok, err


def test_a_max_pass_in_pieces_is_one_pass_and_the_exps_prefetch():
    """Rows of 20000 floats beyond the LLC: the max runs over pieces of the row (8192
    floats and a tail), which are one pass, so the exps, the second, prefetch the next
    row (they did not, when each piece counted as a pass of its own: 1000x20000
    1.10-1.13x with the prefetch). It matches numpy."""
    from dataclasses import replace

    prog = morello.synthesize(morello.softmax(16, 20000), replace(AVX2, llc_bytes=256 << 10),
                              db=False)
    maxes = [n for n in prog.impl.walk()
             if hasattr(n.action, "kernel") and n.spec.kind is PrimKind.FMAX_ACCUM]
    assert len(maxes) >= 2, prog.impl.pformat()  # the max in pieces
    c = prog.c_source
    assert c.count("p0_next = ") == 1, prog.impl.pformat()
    with_pf = [b for b in _loop_bodies(c) if "_mm_prefetch((const char *)(p0_next" in b]
    assert with_pf and all("morello_exp8_neg" in b for b in with_pf), c
    ok, err = prog.verify()
    assert ok, err


def test_beyond_the_last_level_cache_long_rows_keep_their_exps_in_an_l2_row():
    """Rows too long for L1 (8192 floats) of a problem beyond the LLC (here 256 KiB): the
    exps go once into a row buffer in L2, written and summed over tiles of the row, then
    divided into the output as it is stored past the caches: one exp per element, where
    the L1 row of the 4096-float case does not fit. It matches numpy."""
    from dataclasses import replace

    from morello.rewrites import Decompose
    from morello.rewrites.decompose import ROW_LEVELS

    prog = morello.synthesize(morello.softmax(16, 8192), replace(AVX2, llc_bytes=256 << 10),
                              db=False)
    rows = [n for n in prog.impl.walk() if isinstance(n.action, Decompose)
            and (n.spec.kind, n.action.variant) in ROW_LEVELS]
    assert rows, prog.impl.pformat()
    assert rows[0].action.row_buffer(rows[0].spec).level is Level.L2
    assert "morello_exp8_neg" in prog.c_source and "_mm256_stream_ps" in prog.c_source
    assert prog.c_source.count("morello_exp8_neg(") <= 3  # the exps in one pass, not two
    ok, err = prog.verify()
    assert ok, err
