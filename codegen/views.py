"""What the emitter hands a kernel of each operand: buffers, references into them at a
tile origin (affine in the enclosing loops' variables), and the C text of an element's
address or vector (``OperandView``)."""
from __future__ import annotations

from dataclasses import dataclass, field

from morello.codegen.affine import Affine
from morello.layouts import Layout
from morello.memory import Level
from morello.tensorspec import TensorSpec

Coord = Affine  # a tile origin: affine in the enclosing loops' variables
Offset = Affine | str  # a buffer offset; C text only where a pack division stays


def _term(x: Coord, pack: int | None, inner: bool) -> Offset:
    if not pack:
        return x
    dm = x.divmod(pack)
    if dm is not None:
        return dm[1] if inner else dm[0]
    return f"(({x}) % {pack})" if inner else f"(({x}) / {pack})"


def index_expr(layout: Layout, shape: tuple[int, ...], origin: tuple[Coord, ...]) -> Offset:
    """Buffer offset of ``origin`` for a buffer of ``shape`` laid out by ``layout``."""
    total = Affine()
    text = []
    for d, p, inner, stride in layout.index_terms(shape):
        t = _term(origin[d], p, inner)
        if isinstance(t, Affine):
            total = total + t.scaled(stride)
        else:
            text.append(t if stride == 1 else f"{t} * {stride}")
    if not text:
        return total
    if total != Affine():
        text.append(total.c())
    return " + ".join(text)


def _plus(base: Offset, off: int | str | Affine) -> str:
    if isinstance(base, Affine) and not isinstance(off, str):
        return (base + off).c()
    if isinstance(off, int) and off == 0:
        return str(base)
    return f"{base} + {off}"


@dataclass(frozen=True)
class Buffer:
    name: str
    tensor: TensorSpec  # the whole buffer's TensorSpec (its shape and layout)
    registers: bool
    # A strided view (``nodes.View.strides``): element x at ``base + sum(x[d] *
    # strides[d])`` of the C array ``name``, whatever ``tensor``'s layout says.
    strides: tuple[int, ...] | None = None
    base: Affine = field(default_factory=Affine)


@dataclass(frozen=True)
class Ref:
    buffer: Buffer
    origin: tuple[Coord, ...]

    def shifted(self, dim: int, by: int | Affine) -> Ref:
        o = list(self.origin)
        o[dim] = o[dim] + by
        return Ref(self.buffer, tuple(o))


class OperandView:
    """What a kernel emitter sees of one operand (see ``morello.kernels.base``)."""

    def __init__(self, ref: Ref, spec: TensorSpec) -> None:
        self.ref = ref
        self.spec = spec
        # Set by the emitter when this kernel should prefetch the next tile of an
        # enclosing loop (``Prefetcher._stream_next``): a C expression, the element offset
        # from any element of this view to the same element of that tile (0 on the
        # loop's last iteration). A kernel that emits the prefetches sets ``prefetched``.
        self.next_tile: str | None = None
        # Where to: L2 in a problem beyond the last-level cache, where the next tile comes
        # from DRAM; else L1 (``Prefetcher._stream_next``).
        self.next_tile_hint = "_MM_HINT_T0"
        self.prefetched = False
        # Lines ahead along a long run of this operand that the kernel may prefetch into
        # L2 (``CostConstants.gl_prefetch``): set for main-memory operands of a problem
        # beyond the last-level cache (``_Emitter.dram``), else 0.
        self.prefetch_lines = 0
        # Whether this is such an operand (main memory, the problem beyond the LLC).
        self.from_dram = False
        # For such an operand, how far ahead (in bytes of it read in between) a kernel may
        # prefetch lines into L2 and find them there: L2 as the target sizes it (256 KiB;
        # hosts have 512 KiB to 2 MiB).
        self.prefetch_room = 0
        # For such an operand, the target's last-level cache (``Target.llc_bytes``): a
        # buffer not much larger keeps part of itself there from one call to the next.
        self.llc_bytes = 0

    def _offset(self) -> Offset:
        b = self.ref.buffer
        if b.strides is not None:
            total = b.base
            for x, st in zip(self.ref.origin, b.strides):
                total = total + x.scaled(st)
            return total
        return index_expr(b.tensor.layout, b.tensor.shape, self.ref.origin)

    def lval(self) -> str:
        b = self.ref.buffer
        off = self._offset()
        if b.registers:
            if not isinstance(off, Affine) or off.constant is None:
                raise AssertionError("register tile with a symbolic origin")
            k = off.constant
            if b.tensor.level is Level.VRF:
                vs = b.tensor.vector_size
                assert vs is not None
                return f"{b.name}_{k // vs}[{k % vs}]"
            return f"{b.name}_{k}"
        return f"{b.name}[{off}]"

    def ptr(self, off: int | str) -> str:
        return f"&{self.ref.buffer.name}[{_plus(self._offset(), off)}]"

    def ptr_at(self, coord: tuple[int, ...]) -> str:
        """C pointer to the element at ``coord`` (tile coordinates) of a tensor in memory."""
        return self.at(coord).ptr(0)

    def at(self, coord: tuple[int | Affine, ...]) -> OperandView:
        """The view whose origin is ``coord`` (tile coordinates: ints, or ``Affine``
        expressions of a kernel's own loop variables) from this one's."""
        ref = self.ref
        for d, c in enumerate(coord):
            if not (isinstance(c, int) and c == 0):
                ref = ref.shifted(d, c)
        return OperandView(ref, self.spec)

    def vec(self, j: int) -> str:
        b = self.ref.buffer
        off = self._offset()
        assert isinstance(off, Affine) and off.constant is not None
        k = off.constant
        vs = b.tensor.vector_size
        assert vs is not None
        assert k % vs == 0
        return f"{b.name}_{k // vs + j}"
