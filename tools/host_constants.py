"""Add this host's constants to the shipped sets (``morello/host_constants.json``).

    python tools/host_constants.py --target avx2 [--runs 5]

Measures a full calibration (the median of ``--runs`` runs, as ``morello calibrate``) and
writes it as the set of this CPU model (``morello.hostfit.host_key``) and target,
replacing an older one, with its provenance (host, date, command). First uses on hosts of
this model then take these constants wherever their own measurement confirms them.
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys

from morello import calibrate, hostfit
from morello.memory import target_named


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="avx2")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    target = target_named(args.target)
    result = calibrate.run(target, progress=lambda m: print(m, file=sys.stderr),
                           runs=args.runs)
    try:
        doc = json.loads(hostfit.SETS.read_text())
    except FileNotFoundError:
        doc = {"format": hostfit.SETS_FORMAT, "version": 1, "sets": []}
    key = hostfit.host_key()
    row = {"cpu": key, "target": target.name, "constants": result.constants.to_json(),
           "provenance": {"host": result.host, "date": datetime.date.today().isoformat(),
                          "command": f"python tools/host_constants.py --target "
                                     f"{target.name} --runs {args.runs}"}}
    doc["sets"] = sorted([r for r in doc["sets"]
                          if (r["cpu"], r["target"]) != (key, target.name)] + [row],
                         key=lambda r: (r["cpu"], r["target"]))
    hostfit.SETS.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote the {target.name} set of {key} to {hostfit.SETS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
