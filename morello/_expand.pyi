"""Type stub of the native expander (see _expand.pyx)."""
from collections.abc import Callable, Sequence
from typing import Any, final

from morello._graph import SpecGraph

@final
class Expander:
    def __init__(self, graph: SpecGraph, native: Any,
                 compile_cb: Callable[[int], list[int]], processors: int, par_setup: int,
                 par_iter: int, tile_sizes: Sequence[tuple[int, bool]], gl_run: int,
                 streams: int, gl_ramp: int = ..., ramp_bytes: int = ...,
                 sweep_save: int = ..., line_bytes: int = ...,
                 sweep_bytes: int = ..., sweep_dtypes: int = ...) -> None: ...
