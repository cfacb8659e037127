"""The random-Spec sweep: random Specs of every kind (shapes 1 to 200, odd sizes,
batches, every supported dtype, parallel loops), synthesized into one database, built,
run and compared with numpy (tolerances from ``morello.verify``: by reduction length,
exact for integers).

The default run checks a dozen; ``pytest -m slow tests/test_sweep.py`` checks
``MORELLO_SWEEP_SPECS`` (default 500), and that many (default 300) again for AVX-512
where the host runs it. ``benchmarks/sweep.py`` is the same sweep as a script, with
timings per kind."""
from __future__ import annotations

import os

import numpy as np
import pytest
from probes import TRIES, random_user_spec, sweep_one

pytestmark = pytest.mark.isa("avx2")


def _sweep(n: int, seed: int, db, target: str = "avx2") -> None:
    rng = np.random.default_rng(seed)
    wrong = []
    for i in range(n):
        spec, threads = random_user_spec(rng)
        TRIES["random Specs verified"] += 1
        ok, err = sweep_one(spec, threads, db, seed=i, target=target)
        if not ok:
            wrong.append(f"{spec.logical_str()} threads={threads}: max abs error {err:.3g}")
    assert not wrong, "\n".join(wrong)


def test_a_dozen_random_specs_match_numpy(tmp_path):
    _sweep(12, seed=int(os.environ.get("MORELLO_SWEEP_SEED", "1")),
           db=str(tmp_path / "sweep.sqlite"))


@pytest.mark.slow
def test_random_specs_match_numpy(tmp_path):
    _sweep(int(os.environ.get("MORELLO_SWEEP_SPECS", "500")),
           seed=int(os.environ.get("MORELLO_SWEEP_SEED", "0")),
           db=str(tmp_path / "sweep.sqlite"))


@pytest.mark.slow
@pytest.mark.isa("avx512")
def test_random_specs_match_numpy_on_avx512(tmp_path):
    """The same sweep for the AVX-512 target (its own kernels: zmm loops, VNNI), on
    hosts that run it: ``MORELLO_SWEEP_SPECS`` (default 300) Specs from seed
    ``MORELLO_SWEEP_SEED`` + 21."""
    _sweep(int(os.environ.get("MORELLO_SWEEP_SPECS", "300")),
           seed=int(os.environ.get("MORELLO_SWEEP_SEED", "0")) + 21,
           db=str(tmp_path / "sweep.sqlite"), target="avx512")
