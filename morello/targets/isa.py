"""What an instruction set is to morello: one ``Isa`` row per target family.

A ``Target`` (``morello.memory``) names its ISA (``Target.isa``); the row says what code
for it is made of and where it runs: its vector types, the vector types its stream
kernels are made in, the module whose ``TABLE`` is its kernel table, the C partial every
program includes, the host's CPU flags it needs, and how the generic emitter spells a
fence after non-temporal stores and a prefetch.
"""
from __future__ import annotations

from dataclasses import dataclass

from morello.memory import Level
from morello.targets.vector import VecType


@dataclass(frozen=True, slots=True)
class Isa:
    """One instruction set: its vector types and how its code is spelled and run."""

    name: str
    vector_types: tuple[VecType, ...]
    kernels: str                   # the module whose ``TABLE`` is the kernel table
    host_flags: tuple[str, ...]    # /proc/cpuinfo flags its code needs
    prelude: str = "prelude.c"     # the C partial (``codegen/partials``) every program includes

    # The generic emitter's fence and prefetches, spelled as its vector types spell them.

    @property
    def fence(self) -> str:
        return self.vector_types[0].fence

    def hint(self, level: Level) -> str:
        return self.vector_types[0].hint(level)

    def prefetch(self, ptr: str, level: Level | str) -> str:
        return self.vector_types[0].prefetch(ptr, level)

    def vector(self, dtype, lanes: int) -> VecType:
        """Its vector type of ``lanes`` x ``dtype``; KeyError if it has none."""
        for v in self.vector_types:
            if v.dtype is dtype and v.lanes == lanes:
                return v
        raise KeyError(f"{self.name} has no vector of {lanes} x {dtype}")
