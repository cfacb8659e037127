"""What a kernel table is made of: kernel rows and the target's vector types, and the
checks and costs that kernels of every table share.

A kernel is one table entry (``Kernel``): when it applies (``check`` returns a reason or
None), its cost under the affine model, the vector registers it needs beyond its
operands, how it is written in C, and what it computes (the kind's numpy reference
unless the row says otherwise). A target owns one ``KernelTable``: its kernels in their
fixed order (a kernel's position among its kind's kernels is part of the action index)
and its vector types per (dtype, lanes).

Emitters speak to operands through the codegen's operand protocol:

- ``o.lval()``    C lvalue of a one-element tensor;
- ``o.ptr(off)``  C pointer to the element ``off`` positions after the tile origin, for a
  contiguous tensor in memory;
- ``o.vec(j)``    name of the j-th vector register variable of a VRF tensor;
- ``o.spec``      its TensorSpec.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from morello.cost import move_cost
from morello.dtypes import Dtype
from morello.kinds import PrimKind
from morello.memory import Level, Target
from morello.targets.vector import VecType
from morello.tensorspec import TensorSpec

__all__ = ["Kernel", "KernelTable", "Reason", "VecType"]

Reason = str | None

RL = (Level.RF, Level.L1)     # a scalar's levels (``levels`` of a kernel row)
F32 = (Dtype.F32,)              # dtypes of an operand (``dtypes`` of a kernel row)
BYTES = (Dtype.U8, Dtype.S8)
L1 = (Level.L1,)
VRF = (Level.VRF,)
MEM = (Level.GL, Level.L2, Level.L1)   # not in registers
NOT_RF = (Level.VRF, Level.L1, Level.L2, Level.GL)


# --- Checks and costs that kernels of every table share -------------------------------

def rf_or_l1(t: TensorSpec) -> bool:
    return t.level in (Level.RF, Level.L1)


def lane_count(t: TensorSpec) -> int:
    """Lanes of each vector of a VRF tensor."""
    assert t.vector_size is not None
    return t.vector_size


def vector_count(t: TensorSpec) -> int:
    """Vectors of a VRF tensor."""
    assert t.vector_size is not None
    return t.volume // t.vector_size


def io_cost(spec, target: Target) -> int:
    """``move_cost`` of every operand: what a kernel pays to touch its operands."""
    return sum(move_cost(o, target) for o in spec.operands)


def all_f32(spec) -> Reason:
    if any(o.dtype is not Dtype.F32 for o in spec.operands):
        return "only f32 operands are supported by this kernel"
    return None


def fma_loop_cost(t: Target, steps: int, fmas: int, loads: int, latency: int = 1) -> int:
    """A register tile's loop: ``steps`` steps, each ``fmas`` FMAs and ``loads`` vector
    loads issued on the core's ports at once (whichever is slower), and at least the FMA
    latency of ``latency`` dependent FMAs per accumulator (8 FMAs in flight: 4 cycles on
    2 ports)."""
    c = t.costs
    return steps * max(fmas * c.fma, loads * c.vector_move, latency * 8 * c.fma)


def scalar_check(spec, target: Target) -> Reason:
    """The check of a kernel of one element (its operands in RF or L1: ``levels``)."""
    if spec.volume != 1:
        return "not a scalar"
    return None


def same_contiguous_f32(src: TensorSpec, dst: TensorSpec) -> Reason:
    """Copies element for element: same layout, both contiguous, f32."""
    if not (src.contiguous and dst.contiguous):
        return "operands must be contiguous"
    if src.layout != dst.layout:
        return "layouts differ"
    if src.dtype is not Dtype.F32 or dst.dtype is not Dtype.F32:
        return "only f32"
    return None


def c_value(v: float, dtype: Dtype = Dtype.F32) -> str:
    """A fill value as a C literal of ``dtype``: a float for f32, the bit pattern for
    bf16 (stored as uint16_t: a float assigned to it would be converted to an integer,
    -inf to garbage), an integer for the integer dtypes."""
    if dtype is Dtype.BF16:
        bits = int(np.array(v, np.float32).astype(dtype.np).view(np.uint16))
        return f"0x{bits:04X}u"
    if not dtype.is_float:
        return str(int(v))
    return "-INFINITY" if v == -math.inf else f"{v!r}f"


def pin(*names: str) -> str:
    """A C statement that keeps the vectors ``names`` in registers where they are: an
    empty asm that may have changed them. A vector loaded once and used twice (a row of
    rhs by every row of a register tile; a bf16 vector widened by a shift and by a mask)
    is otherwise reloaded by gcc 12 for each use, folded into the instruction as a memory
    operand: twice the loads, and slower (docs/model-notes.md)."""
    operands = ", ".join(f'"+v"({n})' for n in names)
    return f'__asm__("" : {operands});'


def pin_widened(view, name: str) -> str:
    """``pin(name)`` for a bf16 vector of ``view`` widened by a shift and by a mask, but
    nothing where ``view`` streams from main memory beyond the last-level cache
    (``OperandView.from_dram``): pinned, the matvecs ran slower there and faster in L2 and
    L3 (docs/model-notes.md)."""
    return "" if view.from_dram else pin(name)


@dataclass(frozen=True)
class Kernel:
    """One leaf microkernel.

    - ``check(spec, target)``: None when it applies, else the reason it does not;
    - ``cost(spec, target)``: its main cost (the model's units);
    - ``vrf_regs``: vector registers it needs beyond its operands;
    - ``emit(writer, spec, operands, vt)``: writes its C; ``vt(dtype, lanes)`` gives the
      target's ``VecType``;
    - ``reference``: numpy semantics ``(params, inputs, out) -> new out`` when they differ
      from the kind's (``KindInfo.reference``), e.g. a saturating integer kernel;
    - hints the search core checks before asking ``check`` (necessary conditions only):
      ``unit_dims`` Spec dims that must be 1, ``scalar`` every Spec dim is 1, and
      ``needs_vrf`` some operand is in VRF;
    - ``levels``: per operand, the levels it may be in (None: any; ``()``: no rule). A
      part of the kernel's applicability (``applies_to`` and ``why_not`` test it before
      ``check``), so the core may test it too without asking Python: most Specs the
      search reaches have an operand in main memory or L2, where no kernel applies.
    - ``dtypes``: the same per operand for dtypes (an integer search reaches many Specs
      that only the integer kernels could take).
    - ``nontemporal``: it stores past the caches; the emitter fences those stores once,
      where the function (or a parallel loop's iteration) ends, not after every call: a
      fence per 16 KiB row made a 4096x4096 softmax no faster than cached stores.
    """

    name: str
    kind: PrimKind
    check: Callable
    cost: Callable
    vrf_regs: int
    emit: Callable
    doc: str = ""
    unit_dims: tuple[int, ...] = ()
    scalar: bool = False
    needs_vrf: bool = False
    levels: tuple[tuple[Level, ...] | None, ...] = ()
    dtypes: tuple[tuple[Dtype, ...] | None, ...] = ()
    nontemporal: bool = False
    reference: Callable | None = field(default=None, compare=False)

    def applies_to(self, spec, target) -> bool:
        if spec.kind is not self.kind:
            return False
        for allowed, t in zip(self.levels, spec.operands):  # _level_reason, without words
            if allowed is not None and t.level not in allowed:
                return False
        for dts, t in zip(self.dtypes, spec.operands):
            if dts is not None and t.dtype not in dts:
                return False
        return self.check(spec, target) is None

    def why_not(self, spec, target) -> Reason:
        if spec.kind is not self.kind:
            return f"{self.name} implements {self.kind.title}, not {spec.kind.title}"
        return self._level_reason(spec) or self.check(spec, target)

    def _level_reason(self, spec) -> Reason:
        for i, (allowed, t) in enumerate(zip(self.levels, spec.operands)):
            if allowed is not None and t.level not in allowed:
                names = "/".join(str(lvl) for lvl in allowed)
                return f"{spec.info.operands[i]} must be in {names}"
        for i, (dts, t) in enumerate(zip(self.dtypes, spec.operands)):
            if dts is not None and t.dtype not in dts:
                names = "/".join(str(d) for d in dts)
                return f"{spec.info.operands[i]} must be {names}"
        return None

    def dtype_masks(self, nops: int) -> list[int]:
        """``dtypes`` as one bitmask (bit ``Dtype.code``) per operand, -1 for any (the
        core's hint)."""
        out = [-1] * nops
        for i, dts in enumerate(self.dtypes[:nops]):
            if dts is not None:
                out[i] = sum(1 << d.code for d in set(dts))
        return out

    def level_masks(self, nops: int) -> list[int]:
        """``levels`` as one bitmask (bit ``int(level)``) per operand, -1 for any (the
        core's hint)."""
        out = [-1] * nops
        for i, allowed in enumerate(self.levels[:nops]):
            if allowed is not None:
                out[i] = sum(1 << int(lvl) for lvl in set(allowed))
        return out

    def unit_mask(self, rank: int) -> int:
        """Bitmask of the Spec dims that must be 1 (the core's hint)."""
        if self.scalar:
            return (1 << rank) - 1
        return sum(1 << d for d in self.unit_dims if d < rank)

    def semantics(self) -> Callable:
        return self.reference or self.kind.info.reference


class KernelTable:
    """A target's kernels (in their fixed order) and vector types."""

    def __init__(self, isa: str, kernels: tuple[Kernel, ...],
                 vector_types: tuple[VecType, ...]) -> None:
        self.isa = isa
        self.kernels = kernels
        self.by_name = {k.name: k for k in kernels}
        if len(self.by_name) != len(kernels):
            raise ValueError(f"{isa}: kernel names are not unique")
        self._vt = {(v.dtype, v.lanes): v for v in vector_types}

    @functools.cache  # noqa: B019 - one table per ISA, alive for the process
    def for_kind(self, kind: PrimKind) -> tuple[Kernel, ...]:
        return tuple(k for k in self.kernels if k.kind is kind)

    def vector_type(self, dtype: Dtype, lanes: int) -> VecType:
        try:
            return self._vt[(dtype, lanes)]
        except KeyError:
            raise KeyError(f"{self.isa} has no vector of {lanes} x {dtype}") from None

    def has_vector(self, dtype: Dtype, lanes: int) -> bool:
        return (dtype, lanes) in self._vt

    def vector_identity(self) -> list:
        """The (dtype, lanes) of its vector types: which VRF Moves are offered."""
        return sorted((d.short, n) for d, n in self._vt)

    def identity(self) -> list:
        """What an action index depends on in this table: kernel names per kind."""
        return [[k.name for k in self.for_kind(kind)] for kind in PrimKind]
