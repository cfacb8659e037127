"""Rewrites (actions) and their deterministic enumeration.

``actions(spec, target)`` lists candidate actions in a fixed order (moves, tiles, kernels,
ToAccum, splits); an action's position in that list is its identity in the memo table (the
action index), so ``morello.search.actions_fingerprint`` hashes everything the order
depends on. Each action offers
``expand(spec, target) -> Expansion | None``: the sub-Specs it leaves as holes and the affine
cost rule combining their costs (None when it does not apply). Impls are rebuilt by
replaying action indices (``morello.impl``).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from pathlib import Path

from morello.cost import COST_SCHEME
from morello.memory import DESTINATIONS, Target
from morello.rewrites.accum import ToAccum
from morello.rewrites.base import Expansion, RewriteError
from morello.rewrites.bufferize import Bufferize, bufferize_actions
from morello.rewrites.decompose import Decompose, decompose_actions
from morello.rewrites.move import LAYOUT_SCHEME, Move, operand_moves
from morello.rewrites.select import Select, select_actions
from morello.rewrites.tile import (
    Split,
    TileOut,
    split_actions,
    tile_actions,
    tile_size_table,
)
from morello.specs import KINDS, Spec

Action = TileOut | Split | Move | ToAccum | Select | Decompose | Bufferize

__all__ = [
    "Action", "Bufferize", "Decompose", "Expansion", "Move", "RewriteError", "Select",
    "Split", "TileOut", "ToAccum", "action_groups", "action_in_group", "actions",
    "actions_fingerprint", "group_makers",
]


def actions(spec: Spec, target: Target) -> list[Action]:
    """All candidate actions for ``spec`` in their canonical order."""
    out: list[Action] = []
    for group in action_groups(spec, target):
        out.extend(group)
    return out


def group_makers(spec: Spec, target: Target) -> list:
    """The groups of ``actions(spec)`` in order, each as a function that makes it: the
    moves of each operand in turn, tiles, kernels, ToAccum, splits, decompositions,
    bufferizations. An action's place in its group, ``(group, index)``, finds it by making
    that group alone (``action_in_group``)."""
    kind = spec.kind
    makers: list = [functools.partial(operand_moves, kind, i, t, target)
                    for i, t in enumerate(spec.operands)]
    makers.append(functools.partial(tile_actions, spec, target))
    makers.append(functools.partial(select_actions, spec, target))
    if kind.info.accum is not None:
        makers.append(_to_accum)
    makers.append(functools.partial(split_actions, spec, target))
    makers.append(functools.partial(decompose_actions, spec, target))
    makers.append(functools.partial(bufferize_actions, spec, target))
    return makers


def _to_accum() -> tuple[ToAccum]:
    return (ToAccum(),)


def action_groups(spec: Spec, target: Target):
    """``actions(spec)`` in its groups (``group_makers``), in order, each made when it is
    reached (so the action at one index is found without making the groups after it)."""
    for make in group_makers(spec, target):
        yield make()


def action_in_group(spec: Spec, target: Target, group: int, index: int) -> Action | None:
    """Action ``index`` of group ``group`` of ``spec`` (None when there is none)."""
    makers = group_makers(spec, target)
    if not 0 <= group < len(makers):
        return None
    acts = makers[group]()
    return acts[index] if 0 <= index < len(acts) else None


@functools.lru_cache(maxsize=16)
def actions_fingerprint(target: Target) -> str:
    """``compute_actions_fingerprint(target)``, remembered on disk (the user's cache dir)
    under a stamp of this morello's code (the size and modification time of every module
    file) and ``target``: a fresh process answering a stored query does not rebuild the
    kernel tables to name its database context. Any change to the code changes the stamp."""
    path = _fingerprint_path(target)
    if path is not None:
        try:
            text = path.read_text()[:64]
            if re.fullmatch(r"[0-9a-f]{8}", text):
                return text
        except (OSError, UnicodeDecodeError):
            pass
    fp = compute_actions_fingerprint(target)
    if path is not None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(fp)
            os.replace(tmp, path)
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass
    return fp


def _fingerprint_path(target: Target) -> Path | None:
    """Where the fingerprint of ``target`` under this code is remembered (None: nowhere,
    if the package's files cannot be listed)."""
    root = Path(__file__).resolve().parent.parent
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
    return Path(base) / "morello" / "fingerprints" / h.hexdigest()[:32]


def compute_actions_fingerprint(target: Target) -> str:
    """A fingerprint of everything an action index depends on for ``target``.

    An action's identity in a stored result is its position in ``actions(spec)``, which
    depends on the kind table (operands, operand maps, reads and writes, twins, staging,
    row dims, families), the target's kernel names per kind, the tile, row-only and pack
    sizes, the layout candidates and move destinations, and the coordinate scheme.
    Databases carry this fingerprint and are refused under another one (``morello.db``),
    so adding a kernel or a tile size can never make stored indices name other actions.
    """
    from morello import compose, coords
    from morello.kernels import table_for
    from morello.kinds import FILL_VALUES
    from morello.rewrites import bufferize, decompose

    kinds = []
    for kind, info in KINDS.items():
        lo, hi = info.ranks
        maps = []
        for rank in range(lo, hi + 1):
            choices = [range(rank) if n == "dim" else FILL_VALUES for n in info.params]
            for params in _product(choices):
                maps.append([rank, [repr(p) for p in params],
                             info.operand_map(rank, params)])
        kinds.append([kind.name, info.title, info.params, info.operands, info.reads,
                      info.writes, info.family, info.member,
                      info.accum.name if info.accum else None,
                      None if info.init is None else repr(info.init), info.accumulates,
                      info.staging, info.vrf_operands, info.l2_views, info.l2_panels, info.row_dim,
                      info.grouped_rows, info.scan, maps])
    ident = {
        "kinds": kinds,
        "kernels": table_for(target).identity(),
        "tiles": tile_size_table(target),
        "packs": target.pack_sizes,
        "layouts": LAYOUT_SCHEME,
        "cost_scheme": COST_SCHEME,
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
        "decompositions": decompose.identity(),
        "bufferize": bufferize.identity(),
        "chains": [compose.MAX_CHAIN_RANK, compose.MAX_CHAIN_OPERANDS, compose.FAMILY_PREFIX],
        "model": model_source_digest(),
    }
    text = json.dumps(ident, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


# The modules whose code decides which actions apply and what they cost: a stored result
# is the optimum under them, so any change to them (a kernel's check or cost, a tile
# rule) makes it stale, and the database is refused rather than replayed.
MODEL_MODULES = ("kernels", "rewrites", "cost.py", "costs.py", "kinds.py", "specs.py",
                 "tensorspec.py", "layouts.py", "compose.py", "coords.py", "dtypes.py",
                 "memory.py", "limits.py", "_expand.pyx", "_graph.pyx", "_dp.pyx")


@functools.cache
def model_source_digest() -> str:
    """A digest of the source of ``MODEL_MODULES`` (by name: the search core's ``.pyx``
    ship with the package)."""
    return source_digest(Path(__file__).resolve().parent.parent, MODEL_MODULES)


def source_digest(root: Path, names: tuple[str, ...]) -> str:
    """A digest of the files ``names`` under root (a package: its ``.py`` modules), their
    paths included; a file that is not there counts as empty."""
    h = hashlib.sha256()
    for name in names:
        path = root / name
        files = sorted(path.glob("*.py")) if path.is_dir() else [path]
        for f in files:
            if not f.is_file():
                h.update(f"{name}: absent\0".encode())
                continue
            h.update(f"{f.relative_to(root).as_posix()}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _product(choices):
    if not choices:
        yield ()
        return
    for head in choices[0]:
        for rest in _product(choices[1:]):
            yield (head, *rest)

