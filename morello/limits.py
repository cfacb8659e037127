"""Input limits: what morello refuses up front, before any search or allocation.

- ``MAX_POINTS`` bounds a Spec's iteration space (the product of its sizes, e.g.
  ``batch*m*k*n`` for a matmul), and so every size and every operand's volume. The
  cheapest program of a Spec costs a few units per point, and costs saturate at
  ``morello.cost.MAX_COST`` = 2^62: 2^50 points leave a factor of 4096 of headroom, so
  the optimum of an accepted Spec is never a saturated (meaningless) cost. Index
  arithmetic in the emitted C is 64-bit (``long``), far from overflow at these volumes.
- ``MAX_THREADS`` bounds ``--threads`` / ``threads=``: more than any host of this target
  has; emitting for a host larger than this one is allowed.
- ``MAX_REPEATS`` bounds timed repeats and iterations.
- A program whose operands and buffers do not fit in this machine's available memory
  may be synthesized and emitted (the C is valid), with a note; running or timing it is
  refused before anything is allocated (``check_runnable``).

Numbers on the command line are ASCII decimal integers (``parse_int``): no Unicode
digits, no ``_`` separators, no spaces. Python's ``int()`` accepts all of those, which
would make ``morello synth add ٣ 4`` mean 3×4.
"""
from __future__ import annotations

import math
import os
import re

from morello.errors import SpecError

MAX_POINTS = 1 << 50
MAX_THREADS = 256
MAX_REPEATS = 1_000_000

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(inf|infinity|nan|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)",
                    re.IGNORECASE)


def parse_int(text: str) -> int:
    """An ASCII decimal integer (optional sign); ValueError otherwise."""
    if not _INT.fullmatch(text):
        raise ValueError(f"not an ASCII decimal integer: {text[:40]!r}")
    return int(text)


def parse_float(text: str) -> float:
    """An ASCII decimal number, ``inf`` or ``nan`` (optional sign); ValueError otherwise."""
    if not _FLOAT.fullmatch(text):
        raise ValueError(f"not an ASCII decimal number: {text[:40]!r}")
    return float(text)


def check_size(name: str, v: int) -> int:
    """One size of a Spec: an integer in [1, MAX_POINTS]."""
    if v < 1:
        raise SpecError(f"{name} must be >= 1, got {v}")
    if v > MAX_POINTS:
        raise SpecError(f"{name} = {v} is larger than morello's limit of 2^50 "
                        f"({MAX_POINTS})")
    return int(v)


def check_points(title: str, shape: tuple[int, ...]) -> None:
    """Refuse a Spec whose iteration space exceeds MAX_POINTS (see the module doc)."""
    points = math.prod(shape)
    if points > MAX_POINTS:
        sizes = "×".join(map(str, shape))
        raise SpecError(f"{title} {sizes} has {points:.3g} points, more than morello's "
                        f"limit of 2^50 ({MAX_POINTS:.3g}): its costs would overflow the "
                        "cost model")


def check_threads(threads) -> int:
    if isinstance(threads, bool) or not isinstance(threads, int) \
            or not 1 <= threads <= MAX_THREADS:
        raise SpecError(f"threads must be an integer from 1 to {MAX_THREADS}, "
                        f"got {threads!r}")
    return threads


def check_repeats(name: str, n) -> int:
    import numpy as np

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) \
            or not 1 <= n <= MAX_REPEATS:
        raise SpecError(f"{name} must be an integer from 1 to {MAX_REPEATS}, got {n!r}")
    return int(n)


def available_memory() -> int | None:
    """Bytes this process could allocate now (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB"


def too_large_to_run(nbytes: int) -> str | None:
    """Why a program that needs ``nbytes`` cannot run here, or None if it can."""
    avail = available_memory()
    if avail is not None and nbytes > avail:
        return (f"needs {gib(nbytes)} of memory, more than the {gib(avail)} available on "
                "this machine")
    return None


def check_runnable(nbytes: int, what: str) -> None:
    reason = too_large_to_run(nbytes)
    if reason:
        raise SpecError(f"{what} {reason}: it can be synthesized and emitted, not run here")
