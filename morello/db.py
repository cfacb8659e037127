"""The persistent database: every solved (Spec, limits box) -> optimum, on disk.

File format: one JSON header line (format name, version, target), one JSON line of
*roots* (the stable text form of each Spec a user asked for -> the action trace of its
optimal Impl and its cost, so repeating a query replays it without loading the tables),
then a zlib-compressed pickle of ``{table key: (lo, hi, values)}``, the int64 arrays of each compressed memo table
(``morello._memo.MemoTable.to_arrays``; coordinates of ``morello.coords``). Writes are
atomic (temporary file in the same directory, fsync, rename), so an interrupted process
leaves either the old file or the new one. A file with another format, version or target,
or that fails to parse, is refused with a DatabaseError and never used.
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
VERSION = 9


def default_path(target_name: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "morello" / f"{target_name}.db"


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


def _read(path: Path, target_name: str, tables: bool):
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


def load(path: Path, target_name: str) -> dict:
    """The stored tables, or {} if the file does not exist."""
    path = Path(path)
    return _read(path, target_name, True) if path.exists() else {}


def load_roots(path: Path, target_name: str) -> dict:
    """The stored roots (Spec text -> {"trace", "cost"}), or {} if there is no file."""
    path = Path(path)
    return _read(path, target_name, False) if path.exists() else {}


def save(path: Path, target_name: str, boxes: dict, roots: dict | None = None) -> int:
    """Atomically write the tables ``boxes`` and ``roots``; return the file size."""
    path = Path(path)
    check_writable(path)
    header = json.dumps({"format": FORMAT, "version": VERSION, "target": target_name})
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


def stats(path: Path, target_name: str) -> dict:
    """Specs covered (points, counting each limit vector), stored boxes, compression
    ratio and bytes on disk."""
    from morello._memo import MemoTable

    path = Path(path)
    tables = {k: MemoTable.from_arrays(*v) for k, v in load(path, target_name).items()}
    boxes = sum(len(t) for t in tables.values())
    covered = sum(t.covered() for t in tables.values())
    return {
        "path": str(path),
        "target": target_name,
        "boxes": boxes,
        "specs_covered": covered,
        "roots": len(load_roots(path, target_name)),
        "compression_ratio": round(covered / boxes, 2) if boxes else 0.0,
        "tables": {"/".join(map(str, (k[0], *k[1], k[2]))): len(t)
                   for k, t in tables.items()},
        "bytes": path.stat().st_size if path.exists() else 0,
    }
