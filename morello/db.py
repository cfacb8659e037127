"""The results database of this morello: the store (``morello.store``) opened in the
contexts the search's results depend on, and the migration of files written before
contexts per family.

The store sits below the search and knows neither the action table nor its fingerprints;
this module, above both, supplies them: a table family's context is the target's
``db_key`` and ``morello.identity.context_actions`` (the family and the fingerprint of
what its rewrites can reach). Callers (``morello.api``, the command line, the tests)
name the database here; the file format, its checks and the tools are the store's.
"""
from __future__ import annotations

import re
from pathlib import Path

from morello import identity
from morello.memory import Target
from morello.store import (
    DEFAULT_CACHE_BYTES,
    VERSION,
    check,
    check_writable,
    default_path,
    merge,
    resolve,
    shipped_path,
    stats,
)
from morello.store import Store as _FileStore
from morello.store.exchange import _context_id
from morello.store.tools import _target_named, _Walker
from morello.store.validate import _table_key

__all__ = ["VERSION", "Store", "check", "check_writable", "default_path", "merge",
           "migrate", "resolve", "shipped_path", "stats"]


class Store(_FileStore):
    """A ``morello.store.Store`` for ``target``, each family in its context under this
    morello's actions. A writable file's results from before contexts per family are
    moved to theirs on opening (``migrate``)."""

    def __init__(self, path, target, *, readonly: bool = False,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        super().__init__(path, target,
                         lambda family: identity.context_actions(target, family),
                         readonly=readonly, cache_bytes=cache_bytes)
        if self.writable and self._q(_LEGACY_SQL, (target.db_key,)):
            _migrate(self)


# Contexts of a file written before contexts per family: a bare fingerprint, no family.
_LEGACY_SQL = "SELECT id FROM contexts WHERE target = ? AND actions NOT LIKE '%@%'"


def migrate(path) -> dict:
    """Move every legacy context of database ``path`` (one fingerprint for all families,
    ``identity.legacy_fingerprint``) whose fingerprint today's code computes alike, so
    its results are valid today, into the family contexts: its tables by their key's
    family, its roots by their Spec's (a chain's root whose family its text leaves
    ambiguous is dropped: the tables still answer it). One transaction, no search; the
    counts moved. Legacy contexts of another action table, and the tables of families
    revised since (``identity.legacy_valid``), are left as they are."""
    w = _Walker(Path(path), readonly=False)
    try:
        return _migrate(w)
    finally:
        w.close()


def _migrate(db: _FileStore) -> dict:
    """``migrate`` on an open writable store (any of its targets' legacy contexts)."""
    moved = {"contexts": 0, "tables": 0, "roots": 0, "roots_dropped": 0}
    with db._write():
        for ctx, target_key, actions in db._q("SELECT id, target, actions FROM contexts"):
            target = _target_named(target_key)
            if "@" in actions or target is None:
                continue
            if identity.legacy_fingerprint(target) != actions:
                continue
            _migrate_context(db, ctx, target_key, target, moved)
    return moved


def _migrate_context(w: _FileStore, ctx: int, target_key: str, target: Target,
                     moved: dict) -> None:
    def family_ctx(family: str) -> int:
        return _context_id(w, target_key, identity.context_actions(target, family))

    families: set[str] = set()
    for tid, text in w._q("SELECT id, key FROM tables WHERE ctx = ?", (ctx,)):
        try:
            family = _table_key(text)[0]
            if not identity.legacy_valid(family):
                continue  # revised since: left behind, never read
            new = family_ctx(family)
        except ValueError:
            continue  # a family this morello does not know: left behind, never read
        families.add(family)
        w.conn.execute("UPDATE tables SET ctx = ? WHERE id = ?", (new, tid))
        moved["tables"] += 1
    titles = _chain_titles(families)
    for spec, in w._q("SELECT spec FROM roots WHERE ctx = ?", (ctx,)):
        family = _root_family(spec, titles) if isinstance(spec, str) else None
        if family is None or not identity.legacy_valid(family):
            moved["roots_dropped"] += 1
            continue
        w.conn.execute("UPDATE OR REPLACE roots SET ctx = ? WHERE ctx = ? AND spec = ?",
                       (family_ctx(family), ctx, spec))
        moved["roots"] += 1
    w.conn.execute("DELETE FROM roots WHERE ctx = ?", (ctx,))
    if not w._q("SELECT 1 FROM tables WHERE ctx = ? LIMIT 1", (ctx,)):
        w.conn.execute("DELETE FROM contexts WHERE id = ?", (ctx,))
    moved["contexts"] += 1


def _chain_titles(families) -> dict[str, list[str]]:
    """Chain title (as a Spec's text shows it) -> the chain families of that title."""
    from morello import compose

    out: dict[str, list[str]] = {}
    for f in families:
        if f.startswith(compose.FAMILY_PREFIX):
            try:
                out.setdefault(compose.parse_family(f).title, []).append(f)
            except ValueError:
                pass
    return out


def _root_family(text: str, chain_titles: dict[str, list[str]]) -> str | None:
    """The table family of a stored root's Spec text, or None if it cannot be told."""
    from morello.kinds import BY_TITLE

    if text.startswith("Compose("):
        end = text.find(")((")
        found = chain_titles.get(text[:end + 1]) if end > 0 else None
        return found[0] if found and len(found) == 1 else None
    m = re.match(r"[A-Za-z]+", text)
    kind = BY_TITLE.get(m.group(0)) if m else None
    return None if kind is None else kind.info.family

