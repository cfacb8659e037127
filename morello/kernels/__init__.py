"""Kernel tables, one per target ISA (``Target.isa``)."""
from __future__ import annotations

from morello.kernels.base import Kernel, KernelTable, VecType

__all__ = ["Kernel", "KernelTable", "VecType", "table_for"]


def table_for(target) -> KernelTable:
    """The kernel table of ``target`` (by its ISA)."""
    if target.isa == "avx2":
        from morello.kernels.avx2 import TABLE

        return TABLE
    if target.isa == "avx512":
        from morello.kernels.avx512 import TABLE as TABLE512

        return TABLE512
    raise KeyError(f"no kernel table for ISA {target.isa!r}")
