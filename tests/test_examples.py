"""The walkthroughs in examples/ run as they are."""
from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path):
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                       timeout=600, cwd=tempfile.gettempdir())
    assert p.returncode == 0, p.stderr
    assert "matches numpy" in p.stdout
