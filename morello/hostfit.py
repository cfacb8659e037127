"""Cost constants fitted to this host on first use, without the user asking.

The built-in constants are one host's; programs ranked by them on another host can run
much slower than programs ranked by that host's own (``morello calibrate``). So the first
search for a target on a host that has no calibration for it measures one calibration run
(a few seconds: the in-core measurements three times, main memory once; one progress
line on stderr), fits the constants and keeps them under the
config dir, one file per target and CPU model (``auto_path``), reused from then on.

The constants are part of a database's context, so two first uses on hosts of one CPU
model should give the same constants. Where ``host_constants.json`` ships a set for this
CPU model and target (a full ``morello calibrate`` of such a host, with its provenance),
each measured constant within ``BAND`` of the shipped one takes the shipped value: the
measurement only confirms the set, or corrects the constants that differ (another memory
configuration, say). Elsewhere each is snapped to a geometric grid of ``GRID`` steps an
octave. ``gl_ramp``, a difference of two long reads that one run cannot pin down, comes
from the shipped set, else the built-in one (a full ``morello calibrate`` measures it).
``MORELLO_CALIBRATION=builtin`` or ``--calibration builtin`` opts out.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

from morello.costs import CostConstants

# Grid steps per octave the fitted constants snap to (2^(1/4): 19 % apart).
GRID = 4

# Constants left as fitted: small integers (already coarse) and choices, not costs.
EXACT_BELOW = 16
UNSNAPPED = ("fma", "strided_factor", "gl_prefetch")

# Constants one run cannot measure reproducibly: kept from the built-in set.
FROM_BUILTIN = ("gl_ramp",)

# A measured constant within this ratio of a shipped set's takes the shipped value: one
# first-use run on a shared host strays up to about 2x from a 5-run calibration of its
# model (``hostfit.BAND`` in docs/model-notes.md).
BAND = 2.0

SOURCE = "first-use"
SETS = Path(__file__).resolve().parent / "host_constants.json"
SETS_FORMAT = "morello-host-constants"


def host_key() -> str:
    """The CPU model this host is (``vendor-family-model``, from /proc/cpuinfo), the
    unit a first-use calibration is kept for."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k in ("vendor_id", "cpu family", "model") and k not in info:
                    info[k] = v.strip()
                if not line.strip() and info:
                    break
    except OSError:
        pass
    parts = [info.get("vendor_id"), info.get("cpu family"), info.get("model")]
    if not all(parts):
        import platform

        return "".join(c if c.isalnum() else "-" for c in platform.machine() or "unknown")
    return "-".join("".join(c for c in str(p) if c.isalnum()) for p in parts)


def auto_path(target_name: str) -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "morello" / "host" / f"calibration-{target_name}-{host_key()}.json"


def snap_value(v: int) -> int:
    """``v`` on the geometric grid (integers below ``EXACT_BELOW`` as they are)."""
    if v < EXACT_BELOW:
        return v
    return round(2 ** (round(GRID * math.log2(v)) / GRID))


def shipped_set(target_name: str, key: str | None = None) -> CostConstants | None:
    """The shipped constants of this CPU model (``host_key``) and target, if any."""
    key = host_key() if key is None else key
    try:
        doc = json.loads(SETS.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != SETS_FORMAT or doc.get("version") != 1:
        return None
    for row in doc.get("sets", ()):
        if row.get("cpu") == key and row.get("target") == target_name:
            return CostConstants.from_json(dict(row["constants"]))
    return None


def _near(name: str, measured: int, shipped: int) -> bool:
    if measured == shipped:
        return True
    if name == "gl_prefetch":  # a choice among distances that read alike: prefetch or not
        return True
    if min(measured, shipped) <= 0:
        return False
    return max(measured, shipped) / min(measured, shipped) <= BAND


def snap(fitted: CostConstants, builtin: CostConstants,
         shipped: CostConstants | None = None) -> CostConstants:
    """``fitted`` made reproducible: each constant the ``shipped`` one where within
    ``BAND`` of it, else on the grid; ``FROM_BUILTIN`` from ``shipped`` or ``builtin``."""
    vals = {}
    for f in fields(CostConstants):
        v = getattr(fitted, f.name)
        if f.name in FROM_BUILTIN:
            v = getattr(shipped or builtin, f.name)
        elif shipped is not None and _near(f.name, v, getattr(shipped, f.name)):
            v = getattr(shipped, f.name)
        elif f.name not in UNSNAPPED:
            v = snap_value(v)
        vals[f.name] = v
    # The fit's own floors (a main-memory line above an L1 line) survive the snap.
    vals["l2_line"] = max(vals["l2_line"], vals["l1_line"])
    for k in ("gl_line", "gl_line_parallel", "gl_line_streams"):
        vals[k] = max(vals[k], vals["l1_line"] + 1)
    return replace(fitted, **vals)


def cannot_fit(target) -> str | None:
    """Why this host cannot measure ``target`` (no C compiler, or a CPU that lacks its
    ISA), or None."""
    from morello.codegen.build import find_compiler
    from morello.errors import BuildError
    from morello.targets import host_lacks

    if host_lacks(target) is not None:
        return f"this CPU does not run {target.isa}"
    try:
        find_compiler()
    except BuildError:
        return "no C compiler"
    return None


def ensure(target, say=None) -> Path | None:
    """The first-use calibration file of ``target`` on this host, measured now if there
    is none (under a lock: concurrent first uses measure once); None where this host
    cannot measure it (then the built-in constants stand)."""
    from morello import costs

    path = auto_path(target.name)
    if path.exists():
        return path
    if cannot_fit(target) is not None:
        return None
    say = say or (lambda m: print(m, file=sys.stderr, flush=True))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_name(path.name + ".lock"), "w")  # noqa: SIM115 - held below
    except OSError:
        return None
    import fcntl

    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():  # another process measured it while this one waited
            return path
        from morello import calibrate

        say(f"morello: first use of {target.name} on this host: fitting the cost constants "
            f"to it (a few seconds, once; MORELLO_CALIBRATION=builtin "
            f"skips)")
        t0 = time.perf_counter()
        try:
            result = calibrate.run_first_use(target)
        except Exception as e:  # noqa: BLE001 - a failed measurement leaves the built-ins
            say(f"morello: could not calibrate ({e}); using the built-in constants")
            return None
        constants = snap(result.constants, target.costs, shipped_set(target.name))
        costs.save(path, target.name, constants, result.measured_ns, result.host,
                   source=SOURCE)
        say(f"morello: fitted in {time.perf_counter() - t0:.1f} s, kept in {path}")
    return path
