"""Benchmarks are run explicitly: ``pytest benchmarks --benchmark-only``."""
