"""Kernel tables, one per instruction set (``Target.isa``), assembled from one module per
kernel family: register tiles (``tiles``), dot products (``dots``), axpy rows (``axpy``),
integer products (``int8``), moves and fills (``moves``), stores past the caches
(``nontemporal``), the memory-bound kinds (``stream``) and softmax's (``softmax``). The
table modules (``avx2``, ``avx512``) only put rows in their order."""
from __future__ import annotations

import importlib

from morello.kernels.base import Kernel, KernelTable, VecType

__all__ = ["Kernel", "KernelTable", "VecType", "table_for"]


def table_for(target) -> KernelTable:
    """The kernel table of ``target``: the ``TABLE`` of its ISA's kernel module
    (``morello.targets.isa.Isa.kernels``)."""
    from morello import targets

    return importlib.import_module(targets.isa(target.isa).kernels).TABLE
