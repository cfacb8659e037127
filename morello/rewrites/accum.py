"""ToAccum: fill the output with the accumulating twin's identity, then accumulate.

::

    Matmul(lhs, rhs, out)  ->  Fill{0}(out);    MatmulAccum(lhs, rhs, out)
    Max{d}(src, dst)       ->  Fill{-inf}(dst); MaxAccum{d}(src, dst)

The twin and the fill value come from the kind table (``KindInfo.accum``/``init``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from morello.memory import NLEVELS, Target
from morello.nodes import Block
from morello.rewrites.base import Expansion
from morello.specs import PrimKind, Spec


@dataclass(frozen=True, slots=True)
class ToAccum:
    """Fill the output with the twin's initial value, then run the accumulating twin."""

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        info = spec.kind.info
        if info.accum is None:
            return None
        out = spec.output
        fill = Spec(PrimKind.FILL, out.shape, (out,), spec.serial_only, spec.limits,
                    (info.init,))
        accum = replace(spec, kind=info.accum)
        return Expansion((fill, accum), (1, 1), 0, (0,) * NLEVELS)

    def apply(self, spec: Spec, target: Target) -> Block:
        out = spec.kind.info.output
        return Block(((out,), tuple(range(len(spec.operands)))))

    def __str__(self) -> str:
        return "ToAccum"
