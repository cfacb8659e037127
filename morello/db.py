"""The persistent database: every solved (Spec, limits box) -> optimum, on disk.

File format: one JSON header line (format name, version, target) followed by a pickle of
the memo boxes ``[(logical Spec, lo, hi, main, peaks, depth, action), ...]``. Writes are
atomic (temporary file in the same directory, fsync, rename), so an interrupted process
leaves either the old file or the new one. A file with another format, version or target,
or that fails to parse, is refused with a DatabaseError and never used.
"""
from __future__ import annotations

import json
import os
import pickle
import tempfile
from pathlib import Path

from morello.errors import DatabaseError

FORMAT = "morello-db"
VERSION = 1


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


def load(path: Path, target_name: str) -> list:
    """The stored boxes, or [] if the file does not exist."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        with open(path, "rb") as f:
            header = json.loads(f.readline().decode("utf-8"))
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise DatabaseError(f"{path} is not a morello database")
            if header.get("version") != VERSION:
                raise DatabaseError(
                    f"{path} has database version {header.get('version')}, "
                    f"this morello reads version {VERSION}; delete it or pass another --db")
            if header.get("target") != target_name:
                raise DatabaseError(
                    f"{path} holds results for target {header.get('target')!r}, "
                    f"not {target_name!r}; pass another --db")
            boxes = pickle.load(f)
    except DatabaseError:
        raise
    except (OSError, ValueError, UnicodeDecodeError, pickle.UnpicklingError, EOFError,
            AttributeError, ImportError, IndexError, TypeError) as e:
        raise DatabaseError(f"{path} is corrupt or unreadable ({type(e).__name__}); "
                            "delete it or pass another --db") from None
    if not isinstance(boxes, list):
        raise DatabaseError(f"{path} is corrupt (unexpected payload)")
    return boxes


def save(path: Path, target_name: str, boxes: list) -> int:
    """Atomically write ``boxes``; return the file size in bytes."""
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
            pickle.dump(boxes, f, protocol=pickle.HIGHEST_PROTOCOL)
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


def stats(path: Path, target_name: str) -> dict:
    """Entries (Specs with limits covered), stored boxes, compression ratio, bytes on disk."""
    path = Path(path)
    boxes = load(path, target_name)
    logical = {b[0] for b in boxes}
    covered = sum(_points(lo, hi) for _, lo, hi, *_ in boxes)
    return {
        "path": str(path),
        "target": target_name,
        "logical_specs": len(logical),
        "boxes": len(boxes),
        "unsat_boxes": sum(1 for b in boxes if b[6] < 0),
        "specs_covered": covered,
        "compression_ratio": round(covered / len(boxes), 2) if boxes else 0.0,
        "bytes": path.stat().st_size if path.exists() else 0,
    }


def _points(lo, hi) -> int:
    """Distinct limit vectors in a box: raw register counts, powers of two for caches."""
    n = 1
    for level, (a, b) in enumerate(zip(lo, hi)):
        if level < 2:  # RF, VRF count registers
            n *= b - a + 1
        else:
            n *= b.bit_length() - max(a, 1).bit_length() + 1 + (1 if a == 0 else 0)
    return n
