"""Hypothesis strategies for small canonical Specs and their parts.

Every strategy ends in ``_st``. Operands are drawn over all memory levels, with
layouts from ``morello.rewrites.move.layout_candidates`` (the layouts a relayout Move
can reach), any contiguity, and, for VRF operands, a vector size of the target that
divides the innermost physical dim. Specs are canonicalized before they are returned,
so the search accepts them.
"""
from __future__ import annotations

from hypothesis import assume
from hypothesis import strategies as st

from morello import layouts
from morello.dtypes import Dtype
from morello.kinds import FILL_VALUES, KINDS
from morello.layouts import Layout, PhysDim
from morello.memory import AVX2, LEVELS, Level, MemoryLimits, Target
from morello.rewrites.move import layout_candidates
from morello.specs import PrimKind, Spec, operand_shapes
from morello.tensorspec import TensorSpec

MATMUL_KINDS = (PrimKind.MATMUL, PrimKind.MATMUL_ACCUM, PrimKind.MATMUL_SAT16,
                PrimKind.MATMUL_SAT16_ACCUM)
# Operand dtypes a matmul of each family takes (f32 drawn most often).
MATMUL_DTYPES = {
    "Matmul": [(Dtype.F32,) * 3] * 3 + [(Dtype.F32, Dtype.BF16, Dtype.F32),
                                        (Dtype.U8, Dtype.S8, Dtype.S32),
                                        (Dtype.S16, Dtype.S8, Dtype.S32)],
    "MatmulSat16": [(Dtype.U8, Dtype.S8, Dtype.S32)],
}


def pow2_or_zero_st(top: int) -> st.SearchStrategy[int]:
    """0 or a power of two <= ``top`` (a cache-level limit)."""
    return st.sampled_from([0] + [1 << i for i in range(top.bit_length())])


@st.composite
def limits_st(draw, top: tuple[int, ...] = AVX2.capacity) -> MemoryLimits:
    """Limits componentwise <= ``top``; L1 and GL are powers of two (or 0)."""
    units = [
        draw(st.integers(0, t)) if lvl.counts_registers else draw(pow2_or_zero_st(t))
        for lvl, t in zip(LEVELS, top)
    ]
    return MemoryLimits(tuple(units))


@st.composite
def larger_limits_st(draw, base: MemoryLimits, top: tuple[int, ...] = AVX2.capacity):
    """Limits componentwise >= ``base`` (and <= ``top`` where ``base`` allows)."""
    units = []
    for lvl, b, t in zip(LEVELS, base.units, top):
        t = max(t, b)
        if lvl.counts_registers:
            units.append(draw(st.integers(b, t)))
        else:
            units.append(draw(st.sampled_from(
                [u for u in [0] + [1 << i for i in range(t.bit_length())]
                 if b <= u <= t])))
    return MemoryLimits(tuple(units))


def small_limits_st() -> st.SearchStrategy[MemoryLimits]:
    """Reduced limits, so that exhaustive search on tiny Specs stays fast."""
    return limits_st(top=(4, 4, 16, 32, 64))


@st.composite
def layout_st(draw, rank: int, max_len: int = 6, max_pack: int = 64) -> Layout:
    """Any tuple of physical dims of a rank-``rank`` tensor (not only valid layouts)."""
    if rank == 0:
        return Layout(())
    dims = draw(st.lists(
        st.builds(PhysDim, st.integers(0, rank - 1),
                  st.none() | st.integers(1, max_pack)),
        max_size=max_len,
    ))
    return Layout(tuple(dims))


def _vector_sizes(layout: Layout, shape, dtype: Dtype, target: Target) -> list[int]:
    phys = layout.physical_shape(shape)
    sizes = [vb // dtype.size for vb in target.vector_bytes]
    return [vs for vs in sizes if phys and phys[-1] % vs == 0]


@st.composite
def tensorspec_st(draw, shape: tuple[int, ...], dtype: Dtype = Dtype.F32,
                  levels=LEVELS, target: Target = AVX2) -> TensorSpec:
    """A canonical operand of ``shape`` in one of ``levels``.

    RF operands are row-major (registers have no layout); the others take a reachable
    layout. A VRF operand needs a vector size dividing its innermost physical dim; when
    no reachable layout has one, another level is drawn instead.
    """
    cands = layout_candidates(tuple(shape), AVX2.pack_sizes)
    vrf_ok = [lay for lay in cands if _vector_sizes(lay, shape, dtype, target)]
    allowed = [lvl for lvl in levels if lvl is not Level.VRF or vrf_ok]
    assume(allowed)
    level = draw(st.sampled_from(allowed))
    vector_size = None
    if level is Level.RF:
        layout = cands[0]  # canonical row-major for this shape
    elif level is Level.VRF:
        layout = draw(st.sampled_from(vrf_ok))
        vector_size = draw(st.sampled_from(_vector_sizes(layout, shape, dtype, target)))
    else:
        layout = draw(st.sampled_from(cands))
    contig = draw(st.integers(0, len(layout.dims)))
    t = TensorSpec(tuple(shape), dtype, level, layout, contig, vector_size)
    return t.canonical()


def _dim_st(max_dim: int) -> st.SearchStrategy[int]:
    return st.integers(1, max_dim)


@st.composite
def matmul_spec_st(draw, kinds=MATMUL_KINDS, max_dim: int = 4, max_batch: int = 1,
                   levels=LEVELS, limits=None, dtype: Dtype | None = None) -> Spec:
    """A canonical Spec of the Matmul families ``[b, m, k, n]`` with small dims, over
    one of the dtype mixes of its family (``MATMUL_DTYPES``) unless ``dtype`` is given."""
    kind = draw(st.sampled_from(kinds))
    shape = (draw(_dim_st(max_batch)),) + tuple(
        draw(_dim_st(max_dim)) for _ in range(3))
    dts = (dtype,) * 3 if dtype is not None else draw(
        st.sampled_from(MATMUL_DTYPES[KINDS[kind].family]))
    ops = tuple(draw(tensorspec_st(s, dt, levels))
                for s, dt in zip(operand_shapes(kind, shape), dts))
    lim = draw(limits if limits is not None else limits_st())
    return Spec(kind, shape, ops, draw(st.booleans()), lim).canonical()


def _shape_st(max_dim: int, ranks):
    """A shape of a rank drawn from ``ranks``, dims in 1..max_dim."""
    return st.sampled_from(ranks).flatmap(
        lambda rank: st.tuples(*[_dim_st(max_dim)] * rank))


@st.composite
def params_st(draw, kind: PrimKind, rank: int) -> tuple:
    """Parameters of ``kind`` valid at ``rank`` (a dim, a fill value, a stride)."""
    out = []
    for name in KINDS[kind].params:
        if name == "dim":
            out.append(draw(st.integers(0, rank - 1)))
        elif name == "value":
            out.append(draw(st.sampled_from(FILL_VALUES)))
        elif name == "stride":  # a Taps view's (its operands' shapes do not depend on it)
            out.append(draw(st.integers(1, 3)))
        else:  # pragma: no cover - a new kind parameter needs a strategy here
            raise AssertionError(f"no strategy for parameter {name!r}")
    return tuple(out)


@st.composite
def prim_spec_st(draw, kinds=None, max_dim: int = 4, ranks=(1, 2, 3), levels=LEVELS,
                 limits=None, dtype: Dtype = Dtype.F32) -> Spec:
    """A canonical Spec of any kind in ``kinds`` (default: every kind but the Matmul
    family, whose rank is fixed) of a rank in ``ranks``, with its parameters."""
    kinds = kinds or [k for k in PrimKind if KINDS[k].ranks[0] <= max(ranks)
                      and k not in MATMUL_KINDS]
    kind = draw(st.sampled_from(kinds))
    lo, hi = KINDS[kind].ranks
    rank = draw(st.sampled_from([r for r in ranks if lo <= r <= hi]))
    shape = tuple(draw(_dim_st(max_dim)) for _ in range(rank))
    params = draw(params_st(kind, rank))
    ops = tuple(draw(tensorspec_st(s, dtype, levels))
                for s in operand_shapes(kind, shape, params))
    lim = draw(limits if limits is not None else limits_st())
    return Spec(kind, shape, ops, draw(st.booleans()), lim, params).canonical()


def move_spec_st(**kw) -> st.SearchStrategy[Spec]:
    """A canonical Move between two operands of one shape."""
    return prim_spec_st(kinds=[PrimKind.MOVE], **kw)


def fill_spec_st(**kw) -> st.SearchStrategy[Spec]:
    """A canonical Fill (0 or -inf) of one operand."""
    return prim_spec_st(kinds=[PrimKind.FILL], **kw)


def spec_st(max_dim: int = 4, limits=None, levels=LEVELS,
            ranks=(1, 2, 3)) -> st.SearchStrategy[Spec]:
    """Any of the small canonical Specs above: every kind of the kind table."""
    return st.one_of(
        matmul_spec_st(max_dim=max_dim, limits=limits, levels=levels),
        prim_spec_st(max_dim=max_dim, limits=limits, levels=levels, ranks=ranks),
    )


@st.composite
def gl_matmul_spec_st(draw, max_dim: int = 4, max_batch: int = 1, limits=None,
                      serial=None) -> Spec:
    """A row-major Matmul in GL, as users write them (``morello.matmul``), over any
    dtype mix (f32 most often) or the saturating u8 x s8 one."""
    shape = (draw(_dim_st(max_batch)),) + tuple(
        draw(_dim_st(max_dim)) for _ in range(3))
    kind = draw(st.sampled_from([PrimKind.MATMUL] * 5 + [PrimKind.MATMUL_SAT16]))
    dts = draw(st.sampled_from(MATMUL_DTYPES[KINDS[kind].family]))
    ops = tuple(
        TensorSpec(s, dt, Level.GL, layouts.row_major(3), 3).canonical()
        for s, dt in zip(operand_shapes(kind, shape), dts)
    )
    lim = draw(limits if limits is not None else limits_st())
    ser = draw(st.booleans()) if serial is None else serial
    return Spec(kind, shape, ops, ser, lim)
