"""Cost constants: the numbers the affine cost model multiplies, per target.

One cost unit is a quarter of the time of one vector FMA at the core's peak throughput (so
``fma`` is 4 when measured). Every constant is a measured time divided by that unit and
rounded, so the model stays affine with integer coefficients. ``morello calibrate``
measures them on the host (``morello.calibrate``) and writes a calibration file; the
built-in AVX2 constants (``morello.memory``) came from such a run.

A calibration file is JSON::

    {"format": "morello-calibration", "version": 1, "target": "avx2",
     "constants": {...CostConstants fields...}, "measured_ns": {...}, "host": "..."}

Which constants a search uses is part of the identity of its results
(``Target.db_key`` is the target's name and the constants' fingerprint), so results
computed under other constants never mix in one database.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from morello.errors import MorelloError

FORMAT = "morello-calibration"
VERSION = 1


@dataclass(frozen=True, slots=True)
class CostConstants:
    """Integer costs, in units of a quarter of a vector FMA at peak throughput."""

    l1_line: int          # touch one 64-byte line in L1 (two vector loads)
    l2_line: int          # touch one line in L2
    gl_line: int          # touch one line of main memory, streamed (one stream)
    gl_line_parallel: int  # the same, read as one of target.prefetch_streams runs of a page
                           # side by side (above gl_line where that is slower)
    gl_line_streams: int  # the same, as one of target.prefetch_streams long runs (of MiBs)
                          # side by side, each continuing where it left off
    gl_run: int           # start a new contiguous run in main memory (prefetch lost)
    gl_ramp: int          # more for a run of a page or longer: the prefetchers ramp up again
    strided_factor: int   # L1 lines of a non-contiguous tensor cost this many times more
    fma: int              # one vector FMA inside a register tile (BroadcastVecMultAdd)
    broadcast: int        # the broadcast of a scalar of lhs, per BroadcastVecMultAdd
    vector_move: int      # one vector load or store between L1 and a register (calibrate:
                          # the time of a load and a store in a copy loop, see fit)
    scalar_op: int        # a scalar multiply-add, copy or store (operand traffic excluded)
    hsum: int             # a horizontal sum of one vector (end of DotProductLoop)
    parallel_setup: int   # start and join a parallel loop
    parallel_iter: int    # schedule one iteration of a parallel loop
    llc_run: int = 0      # start a run of main memory in a problem within the last-level
                          # cache (``Target.in_llc``): its lines come from L3, no ramp
    gl_prefetch: int = 0  # not a cost: lines ahead that a kernel reading long runs beyond
                          # the last-level cache prefetches into L2 (DotProductStripes,
                          # WidenAxpyLoop; 0: none, where the hardware does better alone)

    def fingerprint(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> CostConstants:
        names = [f.name for f in fields(CostConstants)]
        if "gl_line_parallel" not in d and isinstance(d.get("gl_line"), int):
            # Calibrations before the stream term: lines cost the same however many
            # runs are read at once (the model they were searched under).
            d = {**d, "gl_line_parallel": d["gl_line"]}
        if "gl_line_streams" not in d and isinstance(d.get("gl_line_parallel"), int):
            # Calibrations before long runs side by side: they cost as page-long ones.
            d = {**d, "gl_line_streams": d["gl_line_parallel"]}
        if "gl_prefetch" not in d:
            # Calibrations before software prefetch: the kernels read without it.
            d = {**d, "gl_prefetch": 0}
        if "llc_run" not in d and isinstance(d.get("gl_run"), int):
            # Calibrations before the last-level cache's own run start: as main memory's.
            d = {**d, "llc_run": d["gl_run"]}
        if "gl_ramp" not in d:
            # Calibrations before the ramp term: a long run starts as a short one does.
            d = {**d, "gl_ramp": 0}
        missing = [n for n in names if n not in d]
        if missing:
            raise MorelloError(f"calibration lacks constants: {', '.join(missing)}")
        vals = {}
        for n in names:
            v = d[n]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise MorelloError(f"calibration constant {n} must be an integer >= 0, "
                                   f"got {v!r}")
            vals[n] = v
        if vals["strided_factor"] < 1 or vals["fma"] < 1:
            raise MorelloError("calibration constants fma and strided_factor must be >= 1")
        return CostConstants(**vals)


def default_path(target_name: str) -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "morello" / f"calibration-{target_name}.json"


def load(path: Path, target_name: str) -> CostConstants:
    """The constants in a calibration file; MorelloError if it is not one for this target."""
    try:
        d = json.loads(Path(path).read_text())
    except OSError as e:
        raise MorelloError(f"cannot read calibration {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError):
        raise MorelloError(f"{path} is not a calibration file (not JSON)") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise MorelloError(f"{path} is not a morello calibration file")
    if d.get("version") != VERSION:
        raise MorelloError(f"{path} has calibration version {d.get('version')}, "
                           f"this morello reads version {VERSION}; run morello calibrate again")
    if d.get("target") != target_name:
        raise MorelloError(f"{path} calibrates target {d.get('target')!r}, not {target_name!r}")
    if not isinstance(d.get("constants"), dict):
        raise MorelloError(f"{path} has no constants")
    return CostConstants.from_json(d["constants"])


def save(path: Path, target_name: str, constants: CostConstants, measured_ns: dict,
         host: str, source: str = "morello calibrate") -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": FORMAT, "version": VERSION, "target": target_name,
           "constants": constants.to_json(), "measured_ns": measured_ns, "host": host,
           "source": source}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)
