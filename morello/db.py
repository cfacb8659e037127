"""The results database of this morello: the store (``morello.store``) opened in the
context the search's results depend on.

The store sits below the search and knows neither the action table nor its fingerprint;
this module, above both, supplies them: a context is the target's ``db_key`` and
``morello.identity.actions_fingerprint``. Callers (``morello.api``, the command line, the
tests) name the database here; the file format, its checks and the tools are the store's.
"""
from __future__ import annotations

from morello.identity import actions_fingerprint
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

__all__ = ["VERSION", "Store", "check", "check_writable", "default_path", "merge", "resolve",
           "shipped_path", "stats"]


class Store(_FileStore):
    """A ``morello.store.Store`` in ``target``'s context under this morello's actions."""

    def __init__(self, path, target, *, readonly: bool = False,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        super().__init__(path, target, actions_fingerprint(target), readonly=readonly,
                         cache_bytes=cache_bytes)
