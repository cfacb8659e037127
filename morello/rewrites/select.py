"""Select: implement a Spec with a kernel from the target's table (a leaf)."""
from __future__ import annotations

from dataclasses import dataclass

from morello.cost import own_units
from morello.kernels import table_for
from morello.memory import Level, Target
from morello.nodes import KernelCall
from morello.rewrites.base import Expansion
from morello.specs import Spec


@dataclass(frozen=True, slots=True)
class Select:
    """Implement the Spec with kernel ``kernel`` (by name)."""

    kernel: str

    def expand(self, spec: Spec, target: Target) -> Expansion | None:
        k = table_for(target).by_name.get(self.kernel)
        if k is None or not k.applies_to(spec, target):
            return None
        if k.vrf_regs > spec.limits.units[Level.VRF]:
            return None
        return Expansion((), (), k.cost(spec, target), own_units(Level.VRF, k.vrf_regs))

    def apply(self, spec: Spec, target: Target) -> KernelCall:
        return KernelCall(self.kernel)

    def __str__(self) -> str:
        return self.kernel


def select_actions(spec: Spec, target: Target) -> list[Select]:
    return [Select(k.name) for k in table_for(target).for_kind(spec.kind)]
