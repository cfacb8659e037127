"""Type stub of the native expander (see _expand.pyx)."""
from collections.abc import Callable, Sequence
from typing import Any, final

from morello._graph import SpecGraph
from morello.search import CostParams

@final
class Expander:
    def __init__(self, graph: SpecGraph, native: Any,
                 compile_cb: Callable[[int], list[int]], costs: CostParams,
                 tile_sizes: Sequence[tuple[int, bool]]) -> None: ...
