"""Type stub of the native expander (see _expand.pyx)."""
from collections.abc import Sequence
from typing import final

from morello._graph import SpecGraph
from morello.bridge import Bridge
from morello.search import CostParams

MOVE_FIELDS: tuple[str, ...]
KERNEL_FIELDS: tuple[str, ...]
ROW_FIELDS: tuple[str, ...]

@final
class Expander:
    def __init__(self, graph: SpecGraph, bridge: Bridge, native: bool, costs: CostParams,
                 tile_sizes: Sequence[tuple[int, bool]]) -> None: ...
