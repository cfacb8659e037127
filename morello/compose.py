"""Compose: a chain of primitives as one Spec, with a kind row derived from its parts.

A ``Chain`` is a tuple of ``Component``\\ s, the *head* first: the head runs last and
writes the chain's output, and component ``i``'s first input is the output of component
``i + 1`` (the published system's order). Each component is a primitive kind with its
parameters and ``dims``: for every Spec dim of the component, the *chain dim* it is.
Chain dims are shared where an output feeds an input, so the chain's Spec shape is one
tuple over all of them. Q·Kᵀ → softmax → ·V is::

    Compose(Matmul@0.1.3.4; Softmax{2}@0.1.3; Matmul@0.1.2.3)
    chain dims: 0 batch, 1 rows of Q, 2 columns of Q, 3 rows of Kᵀ's output, 4 columns of V

The chain's operands, in order: the inputs of each component but its first, head to
innermost, then all inputs of the innermost, then the head's output (last). A chain is
a *kind*: ``Chain.info`` is a ``KindInfo`` row derived from the components' rows
(operand map, reads and writes, family name, numpy meaning), so Specs, coordinates,
database tables, loops and the emitter treat a chain like any kind. Its actions
(``morello.rewrites.bufferize``) are ``TileOut`` over its output dims and ``Bufferize``,
which splits the chain at one intermediate held in a chosen level.

Canonical chains number their dims in the order the components first use them,
innermost first; ``chain`` builds them from primitive Specs and checks that neighbours
fit.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np

from morello.errors import SpecError
from morello.kinds import BY_TITLE, KINDS, KindInfo, PrimKind, operand_shapes, output_dims

# The most Spec dims and operands of a chain: its records and points must fit the core
# (1 + rank + 4 * operands + 1 + levels <= morello._graph.MAX_POINT, ``fits_core``).
MAX_CHAIN_RANK = 7
MAX_CHAIN_OPERANDS = 5
MAX_COMPONENTS = 4
FAMILY_PREFIX = "Compose:"


@dataclass(frozen=True, slots=True)
class Component:
    kind: PrimKind
    params: tuple
    dims: tuple[int, ...]  # component Spec dim -> chain dim

    def __str__(self) -> str:
        p = "{" + ",".join(_param_text(v) for v in self.params) + "}" if self.params else ""
        return f"{self.kind.title}{p}@{'.'.join(map(str, self.dims))}"


def _param_text(v) -> str:
    return "-inf" if v == -math.inf else repr(v)


def fits_core(rank: int, n_operands: int) -> str | None:
    """Why a chain of ``rank`` dims and ``n_operands`` operands is too large for the
    core's coordinates, or None."""
    from morello._graph import MAX_POINT
    from morello.memory import NLEVELS

    if rank > MAX_CHAIN_RANK:
        return f"a chain has at most {MAX_CHAIN_RANK} dims, this one {rank}"
    if n_operands > MAX_CHAIN_OPERANDS:
        return (f"a chain has at most {MAX_CHAIN_OPERANDS} operands, this one "
                f"{n_operands}")
    if 1 + rank + 4 * n_operands + 1 + NLEVELS > MAX_POINT:
        return (f"a chain of {rank} dims has at most "
                f"{(MAX_POINT - 2 - rank - NLEVELS) // 4} operands, this one {n_operands}")
    return None


def chain_step_reason(kind: PrimKind, innermost: bool = False) -> str | None:
    """Why ``kind`` cannot be a step of a chain (it must read its inputs into one fresh
    output), or None; ``innermost``: the step that runs first (a lowered kind, whose
    lowering takes whole operands, may be that step only)."""
    info = kind.info
    n = info.n_operands
    if info.scan and kind is not PrimKind.SOFTMAX:
        return f"{info.title} is a part of softmax, not a chain step"
    if info.writes != (n - 1,) or info.reads != tuple(range(n - 1)) or n < 2:
        return f"{info.title} does not read inputs into one fresh output"
    if kind is PrimKind.MOVE:
        return "Move is not a chain step"
    if info.lowered and not innermost:
        return f"{info.title} can only be a chain's first step (its lowering takes whole operands)"
    return None


@dataclass(frozen=True, slots=True)
class Chain:
    """A Compose kind: ``components`` head first (see the module docstring)."""

    components: tuple[Component, ...]

    def __post_init__(self) -> None:
        if not 2 <= len(self.components) <= MAX_COMPONENTS:
            raise SpecError(f"a chain has 2..{MAX_COMPONENTS} steps, got "
                            f"{len(self.components)}")
        last = len(self.components) - 1
        for i, c in enumerate(self.components):
            why = chain_step_reason(c.kind, innermost=i == last)
            if why:
                raise SpecError(why)

    @property
    def info(self) -> KindInfo:
        return _info(self)

    @property
    def title(self) -> str:
        return _info(self).title

    @property
    def name(self) -> str:
        return self.family

    @property
    def family(self) -> str:
        return FAMILY_PREFIX + ";".join(map(str, self.components))

    @property
    def rank(self) -> int:
        return 1 + max(d for c in self.components for d in c.dims)

    def component_shape(self, i: int, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[d] for d in self.components[i].dims)

    def offsets(self) -> list[int]:
        """Per component, the index of its first operand among the chain's operands."""
        out, at = [], 0
        for c in self.components[:-1]:
            out.append(at)
            at += KINDS[c.kind].n_operands - 2
        out.append(at)
        return out

    def fixed_dims(self) -> tuple[int, ...]:
        """Chain dims no loop may tile: the scan dims of its softmaxes, and a conv's
        output pixels (a tile of them would need the image's halo and no padding) and
        channels (each tile a conv lowered and searched anew, the image relaid out for
        each: searches about twice as long, and no cheaper program in the blocks tried)."""
        out = {c.dims[c.params[0]] for c in self.components if KINDS[c.kind].scan}
        for c in self.components:
            if KINDS[c.kind].lowered:  # every output dim but the batch (output dim 0)
                outs = output_dims(c.kind, len(c.dims), c.params)[1:]
                out |= {c.dims[d] for d in outs if d is not None}
        return tuple(sorted(out))

    @property
    def lowered(self) -> bool:
        """A component is implemented only by its lowering (a conv)."""
        return any(KINDS[c.kind].lowered for c in self.components)

    def __str__(self) -> str:
        return self.title


def parse_family(family: str) -> Chain:
    """The chain a table family names (inverse of ``Chain.family``); ValueError if none."""
    if not family.startswith(FAMILY_PREFIX):
        raise ValueError(f"{family!r} is not a Compose family")
    comps = []
    for part in family[len(FAMILY_PREFIX):].split(";"):
        m = re.fullmatch(r"([A-Za-z]+)(?:\{([^{}]*)\})?@(\d+(?:\.\d+)*)", part)
        if m is None or m.group(1) not in BY_TITLE:
            raise ValueError(f"bad Compose component {part[:60]!r}")
        kind = BY_TITLE[m.group(1)]
        params: tuple = ()
        if m.group(2) is not None:
            params = tuple(int(t) if t.lstrip("-").isdigit() else float(t)
                           for t in m.group(2).split(","))
        dims = tuple(int(t) for t in m.group(3).split("."))
        comps.append(Component(kind, params, dims))
    try:
        ch = Chain(tuple(comps))
        _info(ch)
    except SpecError as e:
        raise ValueError(str(e)) from None
    if canonical(ch) != ch:
        raise ValueError(f"{family[:80]!r} is not a canonical chain")
    return ch


def canonical(ch: Chain) -> Chain:
    """The chain with its dims renumbered in order of first use, innermost first."""
    order: dict[int, int] = {}
    for c in reversed(ch.components):
        for d in c.dims:
            order.setdefault(d, len(order))
    comps = tuple(Component(c.kind, c.params, tuple(order[d] for d in c.dims))
                  for c in ch.components)
    return Chain(comps)


def renumbering(ch: Chain) -> list[int]:
    """The chain dims of ``ch`` in the order ``canonical(ch)`` numbers them."""
    seen: list[int] = []
    for c in reversed(ch.components):
        for d in c.dims:
            if d not in seen:
                seen.append(d)
    return seen


@functools.lru_cache(maxsize=1024)
def _info(ch: Chain) -> KindInfo:
    comps = ch.components
    rank = ch.rank
    if rank > MAX_CHAIN_RANK:
        raise SpecError(f"a chain has at most {MAX_CHAIN_RANK} dims, this one {rank}")
    for c in comps:
        info = KINDS[c.kind]
        reason = info.check_params(len(c.dims), c.params)
        if reason:
            raise SpecError(reason)
        if len(set(c.dims)) != len(c.dims) or min(c.dims) < 0:
            raise SpecError(f"{c}: each Spec dim needs its own chain dim")
    names: list[str] = []
    omap: list[tuple] = []

    def remap(i: int, operand: int) -> tuple:
        c = comps[i]
        dims = KINDS[c.kind].operand_map(len(c.dims), c.params)[operand]
        return tuple((tuple(c.dims[s] for s in sdims), k) for sdims, k in dims)

    last = len(comps) - 1
    for i, c in enumerate(comps):
        info = KINDS[c.kind]
        first = 0 if i == last else 1
        for j in range(first, info.n_operands - 1):
            names.append(f"{info.operands[j]}{i}")
            omap.append(remap(i, j))
    names.append("out")
    omap.append(remap(0, KINDS[comps[0].kind].n_operands - 1))
    if why := fits_core(rank, len(names)):
        raise SpecError(why)
    # Neighbours must agree: component i's first input is component i+1's output.
    for i in range(last):
        want = remap(i, 0)
        got = remap(i + 1, KINDS[comps[i + 1].kind].n_operands - 1)
        if len(want) != len(got) or not all(
                a == b or ((), 1) in (a, b) and len(a[0] + b[0]) == 1 and a[1] + b[1] == 1
                for a, b in zip(want, got)):
            raise SpecError(f"{comps[i].kind.title} does not read the output of "
                            f"{comps[i + 1].kind.title} (dims {want} and {got})")
    omap_t = tuple(omap)
    n = len(names)

    def operand_map(r: int, params: tuple) -> tuple:
        return omap_t

    def reference(params, ins, out):
        return evaluate(ch, list(ins), out)

    title = "Compose(" + ", ".join(
        KINDS[c.kind].title + ("{" + ",".join(_param_text(v) for v in c.params) + "}"
                               if c.params else "")
        for c in comps) + ")"
    return KindInfo(
        title, (), tuple(names), tuple(range(n - 1)), (n - 1,), (rank, rank), operand_map,
        ch.family, None, reference, scan=True, doc=" <- ".join(
            KINDS[c.kind].doc for c in comps))


def evaluate(ch: Chain, inputs: list, out: np.ndarray | None, shape=None) -> np.ndarray:
    """numpy semantics: run the components innermost first (intermediates in f32)."""
    comps = ch.components
    offs = ch.offsets()
    if shape is None:
        shape = _shape_from_inputs(ch, inputs, out)
    value = None
    for i in range(len(comps) - 1, -1, -1):
        c = comps[i]
        info = KINDS[c.kind]
        cshape = ch.component_shape(i, shape)
        k = info.n_operands - 1
        if i == len(comps) - 1:
            ins = inputs[offs[i]:offs[i] + k]
        else:
            ins = [value] + inputs[offs[i]:offs[i] + k - 1]
        oshape = operand_shapes(c.kind, cshape, c.params)[-1]
        dst = out if i == 0 and out is not None else np.empty(oshape, ins[0].dtype)
        value = info.reference(c.params, [np.asarray(x) for x in ins], dst)
    assert value is not None
    return value


def _shape_from_inputs(ch: Chain, inputs: list, out=None) -> tuple[int, ...]:
    """The chain's shape from its operands' (the output's too, if given: a conv's output
    pixels are no input's single dims)."""
    shape = [1] * ch.rank
    omap = ch.info.operand_map(ch.rank, ())
    arrays = list(inputs) + ([out] if out is not None else [])
    for x, dims in zip(arrays, omap):
        for size, (sdims, _) in zip(np.shape(x), dims):
            if len(sdims) == 1:
                shape[sdims[0]] = size
    return tuple(shape)


def sub_chain(ch: Chain, lo: int, hi: int):
    """Components ``lo..hi-1`` as a kind: a primitive (one component) or a canonical
    chain, with the chain dims it uses, in the order its Spec dims take them."""
    comps = ch.components[lo:hi]
    if len(comps) == 1:
        return comps[0].kind, comps[0].params, comps[0].dims
    part = Chain(comps)
    return canonical(part), (), tuple(renumbering(part))


def split_steps(ch: Chain, index: int, new: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Bufferizing the input of component ``index``: the operands of the inner part
    (components ``index+1..``) and of the outer part (``..index``), as indices of the
    chain's operands or ``new`` for the intermediate."""
    offs = ch.offsets()
    n = len(ch.info.operands)
    inner = tuple(range(offs[index + 1], n - 1)) + (new,)
    k = KINDS[ch.components[index].kind].n_operands - 2  # its inputs but the first
    outer = tuple(range(0, offs[index])) + (new,) + tuple(
        range(offs[index], offs[index] + k)) + (n - 1,)
    return inner, outer
