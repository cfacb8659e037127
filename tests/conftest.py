"""Shared test configuration: hypothesis profiles and the ``isa`` marker.

Profiles: ``dev`` (the default; few examples, for a quick local loop) and ``ci``
(selected when the ``CI`` environment variable is set; more examples, derandomized so a
CI failure reproduces). Choose one by hand with ``HYPOTHESIS_PROFILE=ci``. Both disable
the deadline: search times vary with what the shared engines have already memoized.

``@pytest.mark.isa("avx2")`` skips a test unless ``/proc/cpuinfo`` lists every named
CPU flag (so execution tests skip, rather than crash, on other hosts).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from morello.memory import HOST_FLAGS

settings.register_profile(
    "dev",
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)

# Tests use the built-in cost constants, whatever `morello calibrate` wrote on this host
# (subprocesses inherit this).
os.environ["MORELLO_CALIBRATION"] = "builtin"
# ... and no shipped database under theirs: a test's fresh database solves what it asks
# (tests/test_shipped.py layers the shipped one explicitly).
os.environ["MORELLO_SHIPPED_DB"] = "off"

# The flags each ISA needs; an unlisted name is looked up as a flag itself.
_ISA_FLAGS = HOST_FLAGS  # what each target's code needs (one table, morello.memory)


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The host CPU's feature flags (empty where /proc/cpuinfo is unavailable)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    flags: set[str] = set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            flags.update(value.split())
    return frozenset(flags)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers(name="isa"):
        for isa in marker.args:
            missing = [f for f in _ISA_FLAGS.get(isa, (isa,)) if f not in cpu_flags()]
            if missing:
                pytest.skip(f"host CPU lacks {isa} ({', '.join(missing)} not in "
                            "/proc/cpuinfo)")


def pytest_terminal_summary(terminalreporter) -> None:
    """Print how many inputs each hardening probe tried (``probes.TRIES``): the figures
    of the hardening table. A probe that failed has a failed test above."""
    import sys

    probes = sys.modules.get("probes")
    if probes is None or not probes.TRIES:
        return
    terminalreporter.section("hardening probes: inputs tried")
    for name, n in sorted(probes.TRIES.items()):
        terminalreporter.write_line(f"{name:40} {n:8d}")
