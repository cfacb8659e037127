"""The store's on-disk format: schema, version, the value row of a box, the encodings of
table keys and page coordinates, and where the default file lives.

A change to anything here that a stored file shows (the schema, the key or page encodings,
the value row) is a new VERSION.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from morello.errors import DatabaseError
from morello.memory import NLEVELS

FORMAT = "morello-results"
VERSION = 12
BUSY_TIMEOUT_MS = 60_000
DEFAULT_CACHE_BYTES = 256 << 20
_SQLITE_MAGIC = b"SQLite format 3\x00"

# The schema, exactly: a file whose sqlite_master differs is refused.
_SCHEMA = [
    ("table", "meta", "CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL)"),
    ("table", "contexts",
     "CREATE TABLE contexts(id INTEGER PRIMARY KEY, target TEXT NOT NULL, "
     "actions TEXT NOT NULL, UNIQUE(target, actions))"),
    ("table", "tables",
     "CREATE TABLE tables(id INTEGER PRIMARY KEY, ctx INTEGER NOT NULL, key TEXT NOT NULL, "
     "ndim INTEGER NOT NULL, nvalues INTEGER NOT NULL, blocks TEXT NOT NULL, "
     "UNIQUE(ctx, key))"),
    ("table", "pages",
     "CREATE TABLE pages(tbl INTEGER NOT NULL, page BLOB NOT NULL, version INTEGER NOT NULL, "
     "nboxes INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY(tbl, page, version)) "
     "WITHOUT ROWID"),
    ("index", "pages_by_version", "CREATE INDEX pages_by_version ON pages(version)"),
    ("table", "roots",
     "CREATE TABLE roots(ctx INTEGER NOT NULL, spec TEXT NOT NULL, trace TEXT NOT NULL, "
     "cost INTEGER NOT NULL, PRIMARY KEY(ctx, spec)) WITHOUT ROWID"),
]
# Objects SQLite makes for the constraints above.
_AUTO = {("index", "sqlite_autoindex_meta_1"), ("index", "sqlite_autoindex_contexts_1"),
         ("index", "sqlite_autoindex_tables_1")}

# A box's value row, as the search writes it (``morello.search`` takes it from here): main
# cost per unit volume (numerator, denominator), the peak per memory level, depth, action.
NVALUES = 2 + NLEVELS + 2

MAX_PARTS = 8              # parts of one page before a save compacts them
MAX_COST = 1 << 62
MAX_DEPTH = 1 << 16
MAX_ACTION = 1 << 16
MAX_TRACE = 1 << 20          # characters of a stored trace
MAX_ROOT_TEXT = 1 << 16      # characters of a stored Spec text


def default_path() -> Path:
    """``$XDG_CACHE_HOME/morello/results-v<VERSION>.sqlite`` (one file for every target,
    cost constants and action table: they are contexts inside it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "morello" / f"results-v{VERSION}.sqlite"


def shipped_path() -> Path | None:
    """The read-only database installed with morello, layered under the user's (None if
    absent). ``MORELLO_SHIPPED_DB`` names another file, or ``off`` for none."""
    env = os.environ.get("MORELLO_SHIPPED_DB")
    if env == "off":
        return None
    path = Path(env) if env else Path(__file__).resolve().parent.parent / "data" / SHIPPED
    return path if path.is_file() else None


SHIPPED = "results.sqlite"


def resolve(db) -> Path | None:
    """The database path a ``db=`` argument names: None/False/a path (see ``synthesize``)."""
    if db is False:
        return None
    if db is None:
        return default_path()
    bad = DatabaseError(f"db must be None, False or a file path, got {db!r:.60}")
    if isinstance(db, bool) or not isinstance(db, (str, os.PathLike)) or db == "":
        raise bad
    try:
        return Path(db)
    except TypeError:  # an os.PathLike of bytes
        raise bad from None


def _table_key_text(key: tuple) -> str:
    return json.dumps([key[0], list(key[1]), list(key[2]), key[3]])


def _page_bytes(page: Iterable[int]) -> bytes:
    return np.asarray(list(page), dtype="<i8").tobytes()


def _page_tuple(blob, ndim: int) -> tuple[int, ...]:
    if not isinstance(blob, bytes) or len(blob) != 8 * ndim:
        raise ValueError("malformed page coordinates")
    page = np.frombuffer(blob, "<i8")
    if (page < 0).any() or (page > (1 << 62)).any():
        raise ValueError("page coordinates out of range")
    return tuple(int(x) for x in page)
