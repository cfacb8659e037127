"""The maintenance tools over a whole results file, every context of it: ``stats``,
``check`` (verify every page and root) and ``merge`` (combine files).

Each context's target is found again from its key (``_target_named``), so the tools need
no search: they validate against the target's ranges as a search's reads do.
"""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from morello import pageblob, targets
from morello._memo import MemoTable
from morello.coords import merge_dims, point_len
from morello.errors import DatabaseError
from morello.store.file import Store, _exact_order, _reason
from morello.store.format import MAX_ROOT_TEXT, MAX_TRACE, NVALUES, VERSION, _page_bytes
from morello.store.validate import _check_path, _table_key, valid_trace


def _target_named(key_text: str):
    """The Target a context's key names (``avx2@...``, ``avx2-2t@...``,
    ``avx2-dram@...``, ``avx2-llc@...``), or None."""
    parts = key_text.split("@")[0].split("-") if isinstance(key_text, str) else [""]
    tgt = targets.all().get(parts[0])
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
        super().__init__(path, None, None, readonly=readonly)

    def contexts(self) -> list[tuple[int, str, str]]:
        return [(int(i), t, a) for i, t, a in
                self._q("SELECT id, target, actions FROM contexts ORDER BY id")]

    def tables_of(self, ctx: int) -> list[tuple[int, tuple, tuple[int, ...]]]:
        out = []
        for tid, text, ndim, nvalues, blocks_text in self._q(
                "SELECT id, key, ndim, nvalues, blocks FROM tables WHERE ctx = ? "
                "ORDER BY id", (ctx,)):
            try:
                key = _table_key(text)
            except ValueError as e:
                raise DatabaseError(f"{self.path} is corrupt ({e})") from None
            if ndim != point_len(key) or nvalues != NVALUES:
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
