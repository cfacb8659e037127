"""Runs of main memory: what starting one costs (``cost.run_cost``, with the ramp of long
runs), how loops that continue runs are discounted, and the matvec's output viewed in L2
so that W is read in whole rows."""
from __future__ import annotations

from dataclasses import replace

import pytest

import morello
from morello.cost import RAMP_BYTES, run_cost
from morello.memory import AVX2, Level
from morello.rewrites.move import Move, operand_moves
from morello.search import Engine


def test_a_run_pays_the_ramp_by_its_length_up_to_a_page():
    k = AVX2.costs
    assert k.gl_ramp > 0
    assert run_cost(64, AVX2) < run_cost(RAMP_BYTES // 2, AVX2) < run_cost(RAMP_BYTES, AVX2)
    assert run_cost(RAMP_BYTES, AVX2) == run_cost(8 * RAMP_BYTES, AVX2) == k.gl_run + k.gl_ramp
    # Cutting a run in two never makes its starts cheaper.
    for nbytes in (64, 1000, RAMP_BYTES, 3 * RAMP_BYTES):
        assert 2 * run_cost(nbytes // 2, AVX2) >= run_cost(nbytes, AVX2)


def test_calibrations_without_the_ramp_keep_their_model():
    from morello.costs import CostConstants

    d = {f: 1 for f in CostConstants.__dataclass_fields__ if f != "gl_ramp"}
    assert CostConstants.from_json(d).gl_ramp == 0


@pytest.mark.parametrize("spec", [morello.matmul(1, 8, 2048), morello.relu(4, 2048)],
                         ids=str)
def test_the_native_core_and_the_python_expansion_agree_on_continued_runs(spec):
    """Loops over tiles whose runs continue into runs longer than a page: the native
    expander's discount and the Python one (``tile.stream_discount``) agree."""
    a, _ = Engine(AVX2).solve(spec)
    b, _ = Engine(AVX2, native=False).solve(spec)
    assert a is not None and a.cost == b.cost


def test_a_matvec_output_too_big_for_l1_may_be_viewed_in_l2():
    spec = morello.matmul(1, 64, 16384, dtypes=("f32", "bf16", "f32"))
    out = spec.operands[2]
    assert Move(2, Level.L2, None) in operand_moves(spec.kind, 2, out, AVX2)
    # Not a block of a matmul's output with more than one row, nor one that L1 holds.
    wide = morello.matmul(2, 64, 16384).operands[2]
    assert Move(2, Level.L2, None) not in operand_moves(spec.kind, 2, wide, AVX2)
    small = replace(out, shape=(1, 1, 4096))
    assert Move(2, Level.L2, None) not in operand_moves(spec.kind, 2, small, AVX2)


def test_x_times_w_reads_whole_rows_of_w_with_y_in_l2():
    """x[1x64] . W[64x16384] (bf16) from DRAM (here: beyond a 1 MiB last-level cache):
    y (64 KiB) in L2, each group of 8 rows of W read over all of its columns, then the
    next 8; matches numpy. (Within the cache, where a run starts from L3, the search may
    cut the columns in blocks: 1.00x, paired.)"""
    program = morello.synthesize(morello.matmul(1, 64, 16384, dtypes=("f32", "bf16", "f32")),
                                 target=replace(AVX2, llc_bytes=1 << 20), db=False)
    assert program.target.name == "avx2"
    steps = [str(n.action) for n in program.impl.walk()]
    assert "Move(op=2, L2, view)" in steps, program.impl.pformat()
    assert not any(s.startswith("TileOut(dim=2, size=") and s != "TileOut(dim=2, size=64)"
                   for s in steps), program.impl.pformat()
    ok, err = program.verify()
    assert ok, err
