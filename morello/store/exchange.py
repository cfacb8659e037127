"""Results handed between processes that share no file: what a worker added to its copy
of a database (``export_since``), and folding such files into the driver's database, many
in one transaction (``absorb``).

A worker starts from a snapshot whose ``seq`` it notes; every part its saves append has a
larger version, so the parts above that ``seq`` and the roots it added are exactly its
new results. ``absorb`` folds each page's parts (the file's and every input's) into one
part, so a page touched by many stages stays one row, and records the caller's ``meta``
(a precompute's finished stage) in the same transaction: the stage is in the file
entirely or not at all.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from morello import pageblob
from morello._memo import MemoTable
from morello.coords import merge_dims, point_len
from morello.errors import DatabaseError
from morello.store.file import Store, _exact_order
from morello.store.format import MAX_ROOT_TEXT, MAX_TRACE, _page_bytes
from morello.store.tools import _context_target, _Walker


def snapshot(path, out) -> int:
    """Copy database ``path`` (its write-ahead log included) to a new file ``out``
    consistently, with SQLite's backup; return the copy's ``seq``."""
    src = _Walker(path)
    try:
        seq = src._seq()
        dst = sqlite3.connect(str(out))
        try:
            src.conn.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
        finally:
            dst.close()
    except sqlite3.Error as e:
        raise DatabaseError(f"cannot copy database {path}: {e}") from None
    finally:
        src.close()
    return seq


def snapshot_seq(path) -> int:
    """The ``seq`` of database ``path``: its parts written later have larger versions."""
    db = _Walker(path)
    try:
        return db._seq()
    finally:
        db.close()


def root_names(path) -> set[tuple[str, str, str]]:
    """``(target, actions, spec)`` of every root stored in ``path``."""
    src = _Walker(path)
    try:
        return {(t, a, spec) for ctx, t, a in src.contexts()
                for spec, _, _ in src.roots_of(ctx)}
    finally:
        src.close()


def export_since(path, seq: int, out, known_roots: set | frozenset = frozenset()) -> dict:
    """Write to the new file ``out`` the parts of ``path`` newer than ``seq`` and its roots
    not in ``known_roots`` (``root_names`` of the snapshot); the counts written."""
    src = _Walker(path)
    dst = _Walker(out, readonly=False)
    totals = {"parts": 0, "roots": 0}
    try:
        with dst._write():
            for ctx, target_key, actions in src.contexts():
                dst.ctx = None
                for tid, key, blocks in src.tables_of(ctx):
                    rows = src._q("SELECT page, version, nboxes, data FROM pages WHERE "
                                  "tbl = ? AND version > ?", (tid, seq))
                    if not rows:
                        continue
                    dst.ctx = _context_id(dst, target_key, actions)
                    otid = dst._table_id(key, blocks)
                    dst.conn.executemany("INSERT INTO pages VALUES (?, ?, ?, ?, ?)",
                                         [(otid, *r) for r in rows])
                    totals["parts"] += len(rows)
                roots = [r for r in src.roots_of(ctx)
                         if (target_key, actions, r[0]) not in known_roots]
                if roots:
                    octx = _context_id(dst, target_key, actions)
                    dst.conn.executemany("INSERT INTO roots VALUES (?, ?, ?, ?)",
                                         [(octx, *r) for r in roots])
                    totals["roots"] += len(roots)
        dst.conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        src.close()
        dst.close()
    return totals


def _context_id(db: Store, target_key: str, actions: str) -> int:
    db.conn.execute("INSERT OR IGNORE INTO contexts(target, actions) VALUES (?, ?)",
                    (target_key, actions))
    return int(db.conn.execute("SELECT id FROM contexts WHERE target = ? AND actions = ?",
                               (target_key, actions)).fetchone()[0])


def absorb(output, inputs: list, meta: dict[str, str] | None = None) -> dict:
    """Fold the databases ``inputs`` into ``output`` (created if absent) in one
    transaction, with ``meta`` (name -> text) written in it too. Every input is validated
    as it is read; each page they touch becomes one part holding all its boxes."""
    output = Path(output)
    out = _Walker(output, readonly=False)
    totals = {"pages": 0, "roots": 0}
    try:
        with out._write():
            seq = out._seq() + 1
            # (ctx, table key) -> (table id, blocks, target, {page: [(lo, hi, values)]})
            fresh: dict[tuple, list] = {}
            for p in inputs:
                src = _Walker(p)
                try:
                    for ctx, target_key, actions in src.contexts():
                        tgt = _context_target(p, target_key)
                        octx = _context_id(out, target_key, actions)
                        out.ctx = octx
                        for tid, key, blocks in src.tables_of(ctx):
                            slot = fresh.setdefault((octx, key), [
                                out._table_id(key, blocks), blocks, tgt, {}])
                            if slot[1] != blocks:
                                raise DatabaseError(f"{p} pages {key[0]} with another "
                                                    "geometry")
                            for page, blob in src.pages_of(tid, point_len(key)):
                                slot[3].setdefault(page, []).append(
                                    src._decode(blob, key, blocks, page, tgt))
                        for spec, trace, cost in src.roots_of(ctx):
                            if (isinstance(spec, str) and isinstance(trace, str)
                                    and isinstance(cost, int) and len(spec) < MAX_ROOT_TEXT
                                    and len(trace) < MAX_TRACE):
                                out.conn.execute("INSERT OR REPLACE INTO roots VALUES "
                                                 "(?, ?, ?, ?)", (octx, spec, trace, cost))
                                totals["roots"] += 1
                finally:
                    src.close()
            for (_, key), (otid, blocks, tgt, pages) in fresh.items():
                mask = 0
                for d in merge_dims(key):
                    mask |= 1 << d
                for page, parts in pages.items():
                    pb = _page_bytes(page)
                    old = out.conn.execute("SELECT data FROM pages WHERE tbl = ? AND "
                                           "page = ?", (otid, pb)).fetchall()
                    parts = [out._decode(d, key, blocks, page, tgt) for (d,) in old] + parts
                    try:
                        t = MemoTable.from_arrays(*parts[0])
                        t.merge_dims = mask
                        for lo, hi, values in parts[1:]:
                            for a, b, v in zip(lo, hi, values):
                                t.put(a, b, v)
                        arrays = t.to_arrays()
                    except ValueError as e:
                        raise DatabaseError(f"a page of {key[0]} is corrupt ({e})") from None
                    out.conn.execute("DELETE FROM pages WHERE tbl = ? AND page = ?",
                                     (otid, pb))
                    out.conn.execute("INSERT INTO pages VALUES (?, ?, ?, ?, ?)",
                                     (otid, pb, seq, len(arrays[0]),
                                      pageblob.encode(*_exact_order(arrays, key))))
                    totals["pages"] += 1
            out.conn.execute("UPDATE meta SET value = ? WHERE name = 'seq'", (str(seq),))
            for name, value in (meta or {}).items():
                out.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                 (name, value))
    finally:
        out.close()
    return totals


def read_meta(path, name: str):
    """The JSON value of meta ``name`` in ``path`` (None if absent, or no file)."""
    if not Path(path).exists():
        return None
    db = _Walker(path)
    try:
        text = db.meta(name)
    finally:
        db.close()
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return None
