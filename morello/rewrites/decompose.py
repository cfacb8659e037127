"""Decompose: implement a scan kind by simpler kinds over a new intermediate buffer.

::

    Softmax{d}(src, dst)            ->  alloc max @level
                                        Max{d}(src, max)
                                        SoftmaxGivenMax{d}(src, max, dst)
    SoftmaxGivenMax{d}(src, max, dst) -> alloc denom @level
                                        SoftmaxDenom{d}(src, max, denom)
                                        SoftmaxComplete{d}(src, max, denom, dst)

or, for SoftmaxGivenMax, ``SoftmaxExp{d}(src, max, dst); Sum{d}(dst, denom);
DivReduced{d}(denom, dst)``: the exps written once, summed, and divided in place; or
``SoftmaxUnscaled{d}(src, max, dst, denom); DivReduced{d}(denom, dst)``, the sum taken as
the exps are written; or, for problems in DRAM (``Target.in_dram``), ``SoftmaxUnscaled{d}(src,
max, row, denom); DivReducedInto{d}(denom, row, dst)``, the exps kept in a second buffer,
an L1 row, and divided into dst as it is stored past the caches (rows longer than L1
holds: an L2 row, the exps written over tiles of it). And the online
(one-pass) softmax::

    Softmax{d}(src, dst)             -> alloc max;   SoftmaxOnline{d}(src, max, dst)
    SoftmaxOnline{d}(src, max, dst)  -> alloc denom; Fill{-inf}(max); Fill{0}(denom)
                                        SoftmaxDenomMaxAccum{d}(src, max, denom)
                                        SoftmaxComplete{d}(src, max, denom, dst)

where SoftmaxDenomMaxAccum is an accumulating kind: ``Split`` tiles the scan dim and each
tile merges its maximum and sum of exps into the running ones (the FromParts merge), so
rows longer than L1 take one pass for both. Which level holds each intermediate (main
memory, L1, or scalar registers once the rows are tiled to one) is the search's choice,
one action per level. The buffer has the output's shape with extent 1 at the scan dim,
in row-major order. A decomposition is a row of ``DECOMPOSITIONS``: its steps, each a
kind and its operands (this Spec's operand indices, or NEW for the buffer).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from morello.cost import own_units
from morello.memory import Level, Target
from morello.nodes import NEW, NEW2, Block
from morello.rewrites.base import BUFFER_LEVELS, Expansion, new_buffer
from morello.specs import PrimKind, Spec, operand_shapes

# kind -> its decompositions, each a tuple of steps: (kind of the step, its operands as
# indices into the Spec's operands, or NEW for the buffer[, its parameters]). A step
# without parameters takes the Spec's (the scan dim); a Fill takes its value and the
# shape of its operand.
DECOMPOSITIONS: dict[PrimKind, tuple[tuple[tuple, ...], ...]] = {
    PrimKind.SOFTMAX: (
        ((PrimKind.FMAX, (0, NEW)), (PrimKind.SOFTMAX_GIVEN_MAX, (0, NEW, 1))),
        # Online: the max and the denominator in one pass, then the output.
        ((PrimKind.SOFTMAX_ONLINE, (0, NEW, 1)),),
    ),
    PrimKind.SOFTMAX_ONLINE: (
        ((PrimKind.FILL, (1,), (-math.inf,)), (PrimKind.FILL, (NEW,), (0.0,)),
         (PrimKind.SOFTMAX_DENOM_MAX_ACCUM, (0, 1, NEW)),
         (PrimKind.SOFTMAX_COMPLETE, (0, 1, NEW, 2))),
    ),
    PrimKind.SOFTMAX_GIVEN_MAX: (
        # One pass for the denominator, one for the output: two exps per element.
        ((PrimKind.SOFTMAX_DENOM, (0, 1, NEW)), (PrimKind.SOFTMAX_COMPLETE, (0, 1, NEW, 2))),
        # The exps into dst, their sum, and dst divided in place: one exp per element.
        ((PrimKind.SOFTMAX_EXP, (0, 1, 2)), (PrimKind.SUM, (2, NEW)),
         (PrimKind.DIV_REDUCED, (NEW, 2))),
        # The same with the sum taken while the exps are written: one pass fewer.
        ((PrimKind.SOFTMAX_UNSCALED, (0, 1, 2, NEW)), (PrimKind.DIV_REDUCED, (NEW, 2))),
        # And over tiles of the row (rows longer than L1): the sums added up.
        ((PrimKind.FILL, (NEW,), (0.0,)), (PrimKind.SOFTMAX_UNSCALED_ACCUM, (0, 1, 2, NEW)),
         (PrimKind.DIV_REDUCED, (NEW, 2))),
        # For problems in DRAM: the exps into an L1 row (NEW2), divided into dst as it is
        # stored, past the caches (no read of dst's lines, no write-back): faster than the
        # exps written into dst. The L1 row beside the source row costs read bandwidth, but
        # without it (the max, then the output from the source row again) each element
        # needs two exps (figures: docs/model-notes.md).
        ((PrimKind.SOFTMAX_UNSCALED, (0, 1, NEW2, NEW)),
         (PrimKind.DIV_REDUCED_INTO, (NEW, NEW2, 2))),
        # The same for rows longer than L1 holds: the row in L2 (``ROW_LEVELS``), its exps
        # written and summed over tiles of it.
        ((PrimKind.FILL, (NEW,), (0.0,)), (PrimKind.SOFTMAX_UNSCALED_ACCUM, (0, 1, NEW2, NEW)),
         (PrimKind.DIV_REDUCED_INTO, (NEW, NEW2, 2))),
    ),
    # With extent 1 at the broadcast dim, the bias has the output's shape: an Add. (A
    # row without NEW allocates nothing; it applies where its steps' shapes fit.)
    PrimKind.ADD_BROADCAST: (
        ((PrimKind.ADD, (0, 1, 2)),),
    ),
}


# (kind, variant) -> the level of its second buffer (NEW2), where not L1.
ROW_LEVELS: dict[tuple[PrimKind, int], Level] = {(PrimKind.SOFTMAX_GIVEN_MAX, 5): Level.L2}


@dataclass(frozen=True, slots=True)
class Decompose:
    """Run the kind's decomposition number ``variant`` with its intermediate buffer in
    ``level``."""

    level: Level
    variant: int = 0

    def steps(self, spec: Spec):
        if not isinstance(spec.kind, PrimKind):
            return None
        variants = DECOMPOSITIONS.get(spec.kind, ())
        return variants[self.variant] if 0 <= self.variant < len(variants) else None

    def allocates(self, spec: Spec) -> bool:
        steps = self.steps(spec)
        return steps is not None and any(NEW in step[1] for step in steps)

    def buffer(self, spec: Spec):
        (dim,) = spec.params[:1]
        src = spec.operands[0]
        shape = tuple(1 if d == dim else s for d, s in enumerate(src.shape))
        return new_buffer(shape, src.dtype, self.level)

    def row_buffer(self, spec: Spec):
        """The second buffer (NEW2), if the decomposition has one: a row of the output's
        shape, in L1 or as ``ROW_LEVELS`` says."""
        steps = self.steps(spec)
        if steps is None or not any(NEW2 in step[1] for step in steps):
            return None
        assert isinstance(spec.kind, PrimKind)  # steps() has none for a Chain
        out = spec.operands[spec.kind.info.output]
        level = ROW_LEVELS.get((spec.kind, self.variant), Level.L1)
        return new_buffer(out.shape, out.dtype, level)

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        steps = self.steps(spec)
        if steps is None:
            return None
        new = None
        units, limits = 0, spec.limits
        row = self.row_buffer(spec)
        # Only where its output is stored past the caches (in cache it is a copy).
        if row is not None and not target.gl_in_dram:
            return None
        if not self.allocates(spec):
            if self.level is not BUFFER_LEVELS[0]:
                return None  # one action, not one per level
        else:
            new = self.buffer(spec)
            if new is None:
                return None
            units = 0 if new.level is Level.GL else new.units(target)
        own = list(own_units(self.level, units))
        if row is not None:
            own[row.level] += row.units(target)
        # Each level's units subtracted at once, as the DP subtracts ``own``: two buffers in
        # L1 subtracted one after the other would round the limit down twice.
        for lvl, u in enumerate(own):
            if u:
                left = limits.subtract(Level(lvl), u)
                if left is None:
                    return None
                limits = left
        children = []
        for step in steps:
            kind, args = step[0], step[1]
            picked = []
            for a in args:
                o = new if a == NEW else row if a == NEW2 else spec.operands[a]
                assert o is not None  # only a row that allocates names NEW
                picked.append(o)
            ops = tuple(picked)
            params = step[2] if len(step) > 2 else spec.params[:len(kind.info.params)]
            shape = ops[0].shape if kind is PrimKind.FILL else spec.shape
            want = operand_shapes(kind, shape, params)
            if tuple(o.shape for o in ops) != want:
                if new is not None:  # pragma: no cover - table error
                    raise AssertionError(f"{kind.title} operand shapes {want}")
                return None  # a row without a buffer applies where shapes fit
            children.append(Spec(kind, shape, ops, spec.serial_only, limits, params))
        return Expansion(tuple(children), (1,) * len(children), 0, tuple(own))

    def apply(self, spec: Spec, target: Target) -> Block:
        new = self.buffer(spec) if self.allocates(spec) else None
        steps = self.steps(spec)
        assert steps is not None  # apply follows a successful expand
        row = self.row_buffer(spec)
        assert row is None or new is not None  # a row (NEW2) comes with its first buffer
        return Block(tuple(step[1] for step in steps),
                     tuple(b for b in (new, row) if b is not None))

    def __str__(self) -> str:
        return f"Decompose({self.level}{f', variant={self.variant}' if self.variant else ''})"


def decompose_actions(spec: Spec, target: Target) -> list[Decompose]:
    if not isinstance(spec.kind, PrimKind):
        return []
    return [Decompose(level, v) for v in range(len(DECOMPOSITIONS.get(spec.kind, ())))
            for level in BUFFER_LEVELS]


def identity() -> list:
    """What action indices of decompositions depend on (for the actions fingerprint)."""
    return [[k.name, [[[s[0].name, list(s[1]), repr(s[2:])] for s in steps]
                      for steps in variants]]
            for k, variants in DECOMPOSITIONS.items()] + [[lvl.name for lvl in BUFFER_LEVELS]] + [
                [k.name, v, lvl.name] for (k, v), lvl in ROW_LEVELS.items()]


