"""What Python answers the native expander (``morello._expand``), as typed records.

The core asks per distinct operand tile, never per Spec or row, except for kernels
(``select``, once per Spec whose kernels' necessary conditions held in the core) and
for forms it does not expand itself (``compile``). Each answer is a list of records
whose fields are declared here and as the C structs of ``_expand.pxd``; the expander
checks at construction that the two name the same fields in the same order.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from morello.memory import LEVELS, MemoryLimits
from morello.rewrites import actions
from morello.rewrites.move import operand_moves, view_cost
from morello.specs import Spec

if TYPE_CHECKING:
    from morello.search import Engine

UNBOUNDED = MemoryLimits(tuple(1 << 40 for _ in LEVELS))


def logical(spec: Spec) -> Spec:
    """The Spec with its limits erased (the key of the logical graph)."""
    return spec.with_limits(UNBOUNDED)


class MoveRecord(NamedTuple):
    """One Move of an operand of a form (``_expand.pxd``: ``move_t``)."""

    dest: int   # the destination TensorSpec's id; -1: this Move does not apply
    level: int  # the level it allocates at
    units: int  # the units it allocates there
    cost: int   # its constant cost (``rewrites.move.view_cost``)
    view: int   # 1: a cache view (no copy, no logues)


class KernelRecord(NamedTuple):
    """A kernel that applies to a Spec (``_expand.pxd``: ``kernel_t``)."""

    position: int  # among its kind's kernels (the action index's offset)
    cost: int
    vrf_regs: int  # vector registers it holds


class TemplateRow(NamedTuple):
    """One action of a Spec the Python rewrites expanded: the affine rule of
    ``morello.cost`` (``_expand.pxd``: ``rows_t``, one row)."""

    action: int                         # the action's index
    const: int                          # its constant cost
    own: tuple[int, ...]                # units allocated per memory level
    children: tuple[tuple[int, int], ...]  # (logical id, coefficient) per child


class Bridge:
    """The callbacks of ``engine``'s expander: ``tile``, ``moves``, ``select`` for the
    native forms, ``compile`` for the rest (and every form with ``native=False``)."""

    records = (MoveRecord, KernelRecord, TemplateRow)

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def tile(self, tid: int, shape: tuple[int, ...]) -> int:
        """The id of tensor ``tid`` tiled to ``shape``, or -1 if it cannot be."""
        eng = self.engine
        t = eng.tensors[tid]
        if not t.valid_tile_shape(shape):
            return -1
        return eng.tid_of(t.tile(shape))

    def moves(self, form: int, op: int, tid: int) -> list[MoveRecord]:
        """Every Move action of operand ``op`` (tensor ``tid``) of ``form``, in order."""
        eng = self.engine
        t, target = eng.tensors[tid], eng.target
        kind = eng.form_keys[form][0]
        written = op in kind.info.writes
        out = []
        for m in operand_moves(kind, op, t, target):
            dest = m.destination_of(t)
            if dest is None:
                out.append(MoveRecord(-1, 0, 0, 0, 0))
                continue
            new, view = dest
            out.append(MoveRecord(eng.tid_of(new), int(m.level), m.units(new, target),
                                  view_cost(t, new, view, written, target), int(view)))
        return out

    def select(self, i: int, positions: list[int] | None = None) -> list[KernelRecord]:
        """The kernels that apply to logical Spec ``i``; ``positions``: only those of the
        kind's kernels (the ones whose hints held in the core)."""
        eng = self.engine
        spec = eng.spec_of(i)
        table = eng.kernels.for_kind(spec.kind)
        out = []
        for pos in range(len(table)) if positions is None else positions:
            k = table[pos]
            if k.applies_to(spec, eng.target):
                out.append(KernelRecord(pos, k.cost(spec, eng.target), k.vrf_regs))
        eng._tick()
        return out

    def compile(self, i: int) -> list[TemplateRow]:
        """The rows of logical Spec ``i``, expanded by the Python rewrites."""
        eng = self.engine
        spec, target = eng.spec_of(i), eng.target
        out = []
        for idx, act in enumerate(actions(spec, target)):
            exp = act.expand(spec, target)
            if exp is not None:
                out.append(TemplateRow(idx, exp.const, tuple(exp.own), tuple(
                    (eng.id_of(logical(c)), k) for c, k in zip(exp.children, exp.coefs))))
        eng._tick()
        return out
