"""NaN and infinities in, numpy's answer out: every kind's program against its numpy
reference (``KindInfo.reference``; a chain's composed one), with NaN, +inf and -inf
placed at random in every input. Random finite inputs, which the other tests use, never
showed that a row maximum with a NaN gave -inf and relu(NaN) gave 0."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import morello

CASES = {
    "add": lambda t: morello.add(7, 45, target=t),
    "mul": lambda t: morello.mul(7, 45, target=t),
    "relu": lambda t: morello.relu(7, 45, target=t),
    "sum dim 0": lambda t: morello.reduce_sum(7, 45, dim=0, target=t),
    "sum dim 1": lambda t: morello.reduce_sum(7, 45, dim=1, target=t),
    "max dim 0": lambda t: morello.reduce_max(7, 45, dim=0, target=t),
    "max dim 1": lambda t: morello.reduce_max(7, 45, dim=1, target=t),
    "broadcast": lambda t: morello.broadcast(7, 45, dim=1, target=t),
    "bias": lambda t: morello.add_bias(7, 45, target=t),
    "softmax": lambda t: morello.softmax(7, 45, target=t),
    "softmax dim 0": lambda t: morello.softmax(7, 45, dim=0, target=t),
    "softmax, long rows": lambda t: morello.softmax(3, 20000, target=t),
    "matmul": lambda t: morello.matmul(7, 9, 45, target=t),
    "attention": lambda t: morello.attention(16, 8, target=t),
}


@pytest.mark.parametrize("target", [pytest.param("avx2", marks=pytest.mark.isa("avx2")),
                                    pytest.param("avx512", marks=pytest.mark.isa("avx512"))])
@pytest.mark.parametrize("name", list(CASES))
def test_nan_and_infinities_give_numpys_answer(target, name):
    spec = CASES[name](target)
    prog = morello.synthesize(spec, db=False)
    rng = np.random.default_rng(len(name))
    ins = []
    for x in prog.random_inputs(len(name)):
        flat = x.reshape(-1)
        idx = rng.choice(flat.size, size=min(4, flat.size), replace=False)
        flat[idx] = [np.nan, np.inf, -np.inf, np.nan][:len(idx)]
        ins.append(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's inf - inf
        want = prog.reference(*ins)
    got = prog.compile()(*ins)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
