"""The compiled callable under misuse, for every kind: a clear one-line error or the
right answer (``probes.cases`` lists the cases, ``probes.check_outcome`` the rule)."""
from __future__ import annotations

import numpy as np
import pytest
from probes import TRIES, cases, check_outcome

import morello

pytestmark = pytest.mark.isa("avx2")

SPECS = {
    "matmul 6x6x6": lambda: morello.matmul(6, 6, 6),
    "matmul 4x5x6 batch 2": lambda: morello.matmul(4, 5, 6, batch=2),
    "add 7x9": lambda: morello.add(7, 9),
    "mul 5": lambda: morello.mul(5),
    "relu 3x4x5": lambda: morello.relu(3, 4, 5),
    "transpose 9x13 batch 2": lambda: morello.transpose(9, 13, batch=2),
    "fill 6x7 -inf": lambda: morello.fill(6, 7, value=-np.inf),
    "broadcast 5x8 dim 0": lambda: morello.broadcast(5, 8, dim=0),
    "max 6x9 dim 1": lambda: morello.reduce_max(6, 9, dim=1),
    "sum 4x5x6 dim 0": lambda: morello.reduce_sum(4, 5, 6, dim=0),
    "softmax 5x19": lambda: morello.softmax(5, 19),
    "softmax 4x6 dim 0": lambda: morello.softmax(4, 6, dim=0),
    "bias 6x9": lambda: morello.add_bias(6, 9),
    "conv 1x3x6x6 4x3x3 pad 1": lambda: morello.conv2d(1, 3, 6, 6, 4, 3, 3, pad=1),
    "conv 2x4x7x7 4x3x3 pad 1 groups 4 (depthwise)":
        lambda: morello.conv2d(2, 4, 7, 7, 4, 3, 3, pad=1, groups=4),
    "channel-bias 2x5x3x4": lambda: morello.channel_bias(2, 5, 3, 4),
    "chain relu(bias(conv 1x3x6x6 4x3x3))": lambda: morello.conv_block(1, 3, 6, 6, 4, 3, 3),
    "chain relu(matmul 5x7x6)": lambda: morello.chain(morello.matmul(5, 7, 6),
                                                      morello.relu(5, 6)),
    "chain attention 9x5": lambda: morello.attention(9, 5),
    "chain attention 9x5 with K": lambda: morello.attention(9, 5, k_layout="k"),
}


def test_every_kind_is_covered():
    from morello.api import OPERATIONS

    assert {k.split()[0] for k in SPECS} == set(OPERATIONS) | {"chain"}


@pytest.mark.parametrize("label", SPECS)
def test_misuse_gives_a_clear_error_or_the_right_answer(label):
    prog = morello.synthesize(SPECS[label](), db=False)
    fn = prog.compile()
    outcomes = {}
    for name, thunk in cases(prog, fn):
        TRIES["callable misuse"] += 1
        try:
            outcomes[name] = check_outcome(prog, thunk)
        except AssertionError as e:
            raise AssertionError(f"{label}, {name}: {e}") from None
    # The cases that must work do, and those that cannot are refused.
    assert outcomes["right arguments"] == outcomes["out given"] == "ok"
    for name, got in outcomes.items():
        if name.startswith("input") and any(w in name for w in (
                "fortran", "strided", "misaligned", "memoryview", "array.array",
                "__array__", "read-only")):
            assert got == "ok", name
        if "float64" in name or "list" in name or "wrong shape" in name:
            assert got == "refused", name
        if name.startswith("out overlaps") or name.startswith("out is input"):
            assert got == "ok", name


def test_out_aliasing_an_input_is_correct_for_an_in_place_add():
    """The issue's case: fn(x, y, out=y) gave garbage."""
    fn = morello.synthesize(morello.add(64, 48), db=False).compile()
    rng = np.random.default_rng(1)
    x, y = (rng.uniform(-1, 1, (64, 48)).astype(np.float32) for _ in range(2))
    want = x + y
    got = fn(x, y, out=y)
    assert got is y
    np.testing.assert_array_equal(y, want)


def test_a_failed_allocation_raises_memory_error(tmp_path):
    """kernel() returns nonzero when aligned_alloc fails (simulated: the C source is
    built with aligned_alloc defined to return NULL)."""
    from morello.codegen import CompiledProgram, compile_c

    prog = morello.synthesize(morello.matmul(200, 200, 200), db=str(tmp_path / "r.sqlite"))
    src = prog.c_source
    assert "aligned_alloc" in src, "expected a program with a heap buffer"
    broken = src.replace("#include <time.h>\n", "#include <time.h>\n"
                         "#define aligned_alloc(a, n) ((void)(a), (void)(n), (void *)0)\n", 1)
    assert broken != src
    ops = prog.spec.operands
    fn = CompiledProgram(compile_c(broken, prog.target.cflags), [o.shape for o in ops],
                         [o.dtype.np for o in ops], len(ops) - 1)
    ins = prog.random_inputs()
    with pytest.raises(MemoryError):
        fn(*ins)
    with pytest.raises(MemoryError):
        fn.time(*ins, iters=1)
    assert np.allclose(prog.compile()(*ins), prog.reference(*ins), atol=1e-2)


def test_timing_writes_into_one_output_array_as_numpy_does():
    """``timing.seconds`` (``morello bench``) times every run into the one output array
    it wrote first: a fresh array per run put its page faults into the program's time
    (a 4096x4096 relu from main memory read as half its speed), where numpy's output is
    allocated once."""
    from morello import timing

    prog = morello.synthesize(morello.relu(64, 64), db=False)
    fn = prog.compile()
    seen = []

    class Recorder:
        def __call__(self, *ins, out=None):
            res = fn(*ins, out=out)
            seen.append(("call", id(res)))
            return res

        def time(self, *ins, iters=10, out=None):
            seen.append(("time", id(out) if out is not None else None))
            return fn.time(*ins, iters=iters, out=out)

    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    assert timing.seconds(Recorder(), [x], repeats=2) > 0
    ids = {i for _, i in seen}
    assert len(ids) == 1 and None not in ids, seen


def test_the_outputs_the_callable_allocates_start_on_a_cache_line():
    """numpy's arrays start 16 bytes off a line as often as not; vector rows of such an
    output straddle two lines on every store."""
    fn = morello.synthesize(morello.add(7, 48), db=False).compile()
    x, y = (np.ones((7, 48), np.float32) for _ in range(2))
    for _ in range(8):
        out = fn(x, y)
        assert out.ctypes.data % 64 == 0 and out.flags.c_contiguous
        np.testing.assert_array_equal(out, x + y)
