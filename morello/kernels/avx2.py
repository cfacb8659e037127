"""The AVX2 kernel table: the rows of every kernel family, in their fixed order.

A kernel's position among its kind's kernels is part of the action index, so rows are
only ever appended to a kind (``morello.identity`` fingerprints the names per kind).
The vector types are the target's (``morello.targets.avx2``).
"""
from __future__ import annotations

from morello.kernels import (
    axpy,
    dots,
    int8,
    moves,
    nontemporal,
    softmax,
    stream,
    taps,
    tiles,
    transpose,
)
from morello.kernels.base import Kernel, KernelTable
from morello.targets.avx2 import VECTOR_TYPES, YMM

__all__ = ["BY_NAME", "KERNELS", "TABLE", "VECTOR_TYPES"]

KERNELS: tuple[Kernel, ...] = (
    *tiles.ROWS,
    *dots.ROWS,
    *axpy.rows(YMM),
    *int8.ROWS,
    *moves.ROWS,
    *nontemporal.ROWS,
    *transpose.ROWS,
    *taps.ROWS,
    # The memory-bound kinds (elementwise, broadcast, reductions, softmax family).
    *stream.rows(YMM),
    *softmax.rows(YMM),
)

TABLE = KernelTable("avx2", KERNELS, VECTOR_TYPES)
BY_NAME = TABLE.by_name
