"""``Store``: one open results file for one target, its lazy reads and transactional saves.

The file's format is ``morello.store.format``'s; whatever the file holds is checked by
``morello.store.validate`` before it is returned. Each table family's results are kept in
its own context (the target key and the family's action text), so a change the family
cannot reach leaves them valid. The action text of a family and the pipeline that fills
the page cache during a save are given by the caller: the store imports nothing of the
search.
"""
from __future__ import annotations

import gc
import json
import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from morello import pageblob
from morello._frozen import FrozenPage
from morello.coords import point_len, segments
from morello.errors import DatabaseError
from morello.store.format import (
    _AUTO,
    _SCHEMA,
    BUSY_TIMEOUT_MS,
    DEFAULT_CACHE_BYTES,
    FORMAT,
    MAX_COST,
    MAX_PARTS,
    MAX_TRACE,
    NVALUES,
    VERSION,
    _page_bytes,
    _page_tuple,
    _table_key_text,
)
from morello.store.validate import (
    _check_path,
    _key_dims,
    _table_key,
    page_bounds,
    valid_trace,
    validate_boxes,
)


def _merged_versions(stored: list, fresh: int) -> list[int]:
    """The versions of the parts a save merges with ``fresh`` new boxes, given the
    page's ``(version, nboxes)`` newest first (MAX_PARTS - 1 or more of them): the newest
    part, and each older one while it holds no more than twice the boxes merged so far.
    Parts so grow geometrically from newest to oldest, a page keeps fewer than MAX_PARTS
    parts, and a small save rewrites small parts, not the page (a whole-page compaction
    made small searches into a large database slower: docs/model-notes.md). The
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


class Store:
    """One open database file for ``target`` (its ``db_key``, and the ranges stored boxes
    are checked against). ``actions(family)`` is the action text of a table family's
    context: what the family's results were found under (``morello.db``: the family and
    its ``morello.identity.family_fingerprint``); ValueError for a family it does not know.
    A table lives in its key's family context, a root in its Spec's family context.

    ``target`` None opens no context (the tools read every one, setting ``ctx``).
    ``readonly``: never write (also chosen when the file or its directory is not
    writable; ``writable`` says which).
    Every method raises DatabaseError, never sqlite3 or decoding errors. Not thread-safe:
    callers serialize (``morello.api`` does).
    """

    def __init__(self, path, target, actions, *, readonly: bool = False,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.path = Path(path)
        self.target = target
        self.cache_bytes = cache_bytes
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
        self.target_key = "" if target is None else target.db_key
        self.actions = actions
        self.ctx: int | None = None  # the tools' current context
        self._ctxs: dict[str, int] = {}  # family -> its context's id, once found
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
            self._ctxs.clear()  # contexts made in the transaction are gone with it
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise DatabaseError(f"{self.path} is corrupt or unwritable ({_reason(e)}); "
                                "delete it or pass another --db") from None
        except BaseException:
            self._ctxs.clear()
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as e:
            self._ctxs.clear()
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

    def _context(self, family: str, create: bool) -> int | None:
        """The id of ``family``'s context in this file (created if ``create``), or None
        (none yet, or a family this morello does not know)."""
        found = self._ctxs.get(family)
        if found is not None or self.actions is None:
            return found
        try:
            actions = self.actions(family)
        except ValueError:
            return None
        rows = self._q("SELECT id FROM contexts WHERE target = ? AND actions = ?",
                       (self.target_key, actions))
        if not rows and create:
            self.conn.execute("INSERT OR IGNORE INTO contexts(target, actions) VALUES "
                              "(?, ?)", (self.target_key, actions))
            rows = self.conn.execute("SELECT id FROM contexts WHERE target = ? AND "
                                     "actions = ?", (self.target_key, actions)).fetchall()
        if not rows:
            return None
        self._ctxs[family] = int(rows[0][0])
        return self._ctxs[family]

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
        ctx = self._context(key[0], create=False)
        if ctx is None:
            return None
        rows = self._q("SELECT id, ndim, nvalues, blocks FROM tables WHERE ctx = ? AND "
                       "key = ?", (ctx, _table_key_text(key)))
        if not rows:
            return None
        tid, ndim, nvalues, blocks_text = rows[0]
        blocks = self._blocks(blocks_text, key)
        if ndim != point_len(key) or nvalues != NVALUES:
            raise DatabaseError(f"{self.path} is corrupt (table {key[0]} has {ndim} "
                                f"coordinates and {nvalues} values)")
        return int(tid), blocks

    def _blocks(self, text, key) -> tuple[int, ...]:
        try:
            blocks = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            blocks = None
        if (not isinstance(blocks, list) or len(blocks) != point_len(key)
                or not all(isinstance(b, int) and not isinstance(b, bool)
                           and -63 <= b <= (1 << 40) for b in blocks)
                or any(b for b, s in zip(blocks, segments(key)) if s == "limit")):
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
        """Key -> table id of every table of this target in its family's context."""
        out = {}
        for tid, text, ctx in self._q(
                "SELECT t.id, t.key, t.ctx FROM tables t JOIN contexts c ON t.ctx = c.id "
                "WHERE c.target = ?", (self.target_key,)):
            try:
                key = _table_key(text)
            except ValueError as e:
                raise DatabaseError(f"{self.path} is corrupt ({e})") from None
            if self._context(key[0], create=False) == ctx:
                out[key] = int(tid)
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
        ndim, exact = _key_dims(key)
        try:
            payload, widths, n = pageblob.unpack(blob, ndim, NVALUES)
            frozen = FrozenPage(payload, widths, n, ndim, NVALUES, exact)
            frozen.check_bounds(*(bounds or page_bounds(key, blocks, page,
                                                        target or self.target)))
            return frozen
        except ValueError as e:
            raise DatabaseError(f"{self.path} is corrupt (a page of {key[0]}: {e}); "
                                "delete it or pass another --db") from None

    def _decode(self, blob, key, blocks, page, target=None):
        try:
            lo, hi, values = pageblob.decode(blob, point_len(key), NVALUES)
            validate_boxes(lo, hi, values, key, blocks, page, target or self.target)
        except ValueError as e:
            raise DatabaseError(f"{self.path} is corrupt (a page of {key[0]}: {e}); "
                                "delete it or pass another --db") from None
        return lo, hi, values

    def root(self, family: str, spec_text: str) -> tuple[list, int] | None:
        """The stored ``(trace, cost)`` of a Spec of table family ``family`` asked for
        before, or None."""
        ctx = self._context(family, create=False)
        if ctx is None:
            return None
        rows = self._q("SELECT trace, cost FROM roots WHERE ctx = ? AND spec = ?",
                       (ctx, spec_text))
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
        table i has key ``table_keys[i]``, or None for roots alone) and ``roots``
        ((family, Spec text) -> (trace, cost));
        return the pages written. ``persist(flush)``, if given, fills the cache inside the
        transaction (the search's ``Engine.persist``), calling ``flush()`` after each page,
        which writes and releases it. ``engine_ids`` (key -> table id) is updated with new tables.

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
            for (family, text), (trace, cost) in roots.items():
                ctx = self._context(family, create=True)
                if ctx is not None:
                    self.conn.execute("INSERT OR REPLACE INTO roots VALUES (?, ?, ?, ?)",
                                      (ctx, text, json.dumps(trace), cost))
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
        """The id of table ``key`` in its context (the tools' ``ctx``, else its family's),
        created (and added to ``created.tables``) if it has none."""
        ctx = self.ctx if self.target_key == "" else self._context(key[0], create=True)
        if ctx is None:
            raise DatabaseError(f"no context for table family {str(key[0])[:60]!r}")
        text = _table_key_text(key)
        row = self.conn.execute("SELECT id, blocks FROM tables WHERE ctx = ? AND key = ?",
                                (ctx, text)).fetchone()
        if row is not None:
            if self._blocks(row[1], key) != tuple(blocks):
                raise DatabaseError(f"{self.path} pages {key[0]} with another geometry")
            return int(row[0])
        cur = self.conn.execute("INSERT INTO tables(ctx, key, ndim, nvalues, blocks) VALUES "
                                "(?, ?, ?, ?, ?)", (ctx, text, point_len(key),
                                                    NVALUES, json.dumps(list(blocks))))
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
