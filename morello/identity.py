"""The identity of stored results: what a database context is keyed by.

A stored result is an optimum under the action table (which action an index names) and
under the model's decisions (each kernel's check and cost, the rewrites' rules, the cost
formulas of the compiled core). The fingerprint hashes the first as data (the kind table,
kernel names per kind, tile, pack and layout tables, the coordinate scheme) and names the
second by a declared ``MODEL_VERSION`` (the shared core) and per-family ``REVISIONS``
(the decisions of one family's own kinds, kernels and rewrites): comments, docstrings,
formatting, renames and code moved between modules change none of them, so they never
orphan a database. That they are bumped when a decision changes is the canary's job
(``morello.canary``: a fixed corpus of Specs on every target whose costs and traces are
kept in ``tests/golden/canary.json`` with the fingerprint of each one's family;
``tests/test_canary.py`` fails with "bump" when a program changes under an unchanged
fingerprint).
Cost constants are not here: they are part of ``Target.db_key``.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from pathlib import Path

from morello.memory import DESTINATIONS, Target

# Bump when a decision or cost could change: a kernel's check or cost formula, a rewrite's
# rule, the cost model's formulas (Python or compiled). The canary test says when.
MODEL_VERSION = 12

# Bump a family's revision (keyed by ``KindInfo.family``) instead when the decision that
# changed is made by that family's own kinds, kernels or rewrites: only the families
# whose closure holds it change context (a conv lowering's rule moves conv and its
# chains, not the shipped matmuls). A family absent here is at revision 0.
REVISIONS: dict[str, int] = {"Conv": 1, "Depthwise": 3}


def context_actions(target: Target, family: str) -> str:
    """The action text of table family ``family``'s store context for ``target``:
    ``family@fingerprint`` (``family_fingerprint``), remembered on disk (the user's cache
    dir) under a stamp of this morello's code (the size and modification time of every
    module file) and ``target``, so a fresh process answering a stored query does not
    rebuild the kernel tables to name its contexts. ValueError for an unknown family."""
    known = _remembered(target)
    fp = known.get(family)
    if fp is None:
        fp = known[family] = family_fingerprint(target, family)
        _remember(target, known)
    return f"{family}@{fp}"


@functools.lru_cache(maxsize=16)
def _remembered(target: Target) -> dict[str, str]:
    path = _fingerprint_path(target)
    try:
        found = json.loads(path.read_text()) if path is not None else {}
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        found = {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)
            and re.fullmatch(r"[0-9a-f]{8}", v)}


def _remember(target: Target, known: dict[str, str]) -> None:
    path = _fingerprint_path(target)
    if path is None:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(known, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def _fingerprint_path(target: Target) -> Path | None:
    """Where the fingerprint of ``target`` under this code is remembered (None: nowhere,
    if the package's files cannot be listed)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256(repr(target).encode())
    try:
        for dirpath, dirnames, files in os.walk(root):
            dirnames.sort()
            for name in sorted(files):
                if name.endswith((".py", ".so", ".pyx", ".pxd")):
                    st = os.stat(os.path.join(dirpath, name))
                    h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
    except OSError:
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "morello" / "fingerprints" / (h.hexdigest()[:32] + ".json")


def legacy_fingerprint(target: Target) -> str:
    """The one context fingerprint of a store before contexts per family (store files
    of morello up to MODEL_VERSION 12): everything any action index depends on for
    ``target``, every kind's row and kernels at once. A context under this fingerprint,
    computed by today's code, holds results valid today, which ``morello.db.migrate``
    moves to their family contexts. The chain bounds are those that code had: they only
    bound which chains are admitted, and no admitted chain's actions depend on them; the
    kinds are those it had (kinds added since are in no legacy context)."""
    from morello import compose
    from morello.kernels import table_for
    from morello.kinds import KINDS, PrimKind
    from morello.rewrites import bufferize, conv, decompose
    kinds = [k for k in PrimKind if k <= PrimKind.CONV_ACCUM]
    table = table_for(target)
    ident = {
        "kinds": [_kind_row(kind, KINDS[kind]) for kind in KINDS if kind in kinds],
        "kernels": [[k.name for k in table.for_kind(kind)] for kind in kinds],
        **_global_facts(target),
        "decompositions": decompose.identity(),
        "bufferize": bufferize.identity(),
        "conv": conv.LEGACY_IDENTITY,
        "chains": [5, 5, compose.FAMILY_PREFIX],
    }
    text = json.dumps(ident, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def legacy_valid(family: str) -> bool:
    """Whether results of ``family`` stored under a legacy context (``legacy_fingerprint``)
    are optimal today: no family its closure holds has been revised since, nor has the
    conv lowering's action table changed (``morello.db.migrate`` leaves the others)."""
    from morello.kinds import KINDS, PrimKind
    from morello.rewrites import conv

    prims = [k for k in family_reach(family) if isinstance(k, PrimKind)]
    lowered = any(KINDS[k].lowered for k in prims)
    return not _revisions(prims) and not (lowered and conv.identity() != conv.LEGACY_IDENTITY)


def family_fingerprint(target: Target, family: str) -> str:
    """What the results of table ``family`` depend on for ``target``: the facts every
    family shares (``_global_facts``: tiles, packs, layouts, coordinates, the model
    version) and the rows, kernels and rewrite identities of the kinds in its closure
    only, so a kind, kernel or lowering that the family cannot reach leaves it unchanged.
    An action's identity in a stored result is its position in ``actions(spec)``, so
    stored indices never name other actions after such a change. ValueError for an
    unknown family."""
    from morello import compose
    from morello.kernels import table_for
    from morello.kinds import KINDS, PrimKind
    from morello.rewrites import bufferize, conv, decompose, depthwise

    reach = family_reach(family)
    prims = sorted(k for k in reach if isinstance(k, PrimKind))
    chains = sorted(k.family for k in reach if isinstance(k, compose.Chain))
    table = table_for(target)
    ident = {
        "family": family,
        **_global_facts(target),
        **_revisions(prims),
        "kinds": [_kind_row(k, KINDS[k]) for k in prims],
        "kernels": [[k.name, [r.name for r in table.for_kind(k)]] for k in prims],
        "decompositions": decompose.identity()
        if any(k in decompose.DECOMPOSITIONS for k in prims) else None,
        "conv": conv.identity() if any(KINDS[k].lowered for k in prims) else None,
        # Only where a depthwise kind is reached, so the other families keep their prints.
        **({"depthwise": depthwise.identity()}
           if any(KINDS[k].family == "Depthwise" for k in prims) else {}),
        "chains": [chains, bufferize.identity(any(KINDS[k].lowered for k in prims)),
                   compose.FAMILY_PREFIX] if chains else None,
    }
    text = json.dumps(ident, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def family_reach(family: str) -> frozenset:
    """The closure of table ``family``'s kinds (a chain family: its chain's);
    ValueError for an unknown family."""
    from morello import compose
    from morello.kinds import KINDS

    members: list = [k for k, i in KINDS.items() if i.family == family]
    members = members or [compose.parse_family(family)]
    return frozenset().union(*(closure(k) for k in members))


def _revisions(prims) -> dict:
    """The nonzero ``REVISIONS`` of the families of ``prims`` (nothing when all are 0, so
    that a revision leaves the fingerprints of the families that cannot reach it as
    they were before revisions existed)."""
    from morello.kinds import KINDS

    revs = {f: REVISIONS[f] for f in sorted({KINDS[k].family for k in prims})
            if REVISIONS.get(f)}
    return {"revisions": revs} if revs else {}


def _kind_row(kind, info) -> list:
    """A kind's row as action indices see it: operands, maps at every rank and sample of
    its parameters, twins, staging."""
    from morello.kinds import param_samples

    lo, hi = info.ranks
    maps = []
    for rank in range(lo, hi + 1):
        choices = [param_samples(n, rank) for n in info.params]
        for params in _product(choices):
            maps.append([rank, [repr(p) for p in params], info.operand_map(rank, params)])
    return [kind.name, info.title, info.params, info.operands, info.reads,
            info.writes, info.family, info.member,
            info.accum.name if info.accum else None,
            None if info.init is None else repr(info.init), info.accumulates,
            info.staging, info.vrf_operands, info.l2_views, info.l2_panels, info.row_dim,
            info.grouped_rows, info.scan, info.lowered, maps]


def _global_facts(target: Target) -> dict:
    """What every family's action indices depend on beyond its kinds."""
    from morello import coords
    from morello.kernels import table_for
    from morello.rewrites.move import LAYOUT_SCHEME
    from morello.rewrites.tile import tile_size_table

    return {
        "tiles": tile_size_table(target),
        "packs": target.pack_sizes,
        "layouts": LAYOUT_SCHEME,
        "model": MODEL_VERSION,
        "destinations": sorted((int(k), [int(v) for v in vs])
                               for k, vs in DESTINATIONS.items()),
        "vector_bytes": target.vector_bytes,
        "byte_dots": target.byte_dots,
        "vector_types": table_for(target).vector_identity(),
        # What bounds the coordinates and prices moves beyond the cost constants.
        "memory": [target.capacity, target.line_bytes, target.l1_ways,
                   target.prefetch_streams, target.l2_panel_cols,
                   [d.code for d in target.sweep_dtypes]],
        "coords": coords.SCHEME,
    }


def closure(kind) -> frozenset:
    """The kinds a Spec of ``kind`` (a PrimKind or a chain) can reach through its rewrites,
    ``kind`` included: the results stored for it depend on these kinds' rows and kernels
    alone. Declared, not searched: each kind reaches Move and Fill (moves, the zero fill of
    ToAccum), its table family and accumulating twin, its decompositions' steps, its
    lowering's children; a chain its contiguous sub-chains and components. A property test
    checks every expansion of sampled Specs against it."""
    seen: set = set()
    todo = [kind]
    while todo:
        k = todo.pop()
        if k not in seen:
            seen.add(k)
            todo.extend(_reaches(k))
    return frozenset(seen)


def _reaches(kind) -> list:
    from morello import compose
    from morello.kinds import KINDS, PrimKind
    from morello.rewrites import LOWERED_TO, decompose

    def lowered_to(k) -> list:
        return list(LOWERED_TO[KINDS[k].family])

    out: list = [PrimKind.MOVE, PrimKind.FILL]
    if isinstance(kind, compose.Chain):
        n = len(kind.components)
        out += [compose.sub_chain(kind, lo, hi)[0] for lo in range(n)
                for hi in range(lo + 1, n + 1) if hi - lo < n]
        if kind.lowered:  # lowered with its first step (``rewrites.conv._plan_chain``)
            out += [k for c in kind.components if KINDS[c.kind].lowered
                    for k in lowered_to(c.kind)]
        return out
    info = KINDS[kind]
    out += [k for k, i in KINDS.items() if i.family == info.family]
    if info.accum is not None:
        out.append(info.accum)
    out += [step[0] for steps in decompose.DECOMPOSITIONS.get(kind, ()) for step in steps]
    if info.lowered:
        out += lowered_to(kind)
    return out


def _product(choices):
    if not choices:
        yield ()
        return
    for head in choices[0]:
        for rest in _product(choices[1:]):
            yield (head, *rest)

