"""morello: synthesize the cheapest AVX2 C program for a small tensor Spec.

Embedding API::

    import morello, numpy as np
    spec = morello.matmul(64, 64, 64, dtype="f32")
    prog = morello.synthesize(spec, target="avx2")
    prog.cost, prog.impl, prog.c_source
    fn = prog.compile()
    out = fn(a, b)
"""
from morello.api import Program, matmul, synthesize  # noqa: E402
from morello.errors import BuildError, MorelloError, RewriteError, SpecError

__all__ = [
    "BuildError",
    "MorelloError",
    "Program",
    "RewriteError",
    "SpecError",
    "matmul",
    "synthesize",
]
__version__ = "0.1.0"
