"""Embedding morello in a numpy program: synthesize once, call the kernel like a function.

    python examples/embed.py
"""
import numpy as np

import morello

# A batched matmul of awkward sizes: tiles that do not divide get boundary loops.
spec = morello.matmul(7, 13, 97, batch=3)
prog = morello.synthesize(spec, db=False)  # db=False: keep results in memory only

print(f"cost under the model: {prog.cost}")
print("the chosen program (first lines):")
print("\n".join(prog.impl.pformat().splitlines()[:6]))

fn = prog.compile()  # builds a shared library with the host C compiler
rng = np.random.default_rng(0)
a = rng.standard_normal((3, 7, 13), dtype=np.float32)
b = rng.standard_normal((3, 13, 97), dtype=np.float32)
out = np.empty((3, 7, 97), np.float32)
fn(a, b, out=out)  # writes into out; fn(a, b) would allocate it
np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
print(f"matches numpy; {fn.time(a, b, iters=1000) * 1e6:.2f} µs per call (timed in C)")

# Take some decisions by hand and let the search fill in the rest: here, stream the matrix
# of a vector-matrix product eight rows at a time. The model prices it like any program
# (never below the search's optimum), so hand and searched schedules compare directly.
vec = morello.matmul(1, 256, 1024)
best = morello.synthesize(vec, db=False)
hand = morello.schedule(vec, [morello.ToAccum(), None, morello.Split(8),
                              morello.TileOut(dim=2, size=32)])
x = rng.standard_normal((1, 256), dtype=np.float32)
w = rng.standard_normal((256, 1024), dtype=np.float32)
for name, p in (("searched", best), ("by hand", hand)):
    f = p.compile()
    np.testing.assert_allclose(f(x, w), x @ w, rtol=1e-4, atol=1e-3)
    print(f"{name:9} cost {p.cost:>10,}  {f.time(x, w, iters=200) * 1e6:8.2f} µs per call")
