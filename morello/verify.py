"""Comparing a program's output with the kind's numpy reference.

The tolerance depends on the Spec: integer outputs must be exact; a float output may
differ from numpy's by rounding, which grows with the number of terms reduced into each
output element (``terms``: ``k`` for a matmul, the reduced extent for a sum). With inputs
in [-1, 1) a sum of ``terms`` products in f32 is off by at most about
``terms * 2^-24 * terms`` in the worst case and ``sqrt(terms) * 2^-24`` typically; we
allow ``atol = 1e-5 * terms`` (about 170 ulps of a unit per term) and ``rtol = 1e-4``,
loose enough for any summation order, tight enough that one wrong or missing term (of
size about 0.25 on average) is caught.
"""
from __future__ import annotations

import math

import numpy as np

from morello.specs import Spec, reduction_dims


def terms(spec: Spec) -> int:
    """How many terms are reduced into each output element (1 for maps); for a chain,
    the most any one step reduces (its steps round one after the other, they do not
    multiply: attention 512×64 is 512, not 64 × 512)."""
    comps = getattr(spec.kind, "components", None)
    if comps is not None:
        return max(math.prod(spec.shape[c.dims[d]] for d in reduction_dims(
            c.kind, len(c.dims), c.params)) for c in comps)
    return math.prod(spec.shape[d] for d in reduction_dims(spec.kind, len(spec.shape),
                                                           spec.params))


def tolerance(spec: Spec) -> tuple[float, float]:
    """(rtol, atol) for comparing ``spec``'s output with numpy's."""
    if np.issubdtype(spec.output.dtype.np, np.integer):
        return 0.0, 0.0
    return 1e-4, 1e-5 * max(1, terms(spec))


def compare(spec: Spec, out: np.ndarray, ref: np.ndarray) -> tuple[bool, float]:
    """(matches, max abs error) of ``out`` against ``ref``. Equal infinities and NaNs in
    the same places match."""
    out = np.asarray(out)
    ref = np.asarray(ref).reshape(out.shape)
    rtol, atol = tolerance(spec)
    with np.errstate(invalid="ignore"):  # inf - inf where both are -inf fills
        diff = np.where((out == ref) | (np.isnan(out) & np.isnan(ref)), 0.0,
                        np.abs(out.astype(np.float64) - ref))
    err = float(np.max(diff)) if out.size else 0.0
    ok = bool(np.allclose(out, ref, rtol=rtol, atol=atol, equal_nan=True))
    return ok, err
