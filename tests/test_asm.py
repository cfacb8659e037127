"""The emitted microkernel keeps its accumulators in registers (checked in the assembly)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import morello


@pytest.mark.isa("avx2")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_register_tile_inner_loop_has_register_fmas_and_no_vector_spills():
    prog = morello.synthesize(morello.matmul(64, 64, 64), db=False)
    fn = prog.compile()
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(fn.path)],
                         capture_output=True, text=True, check=True).stdout
    body = asm.split("<kernel>:")[1].split("\n\n")[0]
    # Straight-line blocks between jumps; the register tile's k loop is the one with the
    # most FMAs (6×16: 12). Boundary loops over a single row may fold their one use of each
    # rhs vector into the FMA as a memory operand; the register tile must not.
    blocks = re.split(r"\n\s*\w+:\s+j\w+ ", body)
    fmas = max((re.findall(r"vfmadd\w+\s+(\S+)", b) for b in blocks), key=len)
    assert len(fmas) >= 8
    assert all(re.fullmatch(r"%ymm\d+,%ymm\d+,%ymm\d+", ops) for ops in fmas), fmas
    spills = [l for l in body.splitlines() if "%ymm" in l and "(%rsp)" in l]
    assert not spills, spills
