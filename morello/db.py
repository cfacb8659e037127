"""The results database: solved Specs in pages of a SQLite file, read lazily, shared safely.

One file holds the results of any number of *contexts*: a context is a target with its
cost constants and thread count (``Target.db_key``) and the fingerprint of the action
table (``morello.identity.actions_fingerprint``), so results computed under other
constants, threads or kernels never mix, and one file can serve them all. Tables::

    meta(name, value)                       format, version, seq (a commit counter), ...
    contexts(id, target, actions)           one row per context
    tables(id, ctx, key, ndim, nvalues, blocks)
                                            a memo table (``morello.coords`` key, as JSON)
                                            and its page geometry (a block per coordinate)
    pages(tbl, page, version, nboxes, data) one *part* of a page of a table: its page
                                            coordinates (int64 little-endian), the seq of
                                            the commit that wrote the part, and its boxes
                                            (``morello.pageblob``: typed columns + crc32)
    roots(ctx, spec, trace, cost)           a Spec asked for (its text form) -> the action
                                            trace of its optimal Impl (JSON: each node's
                                            [group, index], or an older morello's action
                                            index) and its cost

Reads are lazy: a search reads the directory of a table (page coordinates and versions)
when it first meets the table, and a page when a lookup first falls in it
(``morello._pages``, an LRU cache bounded in bytes). A save appends, in one transaction,
one new *part* per page the search added to: the part holds only the new boxes, so a
save costs what the search added, not the size of the pages it touched, and writers
never overwrite each other (concurrent writers lose nothing). A page's parts are read
newest first; every stored value is optimal at its points, so any part that holds a
point answers it. When a page has MAX_PARTS parts, a save merges its fresh boxes with the
newest parts (each older part taken while it is at most twice the boxes merged so far).
SQLite's write-ahead log gives atomic commits: a process killed at
any point leaves the file as of its last commit.

Safe to open from someone else: the file must be a regular file holding exactly this
schema (no triggers, views or other objects; ``trusted_schema`` is off), every page is
checksummed, decoded without pickle or eval, and validated (boxes inside their page,
coordinates and values within the target's ranges) before the search trusts it. A file
that fails any check is refused with one line (``DatabaseError``).

What is safe: several processes and threads on one machine, reading and writing one file.
On a network file system, SQLite's locking (and the write-ahead log's shared memory) is
not reliable: use a local file, or open the shared one read-only.
"""
from __future__ import annotations

import functools
import gc
import json
import os
import sqlite3
import stat
import time
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from morello import pageblob
from morello.errors import DatabaseError

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

MAX_PARTS = 8              # parts of one page before a save compacts them
MAX_COST = 1 << 62
MAX_DEPTH = 1 << 16
MAX_ACTION = 1 << 16
MAX_TRACE = 1 << 20          # characters of a stored trace
MAX_ROOT_TEXT = 1 << 16      # characters of a stored Spec text


def valid_trace(trace) -> bool:
    """Whether ``trace`` (decoded JSON) is a list of action indices or ``[group, index]``
    pairs in range (``morello.impl.replay`` checks that each names an action)."""
    def index(a) -> bool:
        return isinstance(a, int) and not isinstance(a, bool) and 0 <= a < MAX_ACTION

    return isinstance(trace, list) and all(
        index(a) or (isinstance(a, list) and len(a) == 2 and index(a[0]) and index(a[1]))
        for a in trace)


def identity(target) -> tuple[str, str]:
    """What results depend on: the target's key and the actions fingerprint."""
    from morello.identity import actions_fingerprint

    return target.db_key, actions_fingerprint(target)


def default_path() -> Path:
    """``$XDG_CACHE_HOME/morello/results-v<VERSION>.sqlite`` (one file for every target,
    cost constants and action table: they are contexts inside it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "morello" / f"results-v{VERSION}.sqlite"


def resolve(db) -> Path | None:
    """The database path a ``db=`` argument names: None/False/a path (see ``synthesize``)."""
    import os

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


def _table_key(text: str) -> tuple:
    """The table key of its JSON text; ValueError if it is not one."""
    from morello.coords import family_kinds

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


def _merged_versions(stored: list, fresh: int) -> list[int]:
    """The versions of the parts a save merges with ``fresh`` new boxes, given the
    page's ``(version, nboxes)`` newest first (MAX_PARTS - 1 or more of them): the newest
    part, and each older one while it holds no more than twice the boxes merged so far.
    Parts so grow geometrically from newest to oldest, a page keeps fewer than MAX_PARTS
    parts, and a small save rewrites small parts, not the page (a whole-page compaction
    made a 3x7x9 search into a large database 2.5x slower than into an empty one). The
    box counts only steer this choice (a wrong one from a hostile file costs time)."""
    total = fresh
    need = max(1, len(stored) + 2 - MAX_PARTS)  # at least: fewer than MAX_PARTS remain
    out: list[int] = []
    for version, n in stored:
        n = n if isinstance(n, int) and n >= 0 else 0
        if len(out) >= need and n > 2 * total:
            break
        out.append(version)
        total += n
    return out


def _page_bytes(page: Iterable[int]) -> bytes:
    return np.asarray(list(page), dtype="<i8").tobytes()


def _page_tuple(blob, ndim: int) -> tuple[int, ...]:
    if not isinstance(blob, bytes) or len(blob) != 8 * ndim:
        raise ValueError("malformed page coordinates")
    page = np.frombuffer(blob, "<i8")
    if (page < 0).any() or (page > (1 << 62)).any():
        raise ValueError("page coordinates out of range")
    return tuple(int(x) for x in page)


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


class Store:
    """One open database file, in one context (target and action table).

    ``readonly``: never write (also chosen when the file or its directory is not
    writable; ``writable`` says which). Every method raises DatabaseError, never
    sqlite3 or decoding errors. Not thread-safe: callers serialize (``morello.api`` does).
    """

    def __init__(self, path, target, *, readonly: bool = False,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        from morello.coords import segments

        self.path = Path(path)
        self.target = target
        self.cache_bytes = cache_bytes
        self._segments = segments
        exists = _check_path(self.path)
        if not exists and readonly:
            raise DatabaseError(f"database {self.path} does not exist")
        if not exists:
            check_writable(self.path)
        self.writable = not readonly and _writable(self.path, exists)
        self.conn = self._connect(exists)
        try:
            self._setup(exists)
        except BaseException:
            self.conn.close()
            raise
        if target is None:  # tools: every context, none of them ours
            self.target_key = self.actions = ""
        else:
            self.target_key, self.actions = identity(target)
        self.ctx = self._context(create=False) if target is not None else None
        self.seq_seen = self._seq()
        self.data_version = self._data_version()

    # ---- opening --------------------------------------------------------------------
    def _connect(self, exists: bool) -> sqlite3.Connection:
        mode = "rw" if self.writable else "ro"
        if not exists:
            mode = "rwc"
        uri = f"{self.path.absolute().as_uri()}?mode={mode}"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None,
                                   timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            conn.execute("PRAGMA trusted_schema=OFF")
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            if hasattr(conn, "setlimit"):  # Python >= 3.11
                conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH,  # type: ignore[attr-defined,unused-ignore]
                              pageblob.MAX_PAYLOAD + 4096)
            conn.execute("PRAGMA cell_size_check=ON")
            if not self.writable:
                conn.execute("PRAGMA query_only=ON")
            # A file nobody may write to (a shipped database in a read-only directory)
            # cannot keep SQLite's lock files: open it as immutable.
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except UnicodeDecodeError:
            raise DatabaseError(f"{self.path} is not a morello database (undecodable "
                                "text); delete it or pass another --db") from None
        except sqlite3.DatabaseError as e:
            if not self.writable and exists and "unable to open" in str(e):
                conn = sqlite3.connect(f"{self.path.absolute().as_uri()}?immutable=1",
                                       uri=True, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("PRAGMA trusted_schema=OFF")
                conn.execute("PRAGMA query_only=ON")
                return conn
            raise DatabaseError(f"{self.path} is not a morello database ({e}); delete it "
                                "or pass another --db") from None
        return conn

    def _setup(self, exists: bool) -> None:
        try:
            objects = {(t, n): sql for t, n, sql in self.conn.execute(
                "SELECT type, name, sql FROM sqlite_master")}
            if not objects:
                if not self.writable:
                    raise DatabaseError(f"{self.path} holds no database yet (an empty "
                                        "file), and is opened read-only")
                self._create()
                return
            expected = {(t, n): sql for t, n, sql in _SCHEMA}
            extra = set(objects) - set(expected) - _AUTO
            if extra or any(objects.get(k) != sql for k, sql in expected.items()):
                raise DatabaseError(f"{self.path} does not hold the schema of a morello "
                                    "database (unknown or altered tables, triggers or "
                                    "views); delete it or pass another --db")
            meta = dict(self.conn.execute("SELECT name, value FROM meta").fetchall())
            if meta.get("format") != FORMAT:
                raise DatabaseError(f"{self.path} is not a morello database")
            if meta.get("version") != str(VERSION):
                raise DatabaseError(
                    f"{self.path} has database version {meta.get('version')!r:.20}, this "
                    f"morello reads version {VERSION}; delete it or pass another --db")
            if self.writable:
                self._wal()
                self.conn.execute("PRAGMA synchronous=NORMAL")
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise DatabaseError(f"{self.path} is corrupt or unreadable ({_reason(e)}); "
                                "delete it or pass another --db") from None

    def _wal(self) -> None:
        """Put the file in WAL mode (persistent: the first opener does it). Switching the
        mode answers "locked" at once, without the busy handler, while another process
        opens the same new file: retry then, up to the busy timeout."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                if self.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self.conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _create(self) -> None:
        self._wal()
        self.conn.execute("PRAGMA synchronous=NORMAL")
        with self._write():
            # Another process may have created it between our check and now.
            if self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                return
            for _, _, sql in _SCHEMA:
                self.conn.execute(sql)
            self.conn.executemany("INSERT INTO meta VALUES (?, ?)",
                                  [("format", FORMAT), ("version", str(VERSION)),
                                   ("seq", "0")])

    def close(self) -> None:
        try:
            self.conn.close()
        except sqlite3.Error:
            pass

    @contextmanager
    def _write(self):
        """One write transaction (BEGIN IMMEDIATE: waits for other writers)."""
        if not self.writable:
            raise DatabaseError(f"{self.path} is read-only")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            raise DatabaseError(f"cannot write database {self.path}: {e}") from None
        try:
            yield
        except (sqlite3.Error, UnicodeDecodeError) as e:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise DatabaseError(f"{self.path} is corrupt or unwritable ({_reason(e)}); "
                                "delete it or pass another --db") from None
        except BaseException:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as e:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise DatabaseError(f"cannot write database {self.path}: {e}") from None

    def _q(self, sql: str, args=()):
        try:
            return self.conn.execute(sql, args).fetchall()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise DatabaseError(f"{self.path} is corrupt or unreadable ({_reason(e)}); "
                                "delete it or pass another --db") from None

    def _seq(self) -> int:
        rows = self._q("SELECT value FROM meta WHERE name = 'seq'")
        try:
            seq = int(rows[0][0]) if rows else -1
        except (TypeError, ValueError):
            seq = -1
        if not 0 <= seq < (1 << 62):
            raise DatabaseError(f"{self.path} is corrupt (bad seq)")
        return seq

    def _data_version(self) -> int:
        return int(self._q("PRAGMA data_version")[0][0])

    def _context(self, create: bool) -> int | None:
        rows = self._q("SELECT id FROM contexts WHERE target = ? AND actions = ?",
                       (self.target_key, self.actions))
        if rows:
            return int(rows[0][0])
        if not create:
            return None
        self.conn.execute("INSERT OR IGNORE INTO contexts(target, actions) VALUES (?, ?)",
                          (self.target_key, self.actions))
        return int(self.conn.execute(
            "SELECT id FROM contexts WHERE target = ? AND actions = ?",
            (self.target_key, self.actions)).fetchone()[0])

    # ---- reading --------------------------------------------------------------------
    def changed(self) -> bool:
        """Whether another connection committed since we last looked."""
        v = self._data_version()
        if v == self.data_version:
            return False
        self.data_version = v
        return True

    def table(self, key: tuple) -> tuple[int, tuple[int, ...]] | None:
        """``(table id, blocks)`` of ``key`` in this context, or None if the file has no
        such table. (Its pages are read one by one as a search meets them.)"""
        from morello.coords import point_len

        if self.ctx is None:
            self.ctx = self._context(create=False)
            if self.ctx is None:
                return None
        rows = self._q("SELECT id, ndim, nvalues, blocks FROM tables WHERE ctx = ? AND "
                       "key = ?", (self.ctx, _table_key_text(key)))
        if not rows:
            return None
        tid, ndim, nvalues, blocks_text = rows[0]
        blocks = self._blocks(blocks_text, key)
        if ndim != point_len(key) or nvalues != _nvalues():
            raise DatabaseError(f"{self.path} is corrupt (table {key[0]} has {ndim} "
                                f"coordinates and {nvalues} values)")
        return int(tid), blocks

    def _blocks(self, text, key) -> tuple[int, ...]:
        from morello.coords import point_len

        try:
            blocks = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            blocks = None
        if (not isinstance(blocks, list) or len(blocks) != point_len(key)
                or not all(isinstance(b, int) and not isinstance(b, bool)
                           and -63 <= b <= (1 << 40) for b in blocks)
                or any(b for b, s in zip(blocks, self._segments(key)) if s == "limit")):
            raise DatabaseError(f"{self.path} is corrupt (bad page geometry of {key[0]})")
        return tuple(blocks)

    def _page_coords(self, blob, ndim) -> tuple[int, ...]:
        try:
            return _page_tuple(blob, ndim)
        except ValueError as e:
            raise DatabaseError(f"{self.path} is corrupt ({e})") from None

    def _version(self, v) -> int:
        if not isinstance(v, int) or not 1 <= v < (1 << 62):
            raise DatabaseError(f"{self.path} is corrupt (bad page version)")
        return v

    def changes(self, keys: dict[tuple, int]) -> list[tuple[tuple, tuple[int, ...], int]]:
        """Pages of the tables ``keys`` (key -> table id) written since the last call:
        ``[(key, page, version), ...]``."""
        seq = self._seq()
        if seq == self.seq_seen or not keys:
            self.seq_seen = seq
            return []
        by_id = {tid: key for key, tid in keys.items()}
        out = []
        for tbl, page, version, ndim in self._q(
                "SELECT p.tbl, p.page, p.version, t.ndim FROM pages p JOIN tables t "
                "ON p.tbl = t.id WHERE p.version > ?", (self.seq_seen,)):
            key = by_id.get(tbl)
            if key is not None:
                out.append((key, self._page_coords(page, ndim), self._version(version)))
        self.seq_seen = seq
        return out

    def table_ids(self) -> dict[tuple, int]:
        """Key -> table id of every table of this context."""
        if self.ctx is None:
            self.ctx = self._context(create=False)
            if self.ctx is None:
                return {}
        out = {}
        for tid, text in self._q("SELECT id, key FROM tables WHERE ctx = ?", (self.ctx,)):
            try:
                out[_table_key(text)] = int(tid)
            except ValueError as e:
                raise DatabaseError(f"{self.path} is corrupt ({e})") from None
        return out

    def load_page(self, tid: int, key: tuple, blocks: tuple[int, ...], page):
        """The parts of the page, newest first, as validated FrozenPages (None if the
        file has no such page)."""
        rows = self._q("SELECT data, version FROM pages WHERE tbl = ? AND page = ? ORDER BY "
                       "version DESC LIMIT ?", (tid, _page_bytes(page), 4 * MAX_PARTS))
        if not rows:
            return None
        for _, version in rows:
            self._version(version)
        try:
            bounds = page_bounds(key, blocks, page, self.target)
        except ValueError as e:
            raise DatabaseError(f"{self.path} is corrupt (a page of {key[0]}: {e}); "
                                "delete it or pass another --db") from None
        return [self._frozen(data, key, blocks, page, bounds=bounds) for data, _ in rows]

    def _frozen(self, blob, key, blocks, page, target=None, bounds=None):
        """The validated FrozenPage of a stored part (checked in C: no decoding into
        arrays; ``validate_boxes`` says what is checked; ``bounds``: ``page_bounds``
        of its page, if known)."""
        from morello._pages import FrozenPage

        ndim, exact = _key_dims(key)
        try:
            payload, widths, n = pageblob.unpack(blob, ndim, _nvalues())
            frozen = FrozenPage(payload, widths, n, ndim, _nvalues(), exact)
            frozen.check_bounds(*(bounds or page_bounds(key, blocks, page,
                                                        target or self.target)))
            return frozen
        except ValueError as e:
            raise DatabaseError(f"{self.path} is corrupt (a page of {key[0]}: {e}); "
                                "delete it or pass another --db") from None

    def _decode(self, blob, key, blocks, page, target=None):
        from morello.coords import point_len

        try:
            lo, hi, values = pageblob.decode(blob, point_len(key), _nvalues())
            validate_boxes(lo, hi, values, key, blocks, page, target or self.target)
        except ValueError as e:
            raise DatabaseError(f"{self.path} is corrupt (a page of {key[0]}: {e}); "
                                "delete it or pass another --db") from None
        return lo, hi, values

    def root(self, spec_text: str) -> tuple[list, int] | None:
        """The stored ``(trace, cost)`` of a Spec asked for before, or None."""
        if self.ctx is None:
            self.ctx = self._context(create=False)
            if self.ctx is None:
                return None
        rows = self._q("SELECT trace, cost FROM roots WHERE ctx = ? AND spec = ?",
                       (self.ctx, spec_text))
        if not rows:
            return None
        trace_text, cost = rows[0]
        if not isinstance(trace_text, str) or len(trace_text) > MAX_TRACE:
            return None
        try:
            trace = json.loads(trace_text)
        except (ValueError, RecursionError):
            return None
        if not valid_trace(trace) or not isinstance(cost, int) or not 0 <= cost < MAX_COST:
            return None
        return trace, cost

    def meta(self, name: str) -> str | None:
        rows = self._q("SELECT value FROM meta WHERE name = ?", (name,))
        return rows[0][0] if rows and isinstance(rows[0][0], str) else None

    # ---- writing --------------------------------------------------------------------
    def save(self, cache, table_keys: list, roots: dict, stats: dict | None = None,
             engine_ids: dict | None = None, persist=None) -> int:
        """Write, in one transaction, the dirty pages of ``cache`` (a ``PageCache`` whose
        table i has key ``table_keys[i]``, or None for roots alone) and ``roots`` (Spec
        text -> (trace, cost));
        return the pages written. ``persist(flush)``, if given, fills the cache inside the
        transaction (``Solver.persist``), calling ``flush()`` after each page, which writes
        and releases it. ``engine_ids`` (key -> table id) is updated with new tables.

        If the transaction fails, the cache no longer matches the file: drop it.

        The garbage collector is paused meanwhile: a save makes many short-lived objects,
        and each collection would walk the whole heap of a large search."""
        paused = gc.isenabled()
        gc.disable()
        try:
            return self._save(cache, table_keys, roots, stats, engine_ids, persist)
        finally:
            if paused:
                gc.enable()

    def _save(self, cache, table_keys, roots, stats, engine_ids, persist) -> int:
        written = 0
        with self._write():
            if self.ctx is None:
                self.ctx = self._context(create=True)
            seq = self._seq() + 1
            ids: dict[tuple, int] = dict(engine_ids or {})
            created = _Created()

            def flush() -> None:
                nonlocal written
                for s in (cache.take_dirty() if cache is not None else []):
                    self._write_page(cache, table_keys, s, seq, ids, created)
                    written += 1

            if persist is not None:
                persist(flush)
            flush()
            for s in (cache.dirty() if cache is not None else []):  # dirty before this save
                self._write_page(cache, table_keys, s, seq, ids, created)
                written += 1
            for text, (trace, cost) in roots.items():
                self.conn.execute("INSERT OR REPLACE INTO roots VALUES (?, ?, ?, ?)",
                                  (self.ctx, text, json.dumps(trace), cost))
            self.conn.execute("UPDATE meta SET value = ? WHERE name = 'seq'", (str(seq),))
            if stats is not None:
                self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('last_search', ?)",
                                  (json.dumps(stats),))
        if engine_ids is not None:
            engine_ids.update(ids)
        return written

    def _write_page(self, cache, table_keys, s: int, seq: int, ids: dict,
                    created: _Created) -> None:
        """Append the fresh boxes of slot ``s`` of ``cache`` as part ``seq`` of its page;
        at MAX_PARTS parts, merge them with the page's newest parts instead
        (``_merged_versions``)."""
        table, page, _, _ = cache.slot(s)
        key = table_keys[table]
        geo = cache.geometry(table)
        tid = ids.get(key)
        if tid is None:
            tid = ids[key] = self._table_id(key, geo[1], created)
        pb = _page_bytes(page)
        stored: list = []  # a table this save created holds only the pages it wrote
        if tid not in created.tables or not created.first_write(tid, pb):
            stored = self.conn.execute("SELECT version, nboxes FROM pages WHERE tbl = ? AND "
                                       "page = ? ORDER BY version DESC", (tid, pb)).fetchall()
        merged: list[int] = []
        if len(stored) + 1 >= MAX_PARTS:
            fresh = cache.fresh_arrays(s)
            merged = _merged_versions(stored, len(fresh[0]) if fresh else 0)
        frozen = None if merged else cache.fresh_frozen(s)
        whole = bool(merged) and len(merged) == len(stored)  # the page is one part now
        if merged:
            # Compaction: the boxes of the merged parts and the fresh ones (each optimal
            # throughout) in one new part, built like a search's (overlaps carved,
            # neighbours merged), stored in their place.
            marks = ",".join("?" * len(merged))
            old = [data for (data,) in self.conn.execute(
                f"SELECT data FROM pages WHERE tbl = ? AND page = ? AND version IN ({marks}) "
                "ORDER BY version", (tid, pb, *merged)).fetchall()]
            rows = np.concatenate([*(self._frozen(data, key, geo[1], page).rows()
                                     for data in old),
                                   np.concatenate(fresh, axis=1)])
            self.conn.execute(f"DELETE FROM pages WHERE tbl = ? AND page = ? AND version "
                              f"IN ({marks})", (tid, pb, *merged))
            frozen = cache.build_part(table, rows)
        if frozen is not None:  # built in bulk (PageCache.put_page): stored as it is
            payload, widths = frozen.stored_form()
            blob = pageblob.pack(payload, widths, len(frozen), frozen.ndim, frozen.nvalues)
            self.conn.execute("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?)",
                              (tid, pb, seq, len(frozen), blob))
            # After a partial merge the cache's parts no longer match the file's: the
            # page is read again when next touched.
            cache.saved(s, seq, frozen if whole or not merged else None, whole)
            return
        arrays = fresh if merged else cache.fresh_arrays(s)
        if merged:  # the rows make no part built in bulk: merged box by box
            merged_table = cache.new_table(table)
            for data in old:
                for a, b, v in zip(*self._decode(data, key, geo[1], page)):
                    merged_table.put(a, b, v)
            for a, b, v in zip(*arrays):
                merged_table.put(a, b, v)
            arrays = merged_table.to_arrays()
        blob = pageblob.encode(*_exact_order(arrays, key))
        self.conn.execute("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?)",
                          (tid, pb, seq, len(arrays[0]), blob))
        keep = whole or not merged
        cache.saved(s, seq, self._frozen(blob, key, geo[1], page) if keep else None, whole)

    def _table_id(self, key: tuple, blocks: tuple[int, ...],
                  created: _Created | None = None) -> int:
        """The id of table ``key`` in this file's context, created (and added to
        ``created.tables``) if it has none."""
        from morello.coords import point_len

        text = _table_key_text(key)
        row = self.conn.execute("SELECT id, blocks FROM tables WHERE ctx = ? AND key = ?",
                                (self.ctx, text)).fetchone()
        if row is not None:
            if self._blocks(row[1], key) != tuple(blocks):
                raise DatabaseError(f"{self.path} pages {key[0]} with another geometry")
            return int(row[0])
        cur = self.conn.execute("INSERT INTO tables(ctx, key, ndim, nvalues, blocks) VALUES "
                                "(?, ?, ?, ?, ?)", (self.ctx, text, point_len(key),
                                                    _nvalues(), json.dumps(list(blocks))))
        assert cur.lastrowid is not None
        if created is not None:
            created.tables.add(cur.lastrowid)
        return cur.lastrowid


class _Created:
    """The tables one save has created, whose pages need not be looked up in the file
    (a cold 1024^3 wrote 3240 pages, each looked up first), and the pages of those it has
    written (a page written twice in one save is looked up the second time)."""

    def __init__(self) -> None:
        self.tables: set[int] = set()
        self.pages: set[tuple[int, bytes]] = set()

    def first_write(self, tid: int, pb: bytes) -> bool:
        """Whether page ``pb`` of created table ``tid`` is written now for the first
        time in this save (and note that it is)."""
        if (tid, pb) in self.pages:
            return False
        self.pages.add((tid, pb))
        return True


def _exact_order(arrays, key: tuple):
    """``(lo, hi, values)`` with the boxes in the order of their exact coordinates, the
    order a FrozenPage searches (a part stored so is not sorted again when loaded)."""
    lo, hi, values = arrays
    _, exact = _key_dims(key)
    if not exact or len(lo) < 2:
        return arrays
    order = np.lexsort(lo[:, list(exact)].T[::-1])
    return lo[order], hi[order], values[order]


def _reason(e: BaseException) -> str:
    """An exception's message, safe to print (one line, bounded)."""
    text = str(e).replace("\n", " ")
    return text[:200]


def _nvalues() -> int:
    from morello.search import NVALUES

    return NVALUES


def _writable(path: Path, exists: bool) -> bool:
    """Whether we may write ``path`` (and keep SQLite's journal beside it)."""
    return os.access(path.parent, os.W_OK) and (not exists or os.access(path, os.W_OK))


def check_writable(path: Path) -> None:
    """Fail early (before a long search) if a new database cannot be made at ``path``."""
    path = Path(path)
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DatabaseError(f"cannot create database directory {parent}: {e.strerror}") from None
    if path.is_dir():
        raise DatabaseError(f"database path {path} is a directory")
    if not os.access(parent, os.W_OK):
        raise DatabaseError(f"database path {path} is not writable (its directory is not)")


def coordinate_bounds(key: tuple, target) -> list[int]:
    """Per coordinate of table ``key``, the largest value a stored box may reach."""
    from morello.coords import _limit_coord, family_kinds, segments
    from morello.limits import MAX_POINTS
    from morello.memory import LEVELS, NLEVELS

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
    from morello.coords import exact_dims, point_len

    return point_len(key), exact_dims(key)


@functools.lru_cache(maxsize=256)
def _static_bounds(key: tuple, target) -> tuple[list[int], list[int], list[int], list[str]]:
    from morello.memory import LEVELS

    cap = list(target.max_limits().units)
    vmin = [0, 1] + [0] * len(LEVELS) + [0, -1]
    vmax = [MAX_COST - 1, MAX_COST - 1] + cap + [MAX_DEPTH - 1, MAX_ACTION - 1]
    names = ["cost", "cost"] + [f"peak of {lvl.name}" for lvl in LEVELS] + ["depth", "action"]
    return coordinate_bounds(key, target), vmin, vmax, names


def page_bounds(key: tuple, blocks, page, target):
    """``(lo_min, hi_max, value_min, value_max, value_names)`` of the boxes of ``page``
    (inclusive bounds, as ``FrozenPage.check_bounds`` takes them): inside the page,
    within the target's coordinates, and plausible values (``validate_boxes``)."""
    from morello._pages import page_range

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


# ---- tools: stats, check, merge ------------------------------------------------------

def _target_named(key_text: str):
    """The Target a context's key names (``avx2@...``, ``avx2-2t@...``,
    ``avx2-dram@...``, ``avx2-llc@...``), or None."""
    from morello.memory import TARGETS

    parts = key_text.split("@")[0].split("-") if isinstance(key_text, str) else [""]
    tgt = TARGETS.get(parts[0])
    if tgt is not None and "dram" in parts[1:]:
        tgt = tgt.in_dram()
    if tgt is not None and "llc" in parts[1:]:
        tgt = tgt.in_llc()
    return tgt


class _Walker(Store):
    """A Store opened for the tools: it reads every context, its own none."""

    def __init__(self, path, *, readonly: bool = True) -> None:
        if readonly and not _check_path(Path(path)):
            raise DatabaseError(f"database {path} does not exist")
        super().__init__(path, None, readonly=readonly)

    def contexts(self) -> list[tuple[int, str, str]]:
        return [(int(i), t, a) for i, t, a in
                self._q("SELECT id, target, actions FROM contexts ORDER BY id")]

    def tables_of(self, ctx: int) -> list[tuple[int, tuple, tuple[int, ...]]]:
        from morello.coords import point_len

        out = []
        for tid, text, ndim, nvalues, blocks_text in self._q(
                "SELECT id, key, ndim, nvalues, blocks FROM tables WHERE ctx = ? "
                "ORDER BY id", (ctx,)):
            try:
                key = _table_key(text)
            except ValueError as e:
                raise DatabaseError(f"{self.path} is corrupt ({e})") from None
            if ndim != point_len(key) or nvalues != _nvalues():
                raise DatabaseError(f"{self.path} is corrupt (table {key[0]} has {ndim} "
                                    f"coordinates and {nvalues} values)")
            out.append((int(tid), key, self._blocks(blocks_text, key)))
        return out

    def pages_of(self, tid: int, ndim: int):
        """(page, blob) of every part of every page of table ``tid``, one at a time, by
        page and oldest part first (DatabaseError for a malformed page key or version)."""
        cur = self.conn.execute("SELECT page, version FROM pages WHERE tbl = ? ORDER BY "
                                "page, version", (tid,))
        try:
            keys = cur.fetchall()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            raise DatabaseError(f"{self.path} is corrupt or unreadable ({_reason(e)})") \
                from None
        for pb, v in keys:
            self._version(v)
            rows = self._q("SELECT data FROM pages WHERE tbl = ? AND page = ? AND "
                           "version = ?", (tid, pb, v))
            if rows:
                yield self._page_coords(pb, ndim), rows[0][0]

    def roots_of(self, ctx: int) -> list[tuple[str, str, int]]:
        return self._q("SELECT spec, trace, cost FROM roots WHERE ctx = ?", (ctx,))


def _context_target(path, target_key: str):
    tgt = _target_named(target_key)
    if tgt is None:
        raise DatabaseError(f"{path} holds results of an unknown target "
                            f"{str(target_key)[:40]!r}")
    return tgt


def stats(path) -> dict:
    """What the file holds, per context: tables, pages, boxes, Specs covered (points,
    counting each limit vector), roots; its bytes; and the last search's page-cache
    figures."""
    from morello._memo import MemoTable
    from morello.coords import point_len

    path = Path(path)
    w = _Walker(path)
    try:
        contexts = []
        for ctx, target_key, actions in w.contexts():
            tgt = _context_target(path, target_key)
            tables = {}
            boxes = covered = npages = 0
            for tid, key, blocks in w.tables_of(ctx):
                tb = tc = 0
                seen = set()
                for page, blob in w.pages_of(tid, point_len(key)):
                    lo, hi, values = w._decode(blob, key, blocks, page, tgt)
                    tb += len(lo)
                    tc += MemoTable.from_arrays(lo, hi, values).covered()  # parts may overlap
                    seen.add(page)
                tp = len(seen)
                tables["/".join(map(str, (key[0], *key[1], *key[2], key[3])))] = {
                    "pages": tp, "boxes": tb}
                boxes, covered, npages = boxes + tb, covered + tc, npages + tp
            contexts.append({
                "target": target_key, "actions": actions, "pages": npages,
                "boxes": boxes, "specs_covered": covered,
                "compression_ratio": round(covered / boxes, 2) if boxes else 0.0,
                "roots": len(w.roots_of(ctx)), "tables": tables})
        last = w.meta("last_search")
        try:
            last_search = json.loads(last) if last else None
        except (ValueError, RecursionError):
            last_search = None
        size = sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal"))
                   if os.path.exists(p))
        return {"path": str(path), "version": VERSION, "bytes": size,
                "pages": sum(c["pages"] for c in contexts),
                "boxes": sum(c["boxes"] for c in contexts),
                "specs_covered": sum(c["specs_covered"] for c in contexts),
                "last_search": last_search, "contexts": contexts}
    finally:
        w.close()


def check(path) -> dict:
    """Verify the whole file: SQLite's integrity check, then every page (checksum,
    decoding, boxes inside their page and disjoint, values in range) and every root.
    Returns counts; DatabaseError naming the first problem if anything is wrong."""
    from morello._memo import MemoTable
    from morello.coords import point_len

    path = Path(path)
    w = _Walker(path)
    try:
        rows = w._q("PRAGMA integrity_check")
        if [r[0] for r in rows] != ["ok"]:
            raise DatabaseError(f"{path} fails SQLite's integrity check: {rows[0][0]}")
        pages = boxes = roots = 0
        bad: list[str] = []
        for ctx, target_key, _ in w.contexts():
            tgt = _context_target(path, target_key)
            for tid, key, blocks in w.tables_of(ctx):
                for page, blob in w.pages_of(tid, point_len(key)):
                    pages += 1
                    try:
                        lo, hi, values = w._decode(blob, key, blocks, page, tgt)
                        MemoTable.from_arrays(lo, hi, values)
                        w._frozen(blob, key, blocks, page, tgt)
                        boxes += len(lo)
                    except (DatabaseError, ValueError) as e:
                        bad.append(f"{key[0]} page {page}: {e}")
            for spec, trace, cost in w.roots_of(ctx):
                roots += 1
                try:
                    t = json.loads(trace)
                    ok = valid_trace(t) and isinstance(cost, int) and isinstance(spec, str)
                except (TypeError, ValueError, RecursionError):
                    ok = False
                if not ok:
                    bad.append(f"root {str(spec)[:60]!r}: malformed")
        if bad:
            raise DatabaseError(f"{path}: {len(bad)} of {pages} pages and {roots} roots are "
                                f"bad; first: {bad[0]}")
        return {"path": str(path), "pages": pages, "boxes": boxes, "roots": roots,
                "ok": True}
    finally:
        w.close()


def merge(inputs: list, output) -> dict:
    """Merge the databases ``inputs`` into ``output`` (created if absent): contexts,
    tables and roots are matched by their keys, pages present in several files are
    merged box by box. Every input is validated as it is read; the output is written one
    transaction per input, so an interruption leaves it as of the last finished input."""
    from morello._memo import MemoTable
    from morello.coords import merge_dims, point_len

    output = Path(output)
    for p in inputs:
        if Path(p).absolute() == output.absolute():
            raise DatabaseError(f"cannot merge {p} into itself")
    out = _Walker(output, readonly=False)
    totals = {"pages_copied": 0, "pages_merged": 0, "roots": 0}
    try:
        for p in inputs:
            src = _Walker(p)
            try:
                with out._write():
                    seq = out._seq() + 1
                    for ctx, target_key, actions in src.contexts():
                        tgt = _context_target(p, target_key)
                        out.conn.execute("INSERT OR IGNORE INTO contexts(target, actions) "
                                         "VALUES (?, ?)", (target_key, actions))
                        octx = out.conn.execute(
                            "SELECT id FROM contexts WHERE target = ? AND actions = ?",
                            (target_key, actions)).fetchone()[0]
                        out.ctx = octx
                        for tid, key, blocks in src.tables_of(ctx):
                            otid = out._table_id(key, blocks)
                            for page, blob in src.pages_of(tid, point_len(key)):
                                lo, hi, values = src._decode(blob, key, blocks, page, tgt)
                                pb = _page_bytes(page)
                                row = out.conn.execute(
                                    "SELECT data FROM pages WHERE tbl = ? AND page = ?",
                                    (otid, pb)).fetchone()
                                try:
                                    if row is None:
                                        MemoTable.from_arrays(lo, hi, values)  # validate
                                        totals["pages_copied"] += 1
                                    else:
                                        t = MemoTable.from_arrays(
                                            *out._decode(row[0], key, blocks, page, tgt))
                                        mask = 0
                                        for d in merge_dims(key):
                                            mask |= 1 << d
                                        t.merge_dims = mask
                                        for a, b, v in zip(lo, hi, values):
                                            t.put(a, b, v)
                                        lo, hi, values = t.to_arrays()
                                        totals["pages_merged"] += 1
                                except ValueError as e:
                                    raise DatabaseError(f"{p} is corrupt ({e})") from None
                                out.conn.execute(
                                    "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?)",
                                    (otid, pb, seq, len(lo),
                                     pageblob.encode(*_exact_order((lo, hi, values), key))))
                        for spec, trace, cost in src.roots_of(ctx):
                            if (isinstance(spec, str) and isinstance(trace, str)
                                    and isinstance(cost, int) and len(spec) < MAX_ROOT_TEXT
                                    and len(trace) < MAX_TRACE):
                                out.conn.execute("INSERT OR IGNORE INTO roots VALUES "
                                                 "(?, ?, ?, ?)", (octx, spec, trace, cost))
                                totals["roots"] += 1
                    out.conn.execute("UPDATE meta SET value = ? WHERE name = 'seq'",
                                     (str(seq),))
            finally:
                src.close()
        # A merged file is often shipped read-only: leave no write-ahead log behind.
        out.conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        out.close()
    return {"output": str(output), **totals}
