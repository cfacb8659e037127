"""Layouts: how a tensor's logical coordinates map to its buffer.

A Layout is a sequence of physical dims, outer to inner. Each physical dim names the
logical dim it indexes and, for a *packed* dim, a pack size ``p``: the logical dim is split
into an outer part ``x // p`` (an unpacked physical dim of the same logical dim, further out)
and an inner part ``x % p``. Example: B ``[b, k, n]`` packed along n by 16 is
``[(0), (2), (1), (2, p=16)]``: panels of 16 columns stored k-major, which the
outer-product microkernel reads contiguously.

``contig`` (kept in TensorSpec) counts the innermost physical dims that form one contiguous
block; ``contig == len(layout.dims)`` means the whole tensor is contiguous.

Tiles stay aligned: a tile of size t along a packed dim requires ``t % p == 0`` or
``p % t == 0``, so a tile never straddles a pack unevenly.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PhysDim:
    """One physical dim: logical dim ``dim``; ``pack`` is None (the rest) or a size."""

    dim: int
    pack: int | None = None

    def __str__(self) -> str:
        return f"{self.dim}" if self.pack is None else f"{self.dim}p{self.pack}"


@dataclass(frozen=True, slots=True)
class Layout:
    dims: tuple[PhysDim, ...]
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        h = self._hash
        if not h:
            h = hash(self.dims)
            object.__setattr__(self, "_hash", h)
        return h

    def __reduce__(self):
        # The cached hash is per-process (str hashing is salted): never pickle it.
        return (type(self), (self.dims,))

    def __str__(self) -> str:
        if all(d.pack is None for d in self.dims) and list(self.dims) == sorted(
                self.dims, key=lambda d: d.dim):
            return "rm"
        return "[" + ",".join(str(d) for d in self.dims) + "]"

    @property
    def is_packed(self) -> bool:
        return any(d.pack is not None for d in self.dims)

    def pack_of(self, dim: int) -> int | None:
        for pd in self.dims:
            if pd.dim == dim and pd.pack is not None:
                return pd.pack
        return None

    @functools.lru_cache(maxsize=1 << 16)  # noqa: B019 - frozen values, bounded cache
    def physical_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        out = []
        for pd in self.dims:
            size = shape[pd.dim]
            p = self.pack_of(pd.dim)
            if pd.pack is not None:
                out.append(min(pd.pack, size))
            elif p is not None:
                out.append(-(-size // p))
            else:
                out.append(size)
        return tuple(out)

    def applies_to(self, shape: tuple[int, ...]) -> bool:
        """Every logical dim of size > 1 appears; packs divide evenly."""
        present = {pd.dim for pd in self.dims}
        if any(s > 1 and d not in present for d, s in enumerate(shape)):
            return False
        for pd in self.dims:
            if pd.dim >= len(shape):
                return False
            if pd.pack is not None:
                s = shape[pd.dim]
                if s % pd.pack and pd.pack % s:
                    return False
        return True

    def cache_lines(self, shape, contig: int, elem_bytes: int, line: int) -> int:
        phys = self.physical_shape(shape)
        first = len(phys) - contig
        return math.prod(phys[:first]) * -(-(math.prod(phys[first:]) * elem_bytes) // line)

    def blocks(self, shape, contig: int) -> int:
        """How many separate contiguous runs a tensor of ``shape`` with ``contig`` has."""
        phys = self.physical_shape(shape)
        return math.prod(phys[: len(phys) - contig])

    def index_terms(self, shape: tuple[int, ...]):
        """For a buffer of ``shape``: [(logical dim, pack-or-None, is_inner, stride)].

        The buffer offset of coordinate x is the sum over terms of
        ``(x[d] % pack if is_inner else x[d] // pack if pack else x[d]) * stride``.
        """
        phys = self.physical_shape(shape)
        terms: list[tuple[int, int | None, bool, int]] = []
        stride = 1
        for pd, size in reversed(list(zip(self.dims, phys))):
            outer_pack = None if pd.pack is not None else self.pack_of(pd.dim)
            if pd.pack is not None:
                terms.append((pd.dim, pd.pack, True, stride))
            else:
                terms.append((pd.dim, outer_pack, False, stride))
            stride *= size
        return list(reversed(terms))

    def offset(self, shape: tuple[int, ...], coord: tuple[int, ...]) -> int:
        """Buffer offset of a concrete coordinate (used for register tiles and tests)."""
        total = 0
        for d, p, inner, stride in self.index_terms(shape):
            x = coord[d]
            total += (x % p if inner else x // p if p else x) * stride
        return total


def row_major(rank: int) -> Layout:
    return Layout(tuple(PhysDim(i) for i in range(rank)))


def col_major(rank: int) -> Layout:
    """The last two dims swapped (batched column-major)."""
    order = list(range(rank - 2)) + [rank - 1, rank - 2]
    return Layout(tuple(PhysDim(i) for i in order))


def packed(base: Layout, dim: int, p: int) -> Layout:
    return Layout(base.dims + (PhysDim(dim, p),))


@functools.lru_cache(maxsize=1 << 16)
def canonicalize(layout: Layout, shape: tuple[int, ...], contig: int) -> tuple[Layout, int]:
    """Drop physical dims of size 1 and packs that no longer split anything.

    Returns the canonical (layout, contig). Two tensors with equal canonical forms have
    the same element placement relative to their first element.
    """
    phys = layout.physical_shape(shape)
    n = len(phys)
    dims: list[PhysDim] = []
    new_contig = contig
    for i, (pd, size) in enumerate(zip(layout.dims, phys)):
        if size == 1:
            if i >= n - contig:
                new_contig -= 1
            continue
        dims.append(pd)
    # A pack whose outer dim vanished (or never existed) is just the whole dim.
    out: list[PhysDim] = []
    for pd in dims:
        if pd.pack is not None and not any(
            q.dim == pd.dim and q.pack is None for q in dims
        ):
            pd = PhysDim(pd.dim)
        out.append(pd)
    # Adjacent outer/inner parts of one logical dim fuse into one plain dim.
    fused: list[PhysDim] = []
    fused_contig = new_contig
    for i, pd in enumerate(out):
        if (
            fused
            and pd.pack is not None
            and fused[-1].dim == pd.dim
            and fused[-1].pack is None
            and i >= len(out) - new_contig  # both inside the contiguous block
        ):
            fused_contig -= 1
            continue
        fused.append(pd)
    # Drop packs whose inner part was fused away.
    final = [
        PhysDim(pd.dim) if pd.pack is None else pd for pd in fused
    ]
    return Layout(tuple(final)), max(0, min(fused_contig, len(final)))


@functools.lru_cache(maxsize=1 << 16)
def tile_contig(layout: Layout, parent: tuple[int, ...], tile: tuple[int, ...], contig: int) -> int:
    """Contiguity of an aligned tile of a tensor with this layout (before canonicalizing)."""
    pp = layout.physical_shape(parent)
    tp = layout.physical_shape(tile)
    n = len(pp)
    k = n
    for i in range(n):
        j = n - 1 - i
        if pp[j] != tp[j]:
            k = i
            break
    return min(contig, k + 1)
