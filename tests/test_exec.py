"""Execution tests: synthesize, compile with the host C compiler, run, compare."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import morello

pytestmark = pytest.mark.isa("avx2")

SHAPES = [
    # (batch, m, k, n)
    (1, 1, 1, 1),
    (1, 2, 3, 5),
    (1, 7, 13, 9),
    (1, 8, 8, 8),
    (1, 16, 16, 16),
    (1, 3, 1, 17),
    (2, 1, 1, 1),
    (2, 2, 3, 5),
    (3, 2, 3, 5),
    (2, 7, 13, 9),
    (3, 8, 8, 8),
    (2, 3, 1, 17),
]


def _inputs(batch: int, m: int, k: int, n: int, seed: int):
    rng = np.random.default_rng(seed)
    # Batch 1 as plain matrices, as users pass them; larger batches as 3-d arrays.
    lead = () if batch == 1 else (batch,)
    a = rng.standard_normal(lead + (m, k), dtype=np.float32)
    b = rng.standard_normal(lead + (k, n), dtype=np.float32)
    return a, b


def _check(batch: int, m: int, k: int, n: int, seed: int = 0, notes: bool = False):
    prog = morello.synthesize(morello.matmul(m, k, n, batch=batch), db=False)
    if notes:
        note(prog.impl.pformat())
        note(prog.c_source)
    fn = prog.compile()
    a, b = _inputs(batch, m, k, n, seed)
    out = fn(a, b)
    assert out.shape == (a @ b).shape
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    return prog


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_synthesized_matmul_matches_numpy(shape):
    _check(*shape)


@given(
    batch=st.integers(1, 3),
    m=st.integers(1, 12),
    k=st.integers(1, 12),
    n=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=15)
def test_random_small_matmuls_match_numpy(batch, m, k, n, seed):
    _check(batch, m, k, n, seed, notes=True)


def test_out_argument_is_filled_in_place():
    prog = morello.synthesize(morello.matmul(4, 5, 6, batch=2), db=False)
    fn = prog.compile()
    a, b = _inputs(2, 4, 5, 6, seed=3)
    out = np.full((2, 4, 6), np.nan, dtype=np.float32)
    assert fn(a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_wrong_shapes_and_dtypes_raise_value_error():
    fn = morello.synthesize(morello.matmul(2, 3, 5), db=False).compile()
    a, b = _inputs(1, 2, 3, 5, seed=1)
    fn(a, b)  # the right arguments work
    with pytest.raises(ValueError):
        fn(a.T.copy(), b)  # wrong shape
    with pytest.raises(ValueError):
        fn(a, np.zeros((3, 6), np.float32))  # wrong shape
    with pytest.raises(ValueError):
        fn(a.astype(np.float64), b)  # float64 input
    with pytest.raises(ValueError):
        fn(a.tolist(), b)  # a list, not an array
    with pytest.raises(ValueError):
        fn(a)  # missing input
    with pytest.raises(ValueError):
        fn(a, b, out=np.empty((2, 5), np.float64))  # out of the wrong dtype


def test_register_tiles_loaded_from_memory_prefetch_the_next_tile():
    """200^3: the C tile a register tile loads from main memory inside a loop is
    prefetched one iteration ahead (guarded on the last one), and the program still
    matches numpy (its boundary tiles included)."""
    prog = morello.synthesize(morello.matmul(200, 200, 200), db=False)
    src = prog.c_source
    assert "_mm_prefetch(" in src and "+ 1 < " in src
    ok, err = prog.verify()
    assert ok, err
