"""A slow, obviously correct model of the memo table, for tests only.

`DenseMemoTable` has the API of `morello._memo.MemoTable` but keeps a plain
dict from every covered point to its value. It never merges: each point is its
own unit box, so `len(model)` and `covered()` are both the number of points.
Use it only on small grids; `put` visits every point of the box.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from typing import SupportsIndex

import numpy as np
import numpy.typing as npt

MAX_NDIM = 32
MAX_NVALUES = 16

Point = tuple[int, ...]


def _ints(seq: Iterable[SupportsIndex], n: int, name: str) -> Point:
    """seq as a tuple of exactly n Python ints (operator.index semantics)."""
    if isinstance(seq, np.ndarray):
        if seq.ndim != 1:
            raise ValueError(f"{name} has shape {seq.shape}, expected ({n},)")
        if seq.dtype.kind not in "iub":
            raise TypeError(f"{name} must hold integers, not {seq.dtype}")
        seq = seq.tolist()
    out = tuple(operator.index(x) for x in seq)
    if len(out) != n:
        raise ValueError(f"{name} has {len(out)} entries, expected {n}")
    return out


class DenseMemoTable:
    """Dict-of-points model of MemoTable; see the module docstring."""

    def __init__(self, ndim: int, nvalues: int) -> None:
        if not 1 <= ndim <= MAX_NDIM:
            raise ValueError(f"ndim must be in 1..{MAX_NDIM}, got {ndim}")
        if not 1 <= nvalues <= MAX_NVALUES:
            raise ValueError(f"nvalues must be in 1..{MAX_NVALUES}, got {nvalues}")
        self.ndim = ndim
        self.nvalues = nvalues
        self.cells: dict[Point, Point] = {}

    def put(
        self,
        lo: Sequence[SupportsIndex],
        hi: Sequence[SupportsIndex],
        value: Sequence[SupportsIndex],
    ) -> None:
        lo_t = _ints(lo, self.ndim, "lo")
        hi_t = _ints(hi, self.ndim, "hi")
        val = _ints(value, self.nvalues, "value")
        for i, (a, b) in enumerate(zip(lo_t, hi_t)):
            if a < 0:
                raise ValueError(f"lo[{i}] = {a} is negative")
            if a > b:
                raise ValueError(f"lo[{i}] = {a} > hi[{i}] = {b}")
        ranges = [range(a, b + 1) for a, b in zip(lo_t, hi_t)]
        for point in itertools.product(*ranges):
            self.cells[point] = val

    def get(self, point: Sequence[SupportsIndex]) -> Point | None:
        return self.cells.get(_ints(point, self.ndim, "point"))

    def get_many(
        self, points: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        pts = np.asarray(points, dtype=np.int64).reshape(-1, self.ndim)
        values = np.zeros((len(pts), self.nvalues), dtype=np.int64)
        found = np.zeros(len(pts), dtype=np.bool_)
        for r, p in enumerate(pts.tolist()):
            v = self.cells.get(tuple(p))
            if v is not None:
                values[r] = v
                found[r] = True
        return values, found

    def __len__(self) -> int:
        return len(self.cells)

    def covered(self) -> int:
        return len(self.cells)

    def boxes(self) -> list[tuple[Point, Point, Point]]:
        return [(p, p, v) for p, v in sorted(self.cells.items())]

    def to_arrays(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        pts = np.array(sorted(self.cells), dtype=np.int64).reshape(-1, self.ndim)
        values = np.array(
            [self.cells[tuple(p)] for p in pts.tolist()], dtype=np.int64
        ).reshape(-1, self.nvalues)
        return pts, pts.copy(), values

    @classmethod
    def from_arrays(
        cls, lo: npt.ArrayLike, hi: npt.ArrayLike, values: npt.ArrayLike
    ) -> DenseMemoTable:
        lo_a, hi_a = np.asarray(lo), np.asarray(hi)
        val_a = np.asarray(values)
        model = cls(lo_a.shape[1], val_a.shape[1])
        for a, b, v in zip(lo_a.tolist(), hi_a.tolist(), val_a.tolist()):
            before = len(model.cells)
            model.put(a, b, v)
            volume = 1
            for x, y in zip(a, b):
                volume *= y - x + 1
            if len(model.cells) != before + volume:
                raise ValueError("boxes overlap")
        return model
