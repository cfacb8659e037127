"""The persistent database: every solved (Spec, limits box) -> optimum, on disk.

File format: one JSON header line (format name, version, target, actions), one JSON line of
*roots* (the stable text form of each Spec a user asked for -> the action trace of its
optimal Impl and its cost, so repeating a query replays it without loading the tables),
then a zlib-compressed pickle of ``{table key: (lo, hi, values)}``, the int64 arrays of
each compressed memo table (``morello._memo.MemoTable.to_arrays``; coordinates of
``morello.coords``). Writes are atomic (temporary file in the same directory, fsync, rename),
so an interrupted process leaves either the old file or the new one. A file with another
format, version, target (name and cost constants, ``Target.db_key``) or action table
(``actions``: the fingerprint of everything a stored action index depends on,
``morello.rewrites.actions_fingerprint``), or that fails to parse, is refused with a
DatabaseError and never used. The default file's name carries both, so a morello with
another action table starts a fresh database beside the old one.
"""
from __future__ import annotations

import json
import os
import pickle
import tempfile
import zlib
from pathlib import Path

import numpy as np

from morello.errors import DatabaseError

FORMAT = "morello-db"
VERSION = 10


def identity(target) -> tuple[str, str]:
    """What results depend on: the target's key and the actions fingerprint."""
    from morello.rewrites import actions_fingerprint

    return target.db_key, actions_fingerprint(target)


def default_path(target) -> Path:
    """``$XDG_CACHE_HOME/morello/<target key>+<actions fingerprint>.db``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key, actions = identity(target)
    return Path(base) / "morello" / f"{key}+{actions}.db"


def superseded(target) -> list[Path]:
    """Default databases of this target written under other action tables."""
    path = default_path(target)
    key, _ = identity(target)
    try:
        return sorted(p for p in path.parent.glob(f"{key}+*.db") if p != path)
    except OSError:
        return []


def resolve(db, target) -> Path | None:
    """The database path a ``db=`` argument names: None/False/a path (see ``synthesize``)."""
    if db is False:
        return None
    return Path(db) if db is not None else default_path(target)


def check_writable(path: Path) -> None:
    """Fail early (before a long search) if ``path`` cannot be written."""
    path = Path(path)
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DatabaseError(f"cannot create database directory {parent}: {e.strerror}") from None
    if path.is_dir():
        raise DatabaseError(f"database path {path} is a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".probe.", dir=parent)
        os.close(fd)
        os.unlink(probe)
        if path.exists():
            with open(path, "ab"):
                pass
    except OSError as e:
        raise DatabaseError(f"database path {path} is not writable: {e.strerror}") from None


def _read(path: Path, target, tables: bool):
    target_name, actions = identity(target)
    try:
        with open(path, "rb") as f:
            header = json.loads(f.readline().decode("utf-8"))
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise DatabaseError(f"{path} is not a morello database")
            if header.get("version") != VERSION:
                raise DatabaseError(
                    f"{path} has database version {header.get('version')}, "
                    f"this morello reads version {VERSION}; delete it or pass another --db")
            other = header.get("target")
            if isinstance(other, str) and other.split("@")[0] == target_name.split("@")[0] \
                    and other != target_name:
                raise DatabaseError(
                    f"{path} holds results computed under other cost constants "
                    f"({other}, not {target_name}); delete it or pass another --db")
            if other != target_name:
                raise DatabaseError(
                    f"{path} holds results for target {header.get('target')!r}, "
                    f"not {target_name!r}; pass another --db")
            if header.get("actions") != actions:
                raise DatabaseError(
                    f"{path} was written under another action table (actions "
                    f"{header.get('actions')}, this morello has {actions}: kernels, tile "
                    "sizes or kinds changed), so its stored decisions would be misread; "
                    "delete it or pass another --db")
            roots = json.loads(f.readline().decode("utf-8"))
            if not isinstance(roots, dict):
                raise DatabaseError(f"{path} is corrupt (unexpected roots)")
            if not tables:
                return roots
            boxes = pickle.loads(zlib.decompress(f.read()))
            boxes = {k: tuple(np.asarray(a, np.int64) for a in v) for k, v in boxes.items()}
    except DatabaseError:
        raise
    except (OSError, ValueError, UnicodeDecodeError, pickle.UnpicklingError, EOFError,
            AttributeError, ImportError, IndexError, TypeError, zlib.error) as e:
        raise DatabaseError(f"{path} is corrupt or unreadable ({type(e).__name__}); "
                            "delete it or pass another --db") from None
    if not isinstance(boxes, dict) or not all(
            isinstance(v, tuple) and len(v) == 3 for v in boxes.values()):
        raise DatabaseError(f"{path} is corrupt (unexpected payload)")
    return boxes


def load(path: Path, target) -> dict:
    """The stored tables, or {} if the file does not exist."""
    path = Path(path)
    return _read(path, target, True) if path.exists() else {}


def load_roots(path: Path, target) -> dict:
    """The stored roots (Spec text -> {"trace", "cost"}), or {} if there is no file."""
    path = Path(path)
    return _read(path, target, False) if path.exists() else {}


def save(path: Path, target, boxes: dict, roots: dict | None = None) -> int:
    """Atomically write the tables ``boxes`` and ``roots``; return the file size."""
    path = Path(path)
    check_writable(path)
    target_name, actions = identity(target)
    header = json.dumps({"format": FORMAT, "version": VERSION, "target": target_name,
                         "actions": actions})
    try:
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise DatabaseError(f"cannot write database {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header.encode() + b"\n")
            f.write(json.dumps(roots or {}).encode() + b"\n")
            small = {k: tuple(_narrow(a) for a in v) for k, v in boxes.items()}
            f.write(zlib.compress(pickle.dumps(small, protocol=pickle.HIGHEST_PROTOCOL), 6))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise DatabaseError(f"cannot write database {path}: {e.strerror}") from None
        raise
    return path.stat().st_size


def _narrow(a: np.ndarray) -> np.ndarray:
    """The smallest integer type holding ``a`` exactly (values are widened on load)."""
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if a.size == 0 or (a.min() >= info.min and a.max() <= info.max):
            return a.astype(t)
    return a


def stats(path: Path, target) -> dict:
    """Specs covered (points, counting each limit vector), stored boxes, compression
    ratio and bytes on disk."""
    from morello._memo import MemoTable

    path = Path(path)
    tables = {k: MemoTable.from_arrays(*v) for k, v in load(path, target).items()}
    boxes = sum(len(t) for t in tables.values())
    covered = sum(t.covered() for t in tables.values())
    return {
        "path": str(path),
        "target": target.db_key,
        "actions": identity(target)[1],
        "boxes": boxes,
        "specs_covered": covered,
        "roots": len(load_roots(path, target)),
        "compression_ratio": round(covered / boxes, 2) if boxes else 0.0,
        "tables": {"/".join(map(str, (k[0], *k[1], *k[2], k[3]))): len(t)
                   for k, t in tables.items()},
        "bytes": path.stat().st_size if path.exists() else 0,
    }
