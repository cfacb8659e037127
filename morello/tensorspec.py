"""TensorSpec: what a Spec knows about one operand (shape, dtype, and aux)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

from morello import layouts
from morello.dtypes import Dtype
from morello.errors import SpecError
from morello.layouts import Layout
from morello.memory import Level, Target


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """An operand: ``shape`` and ``dtype`` plus where it lives.

    ``contig`` counts innermost physical dims forming one contiguous block (a tensor is
    *contiguous* when ``contig == len(layout.dims)``). ``vector_size`` (elements per vector
    register) is set exactly when ``level`` is VRF. Canonical instances have a layout with
    no size-1 physical dims (see ``layouts.canonicalize``).
    """

    shape: tuple[int, ...]
    dtype: Dtype
    level: Level
    layout: Layout
    contig: int
    vector_size: int | None = None
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        h = self._hash
        if not h:
            h = hash((self.shape, self.dtype, self.level, self.layout, self.contig,
                      self.vector_size))
            object.__setattr__(self, "_hash", h)
        return h

    def __reduce__(self):
        # The cached hash is per-process (str hashing is salted): never pickle it.
        return (type(self), (self.shape, self.dtype, self.level, self.layout, self.contig,
                             self.vector_size))

    def __post_init__(self) -> None:
        if any(s < 1 for s in self.shape):
            raise SpecError(f"dimension sizes must be >= 1, got {self.shape}")
        if (self.vector_size is not None) != (self.level is Level.VRF):
            raise SpecError(f"vector size {self.vector_size} invalid for {self.level}")
        if not 0 <= self.contig <= len(self.layout.dims):
            raise SpecError(f"contiguity {self.contig} out of range for {self.layout}")

    @property
    def volume(self) -> int:
        return math.prod(self.shape)

    @property
    def contiguous(self) -> bool:
        return self.contig == len(self.layout.dims)

    @property
    def blocks(self) -> int:
        """Separate contiguous runs (rows, for a strided tile of a row-major matrix)."""
        return self.layout.blocks(self.shape, self.contig)

    @property
    def stream_dim(self) -> int:
        """The logical dim along which this tensor's memory runs continue: its innermost
        physical dim, if unpacked and of unit stride (``contig >= 1``); else -1."""
        if not self.layout.dims or self.contig < 1:
            return -1
        inner = self.layout.dims[-1]
        return inner.dim if inner.pack is None else -1

    @property
    def bytes(self) -> int:
        return self.volume * self.dtype.size

    def units(self, target: Target) -> int:
        """Memory units this tensor occupies at its level."""
        if self.level is Level.RF:
            return self.volume
        if self.level is Level.VRF:
            assert self.vector_size is not None
            return -(-self.volume // self.vector_size)
        return self.layout.cache_lines(
            self.shape, self.contig, self.dtype.size, target.line_bytes
        )

    def canonical(self) -> TensorSpec:
        lay, contig = layouts.canonicalize(self.layout, self.shape, self.contig)
        if lay == self.layout and contig == self.contig:
            return self
        return replace(self, layout=lay, contig=contig)

    @functools.lru_cache(maxsize=1 << 18)  # noqa: B019 - frozen values, bounded cache
    def valid_tile_shape(self, tile: tuple[int, ...]) -> bool:
        """Can an aligned ``tile`` of this tensor be described by a TensorSpec?"""
        if len(tile) != len(self.shape) or any(
            t < 1 or t > s for t, s in zip(tile, self.shape)
        ):
            return False
        if not self.layout.applies_to(tile):
            return False
        if self.level is Level.VRF:
            assert self.vector_size is not None
            phys = self.layout.physical_shape(tile)
            if not phys or phys[-1] % self.vector_size:
                return False
        return True

    def tile(self, tile: tuple[int, ...]) -> TensorSpec:
        """The TensorSpec of an aligned tile (``valid_tile_shape`` must hold)."""
        if tile == self.shape:
            return self
        return _tile(self, tile)

    def __str__(self) -> str:
        dims = "×".join(map(str, self.shape))
        parts = [dims, str(self.dtype), str(self.level)]
        if self.level.has_layout and len(self.layout.dims) > 1 and str(self.layout) != "rm":
            parts.append(str(self.layout))
        if not self.contiguous:
            parts.append(f"c{self.contig}")
        if self.vector_size:
            parts.append(f"{self.vector_size}")
        return "(" + ", ".join(parts) + ")"


@functools.lru_cache(maxsize=1 << 16)
def fresh(shape, dtype: Dtype, level: Level, layout: Layout, vector_size=None) -> TensorSpec:
    """A new, fully contiguous buffer's TensorSpec, canonicalized."""
    return TensorSpec(
        tuple(shape), dtype, level, layout, len(layout.dims), vector_size
    ).canonical()


@functools.lru_cache(maxsize=1 << 18)
def _tile(t: TensorSpec, tile: tuple[int, ...]) -> TensorSpec:
    contig = layouts.tile_contig(t.layout, t.shape, tile, t.contig)
    return TensorSpec(tile, t.dtype, t.level, t.layout, contig, t.vector_size).canonical()
