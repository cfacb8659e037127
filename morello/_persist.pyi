"""Type stub of the persist pipeline (see _persist.pyx)."""
from collections.abc import Callable

from morello._dp import Solver

PERSIST_AHEAD: int

def persist(solver: Solver, flush: Callable[[], None] | None = ...,
            threaded: bool | None = ..., ahead: int = ...) -> int: ...
