"""Check or regenerate the model's canary (``morello.canary``).

    python tools/canary.py            # compare this morello's programs with the golden file
    python tools/canary.py --update   # after bumping morello.identity.MODEL_VERSION

``--update`` refuses to record new programs under a model version that the golden file
already has with other programs: a changed decision needs a new version (or databases
would answer with the old ones).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from morello import canary, targets
from morello.identity import MODEL_VERSION

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / "canary.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update", action="store_true", help="write tests/golden/canary.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    got = {t: canary.record(t, lambda m: print(m, file=sys.stderr)) for t in targets.all()}
    dig = canary.digest(got)
    print(f"{sum(map(len, got.values()))} programs on {len(got)} targets in "
          f"{time.perf_counter() - t0:.0f} s; digest {dig}", file=sys.stderr)
    doc = canary.load_golden(GOLDEN) if GOLDEN.exists() else {
        "format": canary.FORMAT, "digests": {}}
    known = doc["digests"].get(str(MODEL_VERSION))
    if known == dig:
        print(f"model version {MODEL_VERSION}: the canary matches")
        return 0
    if not args.update:
        for line in canary.differences(doc.get("records", {}), got)[:40]:
            print(line)
        print(f"the canary differs from model version {MODEL_VERSION}'s")
        return 1
    if known is not None:
        for line in canary.differences(doc.get("records", {}), got)[:40]:
            print(line)
        print(f"refused: model version {MODEL_VERSION} already stands for other programs; "
              "bump MODEL_VERSION in morello/identity.py first", file=sys.stderr)
        return 2
    doc["digests"][str(MODEL_VERSION)] = dig
    doc.update(model_version=MODEL_VERSION, records=got)
    GOLDEN.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} for model version {MODEL_VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
