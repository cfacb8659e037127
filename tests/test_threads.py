"""Parallel loops: searched for non-serial Specs, emitted as OpenMP, and correct."""
from __future__ import annotations

import numpy as np
import pytest

import morello
from morello.errors import SpecError


@pytest.mark.isa("avx2")
def test_parallel_program_uses_openmp_and_matches_numpy():
    spec = morello.matmul(192, 64, 128, serial=False)
    prog = morello.synthesize(spec, db=False, threads=2)
    assert prog.target.processors == 2
    assert "#pragma omp parallel for" in prog.c_source
    assert "num_threads(2)" in prog.c_source
    fn = prog.compile()
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (192, 64)).astype(np.float32)
    b = rng.uniform(-1, 1, (64, 128)).astype(np.float32)
    np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_serial_spec_never_gets_parallel_loops():
    prog = morello.synthesize(morello.matmul(16, 16, 16), db=False, threads=2)
    assert "#pragma omp" not in prog.c_source and "<omp.h>" not in prog.c_source


@pytest.mark.parametrize("threads", [0, -1, 1.5])
def test_bad_thread_counts_are_refused(threads):
    with pytest.raises(SpecError):
        morello.synthesize(morello.matmul(2, 2, 2), db=False, threads=threads)
