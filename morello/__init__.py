"""morello: synthesize the cheapest AVX2 C program for a small tensor Spec.

Embedding API::

    import morello, numpy as np
    spec = morello.matmul(64, 64, 64, dtype="f32")
    prog = morello.synthesize(spec, target="avx2")
    prog.cost, prog.impl, prog.c_source
    fn = prog.compile()
    out = fn(a, b)

    # Other primitives: elementwise maps, fills, broadcasts, reductions along a dim.
    prog = morello.synthesize(morello.reduce_max(512, 1024, dim=1))
    prog = morello.synthesize(morello.softmax(128, 1024))   # along the last dim

    # Some actions by hand, the rest searched (see morello.schedule):
    prog = morello.schedule(spec, [morello.TileOut(dim=1, size=16)])
"""
import importlib.util as _importlib_util

if _importlib_util.find_spec("morello._graph") is None:  # a source tree, not built
    raise ImportError(
        f"morello's compiled core is not built in {__path__[0]}: this is a source tree "
        "(a clone's root is first on sys.path). Run from another directory to use the "
        "installed morello, or build it here with `pip install -e .`")

from morello.api import DatabaseWarning, Program, synthesize  # noqa: E402 (after the check above)
from morello.constructors import (  # noqa: E402
    add,
    add_bias,
    attention,
    broadcast,
    chain,
    channel_bias,
    channels_last,
    conv2d,
    conv_block,
    fill,
    matmul,
    mul,
    reduce_max,
    reduce_sum,
    relu,
    softmax,
    transpose,
)
from morello.errors import BuildError, DatabaseError, MorelloError, RewriteError, SpecError
from morello.memory import Level
from morello.rewrites import (
    Bufferize,
    ConvLower,
    DepthwiseLower,
    Move,
    Select,
    Split,
    TileOut,
    ToAccum,
)
from morello.schedule import schedule

__all__ = [
    "BuildError",
    "DatabaseError",
    "DatabaseWarning",
    "Level",
    "MorelloError",
    "Move",
    "Program",
    "RewriteError",
    "Select",
    "SpecError",
    "Split",
    "TileOut",
    "ToAccum",
    "Bufferize",
    "ConvLower",
    "DepthwiseLower",
    "add",
    "add_bias",
    "channel_bias",
    "channels_last",
    "conv_block",
    "attention",
    "broadcast",
    "chain",
    "conv2d",
    "fill",
    "matmul",
    "mul",
    "reduce_max",
    "reduce_sum",
    "relu",
    "schedule",
    "softmax",
    "synthesize",
    "transpose",
]
__version__ = "0.1.0"
