"""Benchmarks are run explicitly: ``pytest benchmarks --benchmark-only``."""


def pytest_configure(config):
    # pyproject's addopts ask xdist for --dist loadfile (the tests' grouping), which
    # pytest-benchmark reads as a parallel run and refuses to time: without -n, no dist.
    if not getattr(config.option, "numprocesses", None):
        config.option.dist = "no"
