"""Checks of a file the store did not write: its path, table keys, boxes and traces.

Whatever a file holds is untrusted until it passes these: a path must name a regular file
of this format, a table key must name a known family, every box must lie in its page and
within the target's coordinate ranges, and every value row and trace must be plausible.
"""
from __future__ import annotations

import functools
import json
import os
import stat
from pathlib import Path

import numpy as np

from morello._pages import page_range
from morello.coords import _limit_coord, exact_dims, family_kinds, point_len, segments
from morello.errors import DatabaseError
from morello.limits import MAX_POINTS
from morello.memory import LEVELS, NLEVELS
from morello.store.format import _SQLITE_MAGIC, MAX_ACTION, MAX_COST, MAX_DEPTH


def valid_trace(trace) -> bool:
    """Whether ``trace`` (decoded JSON) is a list of action indices or ``[group, index]``
    pairs in range (``morello.impl.replay`` checks that each names an action)."""
    def index(a) -> bool:
        return isinstance(a, int) and not isinstance(a, bool) and 0 <= a < MAX_ACTION

    return isinstance(trace, list) and all(
        index(a) or (isinstance(a, list) and len(a) == 2 and index(a[0]) and index(a[1]))
        for a in trace)


def _table_key(text: str) -> tuple:
    """The table key of its JSON text; ValueError if it is not one."""
    try:
        family, params, dtypes, rank = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        raise ValueError(f"malformed table key {text[:80]!r}") from None
    try:
        family_kinds(family)
    except ValueError:
        raise ValueError(f"malformed table key {text[:80]!r}") from None
    if (not isinstance(params, list)
            or not all(isinstance(p, (int, str)) and not isinstance(p, bool) for p in params)
            or not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes)
            or not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank <= 16):
        raise ValueError(f"malformed table key {text[:80]!r}")
    return family, tuple(params), tuple(dtypes), rank


def _check_path(path: Path) -> bool:
    """Whether ``path`` exists; DatabaseError for anything but a regular file (FIFOs,
    devices, directories, ...) or a file of the old format."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise DatabaseError(f"cannot open database {path}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise DatabaseError(f"database path {path} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise DatabaseError(f"database path {path} is not a regular file (a device, FIFO "
                            "or socket); pass a file")
    if st.st_size == 0:
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as e:
        raise DatabaseError(f"cannot read database {path}: {e.strerror}") from None
    if head.startswith(b'{"format"'):
        raise DatabaseError(
            f"{path} is a morello database of the old single-file format, which this "
            "morello no longer reads (it held a pickle, unsafe to load); delete it (its "
            "results will be recomputed) or pass another --db")
    if head != _SQLITE_MAGIC:
        raise DatabaseError(f"{path} is not a morello database (corrupt or another kind "
                            "of file); delete it or pass another --db")
    return True


def coordinate_bounds(key: tuple, target) -> list[int]:
    """Per coordinate of table ``key``, the largest value a stored box may reach."""
    family, _, _, rank = key
    top = {"member": max((m or 0) for m in family_kinds(family)), "shape": MAX_POINTS,
           "level": NLEVELS - 1, "layout": 1 << 62, "deficit": 64,
           "vector": len(target.vector_bytes) - 1, "serial": 1}
    limits = [_limit_coord(lvl, u) for lvl, u in zip(LEVELS, target.max_limits().units)]
    out, li = [], 0
    for s in segments(key):
        if s == "limit":
            out.append(limits[li])
            li += 1
        else:
            out.append(top[s])
    return out


@functools.lru_cache(maxsize=256)
def _key_dims(key: tuple) -> tuple[int, tuple[int, ...]]:
    """The point length and exact dims of table ``key``."""
    return point_len(key), exact_dims(key)


@functools.lru_cache(maxsize=256)
def _static_bounds(key: tuple, target) -> tuple[list[int], list[int], list[int], list[str]]:
    cap = list(target.max_limits().units)
    vmin = [0, 1] + [0] * len(LEVELS) + [0, -1]
    vmax = [MAX_COST - 1, MAX_COST - 1] + cap + [MAX_DEPTH - 1, MAX_ACTION - 1]
    names = ["cost", "cost"] + [f"peak of {lvl.name}" for lvl in LEVELS] + ["depth", "action"]
    return coordinate_bounds(key, target), vmin, vmax, names


def page_bounds(key: tuple, blocks, page, target):
    """``(lo_min, hi_max, value_min, value_max, value_names)`` of the boxes of ``page``
    (inclusive bounds, as ``FrozenPage.check_bounds`` takes them): inside the page,
    within the target's coordinates, and plausible values (``validate_boxes``)."""
    bounds, vmin, vmax, names = _static_bounds(key, target)
    lo_min, hi_max = [], []
    for d, b in enumerate(blocks):
        if not b:
            if page[d]:
                raise ValueError("a page coordinate of an unpaged dimension")
            lo_min.append(0)
            hi_max.append(bounds[d])
            continue
        start, end = page_range(page[d], b)
        lo_min.append(start)
        hi_max.append(min(end, bounds[d]))
    return lo_min, hi_max, vmin, vmax, names


def validate_boxes(lo, hi, values, key, blocks, page, target) -> None:
    """ValueError unless every box lies in ``page`` and within the target's coordinate
    ranges, and every value row is a plausible (cost, peaks, depth, action): the rules of
    ``page_bounds``, on decoded arrays (``FrozenPage.check_bounds`` applies them in C)."""
    lo_min, hi_max, vmin, vmax, names = page_bounds(key, blocks, page, target)
    if len(lo) == 0:
        return
    if (lo < np.asarray(lo_min)).any() or (hi > np.asarray(hi_max)).any() or (hi < lo).any():
        raise ValueError("a box lies outside its page or beyond the target's coordinates")
    bad = ((values < np.asarray(vmin)) | (values > np.asarray(vmax))).any(axis=0)
    if bad.any():
        raise ValueError(f"a stored {names[int(np.flatnonzero(bad)[0])]} is out of range")
