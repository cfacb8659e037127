"""Parallel loops: searched for non-serial Specs, emitted as OpenMP, and correct."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import morello
from morello.errors import SpecError


@pytest.mark.isa("avx2")
def test_parallel_program_uses_openmp_and_matches_numpy():
    spec = morello.matmul(192, 64, 128, serial=False)
    prog = morello.synthesize(spec, db=False, threads=2)
    assert prog.target.processors == 2
    assert "#pragma omp parallel for" in prog.c_source
    assert "num_threads(2)" in prog.c_source
    fn = prog.compile()
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (192, 64)).astype(np.float32)
    b = rng.uniform(-1, 1, (64, 128)).astype(np.float32)
    np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_spec_made_serial_never_gets_parallel_loops():
    prog = morello.synthesize(morello.matmul(64, 64, 64, serial=True), db=False, threads=2)
    assert "#pragma omp" not in prog.c_source and "<omp.h>" not in prog.c_source
    assert prog.spec.serial_only


def test_a_pickled_spec_keeps_whether_serial_was_asked_for():
    import pickle

    for serial, given in ((None, False), (True, True), (False, True)):
        spec = pickle.loads(pickle.dumps(morello.matmul(8, 8, 8, serial=serial)))
        assert spec.serial_given is given
        assert spec.for_threads(2).serial_only is (serial is True)


def _task_cpu_ticks() -> dict[int, int]:
    """CPU time (user + system, clock ticks) of each thread of this process."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended
        out[int(task.name)] = int(fields[11]) + int(fields[12])
    return out


@pytest.mark.isa("avx2")
@pytest.mark.parametrize("make", [
    lambda: morello.synthesize(morello.matmul(512, 512, 512), db=False, threads=2),
    lambda: morello.schedule(morello.matmul(512, 512, 512), [], threads=2),
], ids=["synthesize", "schedule"])
def test_threads_make_a_default_spec_parallel_and_two_threads_run(make):
    prog = make()
    assert not prog.spec.serial_only
    assert "#pragma omp parallel for" in prog.c_source and "num_threads(2)" in prog.c_source
    fn = prog.compile()
    ins = prog.random_inputs()
    out = fn(*ins)
    np.testing.assert_allclose(out, ins[0] @ ins[1], rtol=1e-3, atol=1e-3)
    once = fn.time(*ins, iters=1, out=out)
    iters = max(1, int(0.8 / once))
    before, cpu0, wall0 = _task_cpu_ticks(), time.process_time(), time.perf_counter()
    fn.time(*ins, iters=iters, out=out)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    after = _task_cpu_ticks()
    grown = sorted((after[t] - before.get(t, 0) for t in after), reverse=True)
    # Each of the two threads runs half the loop, so both gain CPU time; CPU over wall
    # time says the same only when no other process shares the cores (a pytest worker).
    assert len(grown) >= 2 and grown[1] >= grown[0] // 4, (grown, cpu / wall)
    assert sum(grown) >= 1.2 * grown[0], (grown, cpu / wall)


@pytest.mark.parametrize("threads", [0, -1, 1.5])
def test_bad_thread_counts_are_refused(threads):
    with pytest.raises(SpecError):
        morello.synthesize(morello.matmul(2, 2, 2), db=False, threads=threads)
