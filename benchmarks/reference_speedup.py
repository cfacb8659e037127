"""Speedup of the Cython engine over the pure-Python memoized DP, on one shape.

    python benchmarks/reference_speedup.py N      # an N×N×N f32 matmul
"""
import sys
import time

import morello
from morello.memory import AVX2
from morello.reference_dp import memoized_optimum
from morello.search import Engine

n = int(sys.argv[1])
spec = morello.matmul(n, n, n)
t = time.perf_counter()
sol, _ = Engine(AVX2).solve(spec)
cy = time.perf_counter() - t
t = time.perf_counter()
ref = memoized_optimum(spec, AVX2)
py = time.perf_counter() - t
print(f"{n}^3: pure-Python DP {py:.1f} s, Cython engine {cy:.3f} s, "
      f"speedup {py / cy:.0f}x, same cost: {ref[0] == sol.cost.main}")
