"""The AVX-512 target: 16-lane register tiles, verified against numpy where the host has
AVX-512; refused with one line where it does not."""
from __future__ import annotations

import pytest

import morello
from morello.memory import AVX2, AVX512, host_lacks


def test_a_host_without_avx512_is_told_so():
    flags = ["fpu", "avx", "avx2", "fma"]
    assert host_lacks(AVX2, flags) is None
    reason = host_lacks(AVX512, flags)
    assert reason is not None and "avx512f" in reason and "\n" not in reason
    assert host_lacks(AVX512, flags + ["avx512f"]) is None


@pytest.mark.isa("avx512")
@pytest.mark.parametrize("make", [
    lambda: morello.matmul(64, 64, 64, target="avx512"),
    lambda: morello.matmul(7, 33, 50, batch=2, target="avx512"),
    lambda: morello.softmax(9, 70, target="avx512"),
    lambda: morello.attention(20, 16, target="avx512"),
], ids=["matmul 64^3", "matmul odd batched", "softmax", "attention"])
def test_avx512_programs_match_numpy(make):
    prog = morello.synthesize(make(), target="avx512", db=False)
    ok, err = prog.verify()
    assert ok, err


@pytest.mark.isa("avx512")
def test_register_tiles_take_zmm_vectors():
    prog = morello.synthesize(morello.matmul(32, 32, 64, target="avx512"), target="avx512",
                              db=False)
    vrf = [o for n in prog.impl.walk() for o in n.spec.operands if o.vector_size]
    assert any(o.vector_size == 16 for o in vrf)
    assert "__m512" in prog.c_source and "_mm512_fmadd_ps" in prog.c_source
