"""ToAccum: ``Matmul(out) -> Zero(out); MatmulAccum(out)``."""
from __future__ import annotations

from dataclasses import dataclass, replace

from morello.memory import NLEVELS, Target
from morello.rewrites.base import Expansion
from morello.specs import PrimKind, Spec


@dataclass(frozen=True, slots=True)
class ToAccum:
    """Zero the output, then accumulate into it::

        Matmul(lhs, rhs, out)  ->  Zero(out); MatmulAccum(lhs, rhs, out)
    """

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        if spec.kind is not PrimKind.MATMUL:
            return None
        out = spec.output
        zero = Spec(PrimKind.ZERO, out.shape, (out,), spec.serial_only, spec.limits)
        accum = replace(spec, kind=PrimKind.MATMUL_ACCUM)
        return Expansion((zero, accum), (1, 1), 0, (0,) * NLEVELS)

    def __str__(self) -> str:
        return "ToAccum"
