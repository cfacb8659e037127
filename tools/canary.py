"""Check or regenerate the model's canary (``morello.canary``).

    python tools/canary.py            # compare this morello's programs with the golden file
    python tools/canary.py --update   # after bumping a family's revision or MODEL_VERSION

``--update`` refuses to record a new program under a context that the golden file
already has with another program: a changed decision needs a new context (a bump of the
deciding family's ``REVISIONS`` entry in ``morello/identity.py``, or of ``MODEL_VERSION``),
or databases would answer with the old programs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from morello import canary, targets

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / "canary.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update", action="store_true", help="write tests/golden/canary.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    got = {t: canary.record(t, lambda m: print(m, file=sys.stderr)) for t in targets.all()}
    print(f"{sum(map(len, got.values()))} programs on {len(got)} targets in "
          f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    doc = canary.load_golden(GOLDEN) if GOLDEN.exists() else {"format": canary.FORMAT}
    problems = canary.check(doc, got)
    if not problems:
        print("the canary matches")
        return 0
    if not args.update:
        print("\n".join(problems[:40]))
        return 1
    refused = canary.refusals(doc, got)
    if refused:
        print("\n".join(refused[:40]))
        print("refused: bump the revision of the families that decide these "
              "(morello.identity.REVISIONS) or MODEL_VERSION first", file=sys.stderr)
        return 2
    GOLDEN.write_text(json.dumps(canary.updated(doc, got), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}: {len(problems)} records new or changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
