"""The results store: solved Specs in pages of a SQLite file, read lazily, shared safely.

One file holds the results of any number of *contexts*: a context is a target with its
cost constants and thread count (``Target.db_key``) and the action text of one table
family (``morello.identity.context_actions``: the family and the fingerprint of the kinds,
kernels and rules its rewrites can reach), so results computed under other constants,
threads or kernels never mix, a change a family cannot reach leaves its results valid,
and one file can serve them all. Tables::

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

Layering: the store sits below the search. It is given each family's action text
(``Store(path, target, actions)``, ``actions(family)``) and the search's pipeline that
fills its page cache (``Store.save(..., persist=)``); it imports neither. ``morello.db``
binds it to them.

Modules, by role: ``format`` (the schema, version, value layout and encodings of keys and
pages), ``validate`` (checks of a foreign file's paths, keys, boxes and traces), ``file``
(``Store``: one open file, its reads and its transactional saves), ``tools`` (``stats``,
``check``, ``merge`` over every context of a file).
"""
from morello.store.file import Store, check_writable
from morello.store.format import (
    DEFAULT_CACHE_BYTES,
    FORMAT,
    MAX_PARTS,
    NVALUES,
    VERSION,
    default_path,
    resolve,
    shipped_path,
)
from morello.store.tools import check, merge, stats
from morello.store.validate import coordinate_bounds, page_bounds, valid_trace, validate_boxes

__all__ = [
    "DEFAULT_CACHE_BYTES", "FORMAT", "MAX_PARTS", "NVALUES", "VERSION", "Store", "check",
    "check_writable", "coordinate_bounds", "default_path", "merge", "page_bounds", "resolve",
    "shipped_path", "stats", "valid_trace", "validate_boxes",
]
