"""Spec <-> integer coordinates: the encoders the memo table and the Cython core see.

A Spec maps to a *table key* and a *point*. The key names the table and holds only what
never changes between a Spec and the sub-Specs in the same table: the kind family
(``KindInfo.family``), the kind's parameters, the dtypes and the rank. The point is a
tuple of non-negative integers, in this order:

====================  ===========  ==================================================
segment               length       value
====================  ===========  ==================================================
member                1 or 0       ``KindInfo.member`` in families with several kinds
                                   (MatmulAccum 0, Matmul 1; MaxAccum 0, Max 1; ...)
shape                 rank         ``size - 1`` per Spec-shape dim (any size >= 1)
per operand           4 each       ``level``, ``layout_code``, contig deficit
                                   (``len(layout.dims) - contig``), vector size index
serial                1            ``0`` if ``serial_only`` else ``1``
memory limits         one a level  RF and VRF raw register counts; L1, L2 and GL as
                                   ``bit_length`` of their power-of-two line counts
====================  ===========  ==================================================

``point_len`` computes these lengths; a test checks this table against it.

Why this order and these signs. Within one table an action's sub-Specs have coordinates
no larger than their parent's in the member, shape, level, serial and limit segments:
``ToAccum`` turns a Matmul (member 1) into a MatmulAccum (member 0); ``TileOut`` and
``Split`` shrink shape dims; ``Move`` takes an operand to a faster level (levels count
RF=0 up to GL=4); parallel loops run serial bodies (serial 0 < parallel 1); and every
allocation lowers a limit (``bit_length`` keeps the order of powers of two). So a sweep
in increasing coordinate order meets dependencies first, and neighbouring points hold
similar answers. Layout codes, contiguity deficits and vector size indices carry no
such order; they are exact but not monotone, and a sweep keeps them out of its grid.
Sub-Specs of other families (Fill and Move logues of a Matmul) live in other tables.

Every encoder has an exact inverse on the Specs it is ``defined_for`` (all canonical
Specs of the target): ``spec_from_coords(spec_key(s), spec_point(s)) == s``.
"""
from __future__ import annotations

import math

from morello import compose
from morello.dtypes import BY_NAME as DTYPES_BY_NAME
from morello.layouts import Layout, PhysDim
from morello.memory import LEVELS, NLEVELS, Level, MemoryLimits, Target
from morello.specs import KINDS, PrimKind, Spec, operand_shapes
from morello.tensorspec import TensorSpec

__all__ = [
    "defined_for",
    "operand_coords",
    "layout_code",
    "layout_from_code",
    "page_blocks",
    "point_len",
    "segments",
    "spec_from_coords",
    "spec_key",
    "spec_point",
]

# Families of kinds sharing one table, and each family's kinds by member coordinate.
FAMILIES: dict[str, dict[int | None, PrimKind]] = {}
for _kind, _info in KINDS.items():
    FAMILIES.setdefault(_info.family, {})[_info.member] = _kind
_N_OPERANDS = {f: KINDS[next(iter(m.values()))].n_operands for f, m in FAMILIES.items()}
_HAS_MEMBER = {f for f, m in FAMILIES.items() if None not in m}


def family_kinds(family: str) -> dict:
    """The kinds of table family ``family`` by member coordinate: a primitive family of
    the kind table, or a chain named by its family (``morello.compose``). ValueError for
    a name that is neither."""
    found = FAMILIES.get(family) if isinstance(family, str) else None
    if found is not None:
        return found
    if isinstance(family, str) and family.startswith(compose.FAMILY_PREFIX):
        return {None: compose.parse_family(family)}
    raise ValueError(f"unknown table family {str(family)[:80]!r}")


def _n_operands(family: str) -> int:
    n = _N_OPERANDS.get(family)
    if n is None:
        n = family_kinds(family)[None].info.n_operands
    return n
_OPERAND_COORDS = 4


# The version of this coordinate scheme: bump it with any change to the encoders, so
# that stored tables are never read under another (``morello.identity.family_fingerprint``).
SCHEME = 2

# --- Natural-number pairing ----------------------------------------------------------

def _pair(a: int, b: int) -> int:
    """Cantor's bijection N x N -> N."""
    return (a + b) * (a + b + 1) // 2 + b


def _unpair(z: int) -> tuple[int, int]:
    # w = a + b is the largest w with w(w+1)/2 <= z; isqrt keeps this exact for big z.
    w = (math.isqrt(8 * z + 1) - 1) // 2
    b = z - w * (w + 1) // 2
    return w - b, b


def _encode_seq(xs: list[int]) -> int:
    """A bijection from sequences of naturals of a *known* length to N."""
    if not xs:
        return 0
    code = xs[-1]
    for x in reversed(xs[:-1]):
        code = _pair(x, code)
    return code


def _decode_seq(code: int, n: int) -> list[int]:
    if n == 0:
        if code:
            raise ValueError(f"code {code} is not the empty sequence")
        return []
    out = []
    for _ in range(n - 1):
        x, code = _unpair(code)
        out.append(x)
    out.append(code)
    return out


# --- Layouts -------------------------------------------------------------------------

# Digits per logical dim in a layout code: plain, packed, and two reserved kinds.
_KINDS_PER_DIM = 4

def layout_code(layout: Layout, rank: int) -> int:
    """An integer naming ``layout`` among the layouts of tensors of ``rank`` dims.

    Built from two naturals:

    - ``structure``: each physical dim is a digit ``4 * dim + kind`` in radix
      ``R = 4 * rank``, where ``kind`` is 0 for a plain dim and 1 for a packed one (2 and
      3 are reserved for per-dim kinds to come, such as bf16's odd/even interleave, so
      adding them changes no existing code); the digits of a layout of ``n`` physical
      dims, read outer to inner, form a radix-R number offset by
      ``R^0 + ... + R^(n-1)`` (the count of all shorter digit strings), so the offset is the
      length prefix and distinct layouts never share a structure up to their pack sizes;
    - ``packs``: the pack sizes ``p >= 1`` of the packed dims, outer to inner, as
      ``p - 1`` folded with Cantor pairing (their count comes from the structure).

    A layout without packs gets the even code ``2 * structure``; one with packs the odd
    code ``2 * pair(structure, packs) + 1``, so the common unpacked layouts keep small
    codes. The map is injective on tuples of ``PhysDim(dim < rank, pack >= 1 or None)``
    and ``layout_from_code`` is its exact inverse (it refuses codes outside the image).
    Example, rank 3: row-major ``[0, 1, 2]`` has structure ``(1 + 12 + 144) + 0*144 +
    4*12 + 8 = 213`` and code 426.
    """
    radix = _KINDS_PER_DIM * rank
    structure = sum(radix**k for k in range(len(layout.dims)))
    digits = 0
    packs: list[int] = []
    for pd in layout.dims:
        if not 0 <= pd.dim < rank:
            raise ValueError(f"layout {layout} names dim {pd.dim}, outside rank {rank}")
        packed = pd.pack is not None
        if packed:
            if isinstance(pd.pack, bool) or not isinstance(pd.pack, int) or pd.pack < 1:
                raise ValueError(f"layout {layout} has pack size {pd.pack!r} < 1")
            packs.append(pd.pack - 1)
        digits = digits * radix + _KINDS_PER_DIM * pd.dim + packed
    structure += digits
    if not packs:
        return 2 * structure
    return 2 * _pair(structure, _encode_seq(packs)) + 1


def layout_from_code(code: int, rank: int) -> Layout:
    """The layout whose ``layout_code(_, rank)`` is ``code`` (ValueError if none)."""
    if code < 0:
        raise ValueError(f"layout code {code} is negative")
    half, packed = divmod(code, 2)
    structure, packs_code = _unpair(half) if packed else (half, 0)
    radix = _KINDS_PER_DIM * rank
    # The length n: digit strings of length n own [sum_{k<n} R^k, sum_{k<=n} R^k).
    n, start, block = 0, 0, 1
    while structure >= start + block:
        if radix == 0:
            raise ValueError(f"layout code {code} is not a layout of rank {rank}")
        start += block
        block *= radix
        n += 1
    rest = structure - start
    digits = []
    for _ in range(n):
        rest, d = divmod(rest, radix)
        digits.append(d)
    digits.reverse()
    if any(d % _KINDS_PER_DIM > 1 for d in digits):
        raise ValueError(f"layout code {code} uses a reserved kind of physical dim")
    n_packs = sum(d % _KINDS_PER_DIM for d in digits)
    if (n_packs > 0) != bool(packed):
        raise ValueError(f"layout code {code} is not a layout of rank {rank}")
    packs = iter(_decode_seq(packs_code, n_packs))
    dims = tuple(PhysDim(d // _KINDS_PER_DIM, next(packs) + 1 if d % _KINDS_PER_DIM else None)
                 for d in digits)
    return Layout(dims)


# --- Memory limits -------------------------------------------------------------------

def _limit_coord(level: Level, units: int) -> int:
    # Register levels are small counts; cache levels are powers of two (or 0).
    return units if level.counts_registers else units.bit_length()


def _limit_from_coord(level: Level, c: int) -> int:
    if level.counts_registers:
        return c
    return 0 if c == 0 else 1 << (c - 1)


# --- Specs ---------------------------------------------------------------------------

def key_params(kind: PrimKind | compose.Chain, params: tuple) -> tuple:
    """Kind parameters as table-key items: ints stay, fill values become their text
    (so keys hold only ints and strings)."""
    return tuple(repr(float(v)) if name == "value" else v
                 for name, v in zip(kind.info.params, params))


def _params_from_key(kind: PrimKind, items: tuple) -> tuple:
    if len(items) != len(kind.info.params):
        raise ValueError(f"{kind.title} takes parameters {kind.info.params}, got {items}")
    try:
        return tuple(float(v) if name == "value" else v
                     for name, v in zip(kind.info.params, items))
    except (TypeError, ValueError):
        raise ValueError(f"bad parameters {items!r} for {kind.title}") from None


def spec_key(spec: Spec) -> tuple:
    """The table key ``(family, params, dtype names, rank)`` (the member is a
    coordinate; a fill value is written as text)."""
    return (
        spec.kind.info.family,
        key_params(spec.kind, spec.params),
        tuple(o.dtype.short for o in spec.operands),
        len(spec.shape),
    )


def point_len(key: tuple) -> int:
    """How many coordinates a point of table ``key`` has."""
    family, _, _, rank = key
    return (
        (1 if family in _HAS_MEMBER else 0)
        + rank
        + _OPERAND_COORDS * _n_operands(family)
        + 1
        + NLEVELS
    )


# Coordinate kinds, in point order (see the table above); ``segments`` lists them per point.
OPERAND_SEGMENTS = ("level", "layout", "deficit", "vector")

# Pages of the persistent tables (``morello._pages``): shape coordinates are cut into
# pages of 8 sizes (1-8, 9-16, ...); the member, operand levels and serial coordinates
# each give their own pages; layouts, contiguity, vector sizes and memory limits stay
# inside a page. Chosen by measurement (benchmarks/db_scaling.py): a query loads fewer boxes
# than in pages that double after the first 8 (which hold every size from 64 to 127 that
# other shapes met), and power-of-two searches write about as many pages either way
# (docs/model-notes.md). (Tables a file already holds keep the geometry they were made with.)
SHAPE_BLOCK = 8
_PAGE_BLOCK = {"member": 1, "shape": SHAPE_BLOCK, "level": 1, "layout": 0, "deficit": 0,
               "vector": 0, "serial": 1, "limit": 0}


def segments(key: tuple) -> tuple[str, ...]:
    """The kind of each coordinate of a point of table ``key``: ``member``, ``shape``,
    ``level``, ``layout``, ``deficit``, ``vector``, ``serial`` or ``limit``."""
    family, _, _, rank = key
    return (("member",) * (1 if family in _HAS_MEMBER else 0) + ("shape",) * rank
            + OPERAND_SEGMENTS * _n_operands(family) + ("serial",) + ("limit",) * NLEVELS)


def page_blocks(key: tuple) -> tuple[int, ...]:
    """The page geometry of new tables of ``key``: a block per coordinate, 0 = unpaged."""
    return tuple(_PAGE_BLOCK[s] for s in segments(key))


def merge_dims(key: tuple) -> tuple[int, ...]:
    """The coordinates along which equal neighbours of table ``key`` are merged: the
    operands' contiguity deficits and vector sizes. Measured (benchmarks/db_scaling.py):
    merges along these give all the compression (docs/model-notes.md); along shapes and
    memory limits they found nothing to merge (a result's limits are already a range, and
    costs per element rarely agree across shapes) and made saves slower; the other
    coordinates are constant in a page or, like layout codes, have no order that
    neighbours share."""
    return tuple(d for d, s in enumerate(segments(key)) if s in ("deficit", "vector"))


def exact_dims(key: tuple) -> tuple[int, ...]:
    """The coordinates in which every stored box of table ``key`` is a single point: all
    but the merged ones and the memory limits (``morello._frozen.FrozenPage`` indexes
    them; a stored page with a box spanning one of them is refused)."""
    merged = set(merge_dims(key))
    return tuple(d for d, s in enumerate(segments(key))
                 if s != "limit" and d not in merged)


def _vector_index(t: TensorSpec, target: Target) -> int:
    if t.vector_size is None:
        return 0
    return target.vector_bytes.index(t.vector_size * t.dtype.size)


def operand_coords(t: TensorSpec, target: Target) -> tuple[int, int, int, int]:
    """The 4 coordinates of one operand: level, layout code, contig deficit, vector index."""
    try:
        vi = _vector_index(t, target)
    except ValueError:
        raise ValueError(
            f"vector size {t.vector_size} of {t} is not a {target.name} vector"
        ) from None
    return (int(t.level), layout_code(t.layout, len(t.shape)),
            len(t.layout.dims) - t.contig, vi)


def spec_point(spec: Spec, target: Target) -> tuple[int, ...]:
    """The coordinates of ``spec`` (see the module docstring for their order).

    ``target`` only matters for VRF operands, whose vector size is stored as an index
    into ``target.vector_bytes``. Raises ValueError when not ``defined_for(spec)``.
    """
    pt: list[int] = []
    member = spec.kind.info.member
    if member is not None:
        pt.append(member)
    pt.extend(d - 1 for d in spec.shape)
    for t in spec.operands:
        pt.extend(operand_coords(t, target))
    pt.append(0 if spec.serial_only else 1)
    pt.extend(_limit_coord(lvl, u) for lvl, u in zip(LEVELS, spec.limits.units))
    return tuple(pt)


def spec_from_coords(key: tuple, point: tuple[int, ...], target: Target) -> Spec:
    """The Spec at ``point`` of table ``key``: inverse of ``spec_key``/``spec_point``.

    Raises ValueError (a SpecError where the Spec itself is invalid) for a malformed key
    or point.
    """
    family, param_items, dtype_names, rank = key
    kinds = family_kinds(family)
    n_ops = _n_operands(family)
    if len(dtype_names) != n_ops:
        raise ValueError(f"{family} takes {n_ops} dtypes, got {dtype_names}")
    if len(point) != point_len(key):
        raise ValueError(
            f"a point of table {key} has {point_len(key)} coordinates, got {len(point)}"
        )
    if any(c < 0 for c in point):
        raise ValueError(f"coordinates must be >= 0, got {point}")
    it = iter(point)
    member = next(it) if family in _HAS_MEMBER else None
    if member not in kinds:
        raise ValueError(f"member coordinate {member} names no kind of family {family}")
    kind = kinds[member]
    params = _params_from_key(kind, param_items)
    shape = tuple(next(it) + 1 for _ in range(rank))
    reason = kind.info.check_params(rank, params)
    if reason:
        raise ValueError(reason)
    operands = []
    for name, oshape in zip(dtype_names, operand_shapes(kind, shape, params)):
        if name not in DTYPES_BY_NAME:
            raise ValueError(f"unknown dtype {name!r} in table key {key}")
        dtype = DTYPES_BY_NAME[name]
        level_c, lay_c, deficit, vec_i = (next(it) for _ in range(_OPERAND_COORDS))
        if level_c >= NLEVELS:
            raise ValueError(f"level coordinate {level_c} out of range")
        level = Level(level_c)
        layout = layout_from_code(lay_c, len(oshape))
        vector_size = None
        if level is Level.VRF:
            if vec_i >= len(target.vector_bytes):
                raise ValueError(f"vector size index {vec_i} out of range")
            vector_size = target.vector_bytes[vec_i] // dtype.size
        elif vec_i:
            raise ValueError(f"vector size index {vec_i} for a {level} operand")
        contig = len(layout.dims) - deficit
        operands.append(TensorSpec(oshape, dtype, level, layout, contig, vector_size))
    serial = next(it)
    if serial > 1:
        raise ValueError(f"serial coordinate {serial} is not 0 or 1")
    limits = MemoryLimits(tuple(_limit_from_coord(lvl, next(it)) for lvl in LEVELS))
    return Spec(kind, shape, tuple(operands), not serial, limits, params)


def defined_for(spec: Spec, target: Target) -> bool:
    """Whether ``spec`` has coordinates (and so round-trips through them).

    Holds for every Spec whose layouts name only its operands' dims with pack sizes
    >= 1, and whose VRF vector sizes are vectors of ``target``.
    """
    if spec.kind not in KINDS and not isinstance(spec.kind, compose.Chain):
        return False
    for t in spec.operands:
        if t.dtype.short not in DTYPES_BY_NAME:
            return False
        try:
            layout_code(t.layout, len(t.shape))
        except (ValueError, TypeError):
            return False
        if t.vector_size is not None:
            vb = t.vector_size * t.dtype.size
            if vb not in target.vector_bytes:
                return False
    return all(isinstance(u, int) and u >= 0 for u in spec.limits.units)
