"""Every kernel row's C on every target equals its golden file (``tests/golden_c.py``)."""
from __future__ import annotations

from golden_c import ROOT, generate


def test_every_kernel_row_emits_its_golden_c():
    files, missing = generate()
    assert not missing, f"kernel rows no searched Spec reaches: {missing}"
    stale = sorted(str(p.relative_to(ROOT)) for p, text in files.items()
                   if not p.exists() or p.read_text() != text)
    extra = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/*.c") if p not in files)
    assert not stale and not extra, (
        f"emitted C differs from tests/golden/c for {stale[:10]} (no longer emitted: "
        f"{extra[:10]}): run `python tests/golden_c.py --update` and review the diff")
