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


# The mask of the bf16 widening: gcc writes it as vpand, clang 14 as a blend with zero.
MASK = r"vpand|vandps|vpblendw"


def _inner_loop(prog, op: str) -> str:
    """The kernel's straight-line block between jumps with the most ``op`` instructions."""
    fn = prog.compile()
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(fn.path)],
                         capture_output=True, text=True, check=True).stdout
    body = asm.split("<kernel>:")[1].split("\n\n")[0]
    blocks = re.split(r"\n\s*\w+:\s+j\w+ ", body)
    return max(blocks, key=lambda b: len(re.findall(op, b)))


def _loop_body(prog, op: str) -> str:
    """The instructions of the kernel's innermost loop (from a backward jump's target to
    the jump) with the most ``op`` instructions (``_inner_loop``'s blocks between jumps
    also take in what precedes a loop, such as its accumulators' set-up)."""
    fn = prog.compile()
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(fn.path)],
                         capture_output=True, text=True, check=True).stdout
    lines = asm.split("<kernel>:")[1].split("\n\n")[0].splitlines()
    addr = [int(m.group(1), 16) if (m := re.match(r"\s*([0-9a-f]+):", ln)) else -1
            for ln in lines]
    loops = []
    for i, ln in enumerate(lines):
        if (m := re.search(r"\sj\w+\s+([0-9a-f]+) <", ln)) and int(m.group(1), 16) < addr[i]:
            loops.append((addr.index(int(m.group(1), 16)), i))
    # Innermost loops only (no other loop inside), then the one with the most ``op``s.
    inner = [(a, b) for a, b in loops if not any(a <= c and d < b for c, d in loops)]
    return max(("\n".join(lines[a:b + 1]) for a, b in inner),
               key=lambda body: len(re.findall(op, body)))


@pytest.mark.isa("avx2")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_bf16_dot_loop_widens_by_shift_and_mask_without_spills():
    """gemma's matvec: 8 weight rows at once, each 16 bf16 widened by one shift and one
    mask (no vpmovzxwd), two FMAs per row, nothing spilled. (Scheduled: where side by
    side reads cost more than rows in turn, the search takes DotProductRows here.)"""
    from morello import Move, Select, TileOut, ToAccum, schedule
    from morello.memory import Level

    spec = morello.matmul(1, 512, 1024, dtypes=("f32", "bf16", "f32"), rhs_layout="cm")
    prog = schedule(spec, [Move(0, Level.L1), Move(2, Level.L1), ToAccum(), None,
                           TileOut(2, 8), Select("DotProductLoop")])
    loop = _inner_loop(prog, r"vfmadd")
    assert len(re.findall(r"vfmadd\w+", loop)) == 16, loop
    assert len(re.findall(r"vpslld", loop)) == 8 and len(re.findall(MASK, loop)) == 8
    assert "vpmovzxwd" not in loop
    assert not [line for line in loop.splitlines() if "%ymm" in line and "(%rsp)" in line]


@pytest.mark.isa("avx2")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_bf16_dot_rows_widen_by_shift_and_mask_against_split_x():
    """gemma's matvec read one weight row after another: per 32 bf16 two loads, two
    shifts and two masks, four FMAs (x's split copy as memory operands), nothing
    spilled."""
    from morello import Move, Select, ToAccum, schedule
    from morello.memory import Level

    spec = morello.matmul(1, 2048, 256, dtypes=("f32", "bf16", "f32"), rhs_layout="cm")
    prog = schedule(spec, [Move(0, Level.L1), Move(2, Level.L1), ToAccum(), None,
                           Select("DotProductRows")])
    loop = _loop_body(prog, r"vfmadd")
    fmas = len(re.findall(r"vfmadd\w+", loop))
    assert fmas in (4, 8, 16), loop   # (gcc may unroll it)
    assert len(re.findall(r"vpslld", loop)) == fmas // 2 == len(re.findall(MASK, loop))
    assert "vpmovzxwd" not in loop and "vpermpd" not in loop
    assert not re.findall(rf"(?:{MASK}|vpslld)\s+\S*\(", loop), loop  # loaded once
    assert not re.search(r"vmov\w+\s+%ymm\d+,\S*\(%rsp", loop), loop  # a spill: a store


@pytest.mark.isa("avx2")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_exact_int_loop_is_madd_add_in_registers():
    """The exact u8 x s8 register tile: vpmaddwd + vpaddd per 8 outputs, nothing spilled
    (a 6 x 16 tile, 16 registers with the product's temporary, spilled half of its
    accumulators every step and ran at 0.95 of f32 at 256^3)."""
    prog = morello.synthesize(morello.matmul(64, 64, 64, dtypes="u8,s8,s32"), db=False)
    loop = _inner_loop(prog, r"vpmaddwd")
    n = len(re.findall(r"vpmaddwd", loop))
    assert n >= 8, loop
    assert len(re.findall(r"vpaddd", loop)) >= n
    assert not [line for line in loop.splitlines() if "%ymm" in line and "(%rsp)" in line]


@pytest.mark.isa("avx2")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_bf16_axpy_loop_widens_by_shift_and_mask_into_eight_chains():
    """x @ W: per row of k one broadcast, 4 loads of 16 bf16, 4 shifts and 4 masks
    feeding 8 FMAs into 8 accumulators, nothing spilled."""
    prog = morello.synthesize(morello.matmul(1, 128, 128, dtypes=("f32", "bf16", "f32")),
                              db=False)
    loop = _loop_body(prog, r"vfmadd")
    fmas = re.findall(r"vfmadd\w+\s+\S+,\S+,(%ymm\d+)", loop)
    assert len(fmas) == 8 and len(set(fmas)) == 8, loop
    assert len(re.findall(r"vpslld", loop)) == 4 and len(re.findall(MASK, loop)) == 4
    assert "vpmovzxwd" not in loop and "(%rsp)" not in loop
    # Each 16 bf16 loaded once for both (``kernels.base.pin``): no mask or shift reloads
    # its vector as a memory operand (1.2x faster in L2).
    assert not re.findall(rf"(?:{MASK}|vpslld)\s+\S*\(", loop), loop


@pytest.mark.isa("avx2")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_saturating_int_loop_is_maddubs_madd_add_in_registers():
    prog = morello.synthesize(morello.matmul(64, 64, 64, dtypes="u8,s8,s32", saturate=True),
                              db=False)
    loop = _inner_loop(prog, r"vpmaddubsw")
    n = len(re.findall(r"vpmaddubsw", loop))
    assert n >= 6, loop
    assert len(re.findall(r"vpmaddwd", loop)) == n and len(re.findall(r"vpaddd", loop)) >= n
    # No accumulator is reloaded from the stack. (gcc 12 keeps one of the 8 stored there
    # every iteration, a store no load waits for, whatever the C's form.)
    assert not [line for line in loop.splitlines() if re.search(r"\(%rsp\),%ymm", line)]


@pytest.mark.isa("avx512")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_vnni_loop_is_dpbusd_in_registers_without_copies():
    """AVX-512's exact byte tile: one vpdpbusd per 8 outputs and 4 of k, its accumulators
    left in place (the intrinsic, under gcc 12, copied each one out and back per use)."""
    prog = morello.synthesize(morello.matmul(64, 64, 64, dtypes="u8,s8,s32",
                                             target="avx512"), target="avx512", db=False)
    loop = _loop_body(prog, r"vpdpbusd")
    n = len(re.findall(r"vpdpbusd", loop))
    assert n >= 8, loop
    assert len(re.findall(r"vmovdq\w*\s+%ymm\d+,%ymm\d+", loop)) <= 2, loop
    assert "(%rsp)" not in loop


@pytest.mark.isa("avx512")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_avx512_outer_product_loop_is_broadcasts_and_register_fmas_without_spills():
    """The register tile's k loop (an OuterProductLoop kernel, e.g. 6x64 in zmm registers):
    per step one broadcast of lhs from memory per row and a row's FMAs on registers, over
    independent accumulators, nothing spilled."""
    prog = morello.synthesize(morello.matmul(64, 64, 64), target="avx512", db=False)
    assert any(getattr(n.action, "kernel", "").startswith("OuterProductLoop")
               for n in prog.impl.walk())
    loop = _inner_loop(prog, r"vfmadd")
    fmas = re.findall(r"vfmadd\w+\s+(\S+)", loop)
    assert len(fmas) >= 12, loop
    assert all(re.fullmatch(r"%zmm\d+,%zmm\d+,%zmm\d+", ops) for ops in fmas), fmas
    # Consecutive FMAs write different accumulators (no chain of dependent FMAs).
    dests = [ops.split(",")[-1] for ops in fmas]
    assert all(a != b for a, b in zip(dests, dests[1:])), dests
    assert len(set(dests)) == len(fmas)
    rows = len(re.findall(r"vbroadcastss\s+-?\w*\(", loop))
    assert rows >= 4 and len(fmas) % rows == 0, loop
    assert not [line for line in loop.splitlines() if "%zmm" in line and "(%rsp)" in line]


@pytest.mark.isa("avx512")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_two_row_register_tile_loads_each_rhs_vector_once():
    """A register tile of two rows (what the search takes under some calibrations) loads
    each vector of the rhs row once per k step and keeps it for both rows: gcc, left to
    itself, folds the load into both FMAs (ten loads a step where six will do: 64^3 ran
    at 0.75x the peak)."""
    from morello import Move, TileOut, schedule
    from morello.memory import Level

    spec = morello.matmul(64, 64, 64).canonical()
    rm = spec.operands[2].layout
    prog = schedule(spec, [Move(1, Level.L1), TileOut(1, 32), Move(0, Level.L1),
                           Move(2, Level.L1), TileOut(1, 2), Move(2, Level.VRF, rm, 16)],
                    target="avx512")
    assert "OuterProductLoopWide" in str(prog.impl)
    loop = _loop_body(prog, r"vfmadd")
    fmas = re.findall(r"vfmadd\w+\s+(\S+)", loop)
    assert len(fmas) == 8, loop
    assert all(re.fullmatch(r"%zmm\d+,%zmm\d+,%zmm\d+", ops) for ops in fmas), fmas
    assert len(re.findall(r"vmovups\s+\S*\(", loop)) == 4, loop
    assert prog.verify()[0]
