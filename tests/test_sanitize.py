"""The emitted C under AddressSanitizer and UndefinedBehaviorSanitizer.

Each Spec's program is built with a standalone ``main`` (``morello.codegen.harness``)
that gives every operand a heap block of exactly its size, run on random inputs under
``-fsanitize=address,undefined`` (any finding aborts: ``-fno-sanitize-recover``), and its
output is compared with numpy. Every kind is covered, with tiny, odd and batched shapes
and parallel loops.
"""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

import morello
from morello.api import _memory_order
from morello.codegen.build import find_compiler
from morello.codegen.harness import emit_main

pytestmark = pytest.mark.isa("avx2")

SAN_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
             "-fno-sanitize-recover=all", "-std=gnu11"]

# (label, Spec constructor, threads)
SPECS = [
    ("matmul 1x1x1", lambda: morello.matmul(1, 1, 1), 1),
    ("matmul 3x5x7", lambda: morello.matmul(3, 5, 7), 1),
    ("matmul 7x13x97", lambda: morello.matmul(7, 13, 97), 1),
    ("matmul 17x9x33 batch 3", lambda: morello.matmul(17, 9, 33, batch=3), 1),
    ("matmul 64x64x64", lambda: morello.matmul(64, 64, 64), 1),
    ("matmul 1x200x1", lambda: morello.matmul(1, 200, 1), 1),
    ("matmul 48x32x40 parallel", lambda: morello.matmul(48, 32, 40, serial=False), 2),
    ("matmul 32x32x32 batch 8 parallel",
     lambda: morello.matmul(32, 32, 32, batch=8, serial=False), 2),
    ("add 1", lambda: morello.add(1), 1),
    ("add 13", lambda: morello.add(13), 1),
    ("add 3x5x7x9", lambda: morello.add(3, 5, 7, 9), 1),
    ("add 100x33", lambda: morello.add(100, 33), 1),
    ("add 256x64 parallel", lambda: morello.add(256, 64, serial=False), 2),
    ("mul 5x17", lambda: morello.mul(5, 17), 1),
    ("mul 2x3x4", lambda: morello.mul(2, 3, 4), 1),
    ("relu 1x1", lambda: morello.relu(1, 1), 1),
    ("relu 31x9", lambda: morello.relu(31, 9), 1),
    ("transpose 19x21", lambda: morello.transpose(19, 21), 1),
    ("fill 7 =0", lambda: morello.fill(7), 1),
    ("fill 3x9x5 =-inf", lambda: morello.fill(3, 9, 5, value=-np.inf), 1),
    ("broadcast 4x13 dim 0", lambda: morello.broadcast(4, 13, dim=0), 1),
    ("broadcast 5x3x9 dim 2", lambda: morello.broadcast(5, 3, 9, dim=2), 1),
    ("max 7x19 dim 1", lambda: morello.reduce_max(7, 19, dim=1), 1),
    ("max 9x5 dim 0", lambda: morello.reduce_max(9, 5, dim=0), 1),
    ("max 3x4x5x6 dim 2", lambda: morello.reduce_max(3, 4, 5, 6, dim=2), 1),
    ("sum 33 dim 0", lambda: morello.reduce_sum(33, dim=0), 1),
    ("sum 6x70 dim 1", lambda: morello.reduce_sum(6, 70, dim=1), 1),
    ("softmax 1", lambda: morello.softmax(1), 1),
    ("softmax 7x33", lambda: morello.softmax(7, 33), 1),
    ("softmax 3x5x16 dim 1", lambda: morello.softmax(3, 5, 16, dim=1), 1),
    ("softmax 128x64 parallel", lambda: morello.softmax(128, 64, serial=False), 2),
    ("sum 512x64 dim 1 parallel", lambda: morello.reduce_sum(512, 64, dim=1, serial=False),
     2),
    ("bias 13x21", lambda: morello.add_bias(13, 21), 1),
    ("conv 2x3x7x6 5x3x3 pad 1", lambda: morello.conv2d(2, 3, 7, 6, 5, 3, 3, pad=1), 1),
    ("conv 1x4x9x9 3x3x3 stride 2", lambda: morello.conv2d(1, 4, 9, 9, 3, 3, 3, stride=2), 1),
    ("conv 2x5x9x8 5x3x3 stride 2 pad 1 groups 5", lambda: morello.conv2d(
        2, 5, 9, 8, 5, 3, 3, stride=2, pad=1, groups=5), 1),
    ("conv 1x3x10x11 3x3x3 pad 1 groups 3",
     lambda: morello.conv2d(1, 3, 10, 11, 3, 3, 3, pad=1, groups=3), 1),
    ("chain relu(bias(depthwise)) 1x6x7x7 3x3 pad 1", lambda: morello.conv_block(
        1, 6, 7, 7, 6, 3, 3, pad=1, groups=6), 1),
    ("conv 1x20x9x8 20x3x3 stride 2 pad 1 groups 20 nhwc", lambda: morello.conv2d(
        1, 20, 9, 8, 20, 3, 3, stride=2, pad=1, groups=20, layout="nhwc"), 1),
    ("chain relu(bias(depthwise)) 1x16x7x7 3x3 pad 1 nhwc", lambda: morello.conv_block(
        1, 16, 7, 7, 16, 3, 3, pad=1, groups=16, layout="nhwc"), 2),
    ("bias 4x6x9 dim 2", lambda: morello.add_bias(4, 6, 9, dim=2), 1),
    ("channel-bias 2x9x5x3", lambda: morello.channel_bias(2, 9, 5, 3), 1),
    ("channel-bias 1x9x5x3 channels-last",
     lambda: morello.channels_last(morello.channel_bias(1, 9, 5, 3)), 1),
    ("chain relu(add(conv)) 2x3x7x6 5x3x3 pad 1 stride 2", lambda: morello.conv_block(
        2, 3, 7, 6, 5, 3, 3, pad=1, stride=2, steps=("add", "relu")), 1),
    ("chain relu(bias(conv)) 1x4x6x6 9x3x3 channels-last", lambda: morello.conv_block(
        1, 4, 6, 6, 9, 3, 3, layout="nhwc"), 1),
    ("chain attention 19x7", lambda: morello.attention(19, 7), 1),
    ("chain attention 16x8 with K", lambda: morello.attention(16, 8, k_layout="k"), 1),
    ("chain relu(bias(matmul)) 9x5x17", lambda: morello.chain(
        morello.matmul(9, 5, 17), morello.add_bias(9, 17), morello.relu(9, 17)), 1),
    ("chain softmax(matmul) 64x8x32 parallel", lambda: morello.chain(
        morello.matmul(64, 8, 32, serial=False), morello.softmax(64, 32, serial=False)), 2),
]


def test_every_kind_is_covered():
    from morello.api import OPERATIONS

    labels = {label.split()[0] for label, _, _ in SPECS}
    assert labels == set(OPERATIONS) | {"chain"}
    assert len(SPECS) >= 20


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return str(tmp_path_factory.mktemp("san") / "results.sqlite")


def run_sanitized(prog: morello.Program, tmp_path, seed: int = 0):
    """Build ``prog`` with the sanitizers, run it on random inputs; (stderr, output,
    reference)."""
    src = prog.c_source + emit_main(prog.spec)
    c = tmp_path / "k.c"
    c.write_text(src)
    exe = tmp_path / "k"
    omp = ["-fopenmp"] if "#pragma omp" in src else []
    subprocess.run([find_compiler(), *SAN_FLAGS, *prog.target.cflags, *omp, "-o", str(exe),
                    str(c), "-lm"], check=True, capture_output=True, text=True)
    ins = prog.random_inputs(seed)
    files = []
    for i, a in enumerate(ins):
        files.append(tmp_path / f"in{i}.bin")
        order = _memory_order(prog.spec.operands[i], prog.spec)  # files hold the memory
        (a if order is None else np.ascontiguousarray(a.transpose(order))).tofile(files[-1])
    out_file = tmp_path / "out.bin"
    out_spec = prog.spec.output
    np.full(out_spec.shape, np.nan, out_spec.dtype.np).tofile(out_file)  # poison
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=98",
               OMP_NUM_THREADS=str(prog.target.processors))
    proc = subprocess.run([str(exe), *map(str, files), str(out_file)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"
    order = _memory_order(out_spec, prog.spec)  # the file holds the output's memory
    out = np.fromfile(out_file, out_spec.dtype.np)
    if order is None:
        out = out.reshape(out_spec.shape)
    else:
        out = out.reshape([out_spec.shape[d] for d in order]).transpose(np.argsort(order))
    return proc.stderr, out, prog.reference(*ins)


@pytest.mark.parametrize("label,make,threads", SPECS, ids=[s[0] for s in SPECS])
def test_emitted_c_is_clean_under_asan_and_ubsan(label, make, threads, db, tmp_path):
    prog = morello.synthesize(make(), db=db, threads=threads)
    if threads > 1 and "parallel" in label:
        assert "#pragma omp" in prog.c_source, "no parallel loop was chosen"
    stderr, out, ref = run_sanitized(prog, tmp_path)
    assert "runtime error" not in stderr and "Sanitizer" not in stderr, stderr
    ok, err = morello.verify.compare(prog.spec, out, ref)
    assert ok, f"max abs error {err}"


def test_the_sanitizers_catch_an_overflow(tmp_path):
    """The check can fail: a kernel that writes one element past its output aborts."""
    prog = morello.synthesize(morello.add(13), db=False)
    broken = prog.c_source.replace("int morello_status = 0;",
                                   "int morello_status = 0; out[13] = 0.0f;", 1)
    assert broken != prog.c_source
    object.__setattr__(prog, "_c", broken)
    with pytest.raises(AssertionError, match="heap-buffer-overflow"):
        run_sanitized(prog, tmp_path)
