"""The targets: one module of rows per instruction set, and the registry over them.

Each module (``avx2``, ``avx512``) holds its ``TARGET`` (what the search prices:
``morello.memory.Target``), its ``ISA`` (vector types, kernel table, host flags, C
partial, fence and prefetch spelling: ``morello.targets.isa.Isa``) and its built-in cost
constants as a calibration file beside it (``<name>.json``, with their provenance).
Adding a target is adding a module to ``_MODULES`` (docs/adding-a-target.md).
"""
from __future__ import annotations

from morello.memory import Target
from morello.targets import avx2, avx512
from morello.targets.isa import Isa
from morello.targets.vector import VecType

__all__ = ["Isa", "Target", "VecType", "all", "get", "host_lacks", "isa", "native_name"]

# Narrowest first: ``native_name`` takes the last one the host runs.
_MODULES = (avx2, avx512)

_TARGETS: dict[str, Target] = {m.TARGET.name: m.TARGET for m in _MODULES}
_ISAS: dict[str, Isa] = {m.ISA.name: m.ISA for m in _MODULES}


def all() -> dict[str, Target]:  # noqa: A001 - the registry's own name for its rows
    """The built-in targets by name, narrowest first."""
    return dict(_TARGETS)


def get(name: str) -> Target:
    """The built-in target ``name`` (``"native"``: ``native_name()``); SpecError if none."""
    from morello.errors import SpecError

    try:
        return _TARGETS[native_name() if name == "native" else name]
    except KeyError:
        raise SpecError(f"unknown target {name!r}; known: {', '.join(_TARGETS)}, native") \
            from None


def isa(name: str) -> Isa:
    """The instruction set ``name`` (a ``Target.isa``); KeyError if none."""
    try:
        return _ISAS[name]
    except KeyError:
        raise KeyError(f"no instruction set {name!r}") from None


def host_flags() -> list[str] | None:
    """The CPU flags /proc/cpuinfo lists, or None where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].split() for line in f
                         if line.startswith("flags")), None)
    except OSError:
        return None


def native_name() -> str:
    """The widest target this host runs (``--target native``): the last of the registry
    whose flags /proc/cpuinfo lists, else the first (also where the flags cannot be
    read)."""
    flags = host_flags()
    if flags is not None:
        for t in reversed(_TARGETS.values()):
            if host_lacks(t, flags) is None:
                return t.name
    return next(iter(_TARGETS))


def host_lacks(target: Target, flags: list[str] | None = None) -> str | None:
    """Why this host (or a CPU with these ``flags``) cannot run ``target``'s code (the
    CPU flags it lacks), or None; None too where /proc/cpuinfo cannot be read (the
    compiler or the CPU will say)."""
    if flags is None:
        flags = host_flags()
    if flags is None:
        return None
    missing = [x for x in isa(target.isa).host_flags if x not in flags]
    if not missing:
        return None
    return (f"this CPU cannot run {target.isa} code (no {', '.join(missing)} in "
            f"/proc/cpuinfo): emit it for another machine, or use --target {next(iter(_TARGETS))}")
