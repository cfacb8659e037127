"""The database identity is semantic: comments never change it, decisions always do.

A stored result's context is the actions fingerprint (``morello.identity``), which names
the model by ``MODEL_VERSION``; the canary (``morello.canary``) fails when a cost or a
decision changes under an unchanged version."""
from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import morello
from morello import api, canary, identity
from morello.memory import AVX2, TARGETS

GOLDEN = Path(__file__).resolve().parent / "golden" / "canary.json"


def _fresh():
    api.close_sessions()
    identity._remembered.cache_clear()


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_canary_matches_its_contexts(target):
    doc = canary.load_golden(GOLDEN)
    for name, rec in doc["records"][target].items():  # the golden file was not hand-edited
        assert doc["known"][target][name][rec["context"]] == canary.digest(rec), name
    got = canary.record(target)
    assert set(got) == set(doc["records"][target]), "run `python tools/canary.py --update`"
    problems = canary.check(doc, {target: got})
    assert not problems, "; ".join(problems[:5])


def test_check_tells_a_due_bump_from_a_stale_record():
    rec = {"spec": "s", "trace": [0, 1], "costs": [10, 4], "context": "Matmul@00000000"}
    golden = canary.updated({"format": canary.FORMAT}, {"avx2": {"m": rec}})
    assert canary.check(golden, {"avx2": {"m": rec}}) == []
    cheaper = {**rec, "costs": [9, 4]}
    [line] = canary.check(golden, {"avx2": {"m": cheaper}})
    assert "bump the revision" in line and "cost changed (10 -> 9)" in line
    assert canary.refusals(golden, {"avx2": {"m": cheaper}})
    moved = {**cheaper, "context": "Matmul@11111111"}
    [line] = canary.check(golden, {"avx2": {"m": moved}})
    assert "stale" in line and "bump" not in line
    assert canary.refusals(golden, {"avx2": {"m": moved}}) == []
    again = canary.updated(golden, {"avx2": {"m": moved}})
    assert canary.check(again, {"avx2": {"m": moved}}) == []
    # Back to the first program under its first context: known, so no refusal.
    assert canary.refusals(again, {"avx2": {"m": rec}}) == []


def test_a_changed_kernel_cost_fails_the_canary(monkeypatch):
    """Double the cost of the register tiles that f32 matmuls end in (OuterProductLoop,
    every width): the program of a corpus matmul changes, or at least its cost, so the
    canary asks for a new version."""
    from morello.kernels import avx2
    from morello.kernels.base import KernelTable

    assert any(k.name.startswith("OuterProductLoop") for k in avx2.TABLE.kernels)

    def doubled(k):
        if not k.name.startswith("OuterProductLoop"):
            return k
        return dataclasses.replace(k, cost=lambda s, t, c=k.cost: 2 * c(s, t))

    table = KernelTable("avx2", tuple(map(doubled, avx2.TABLE.kernels)), avx2.VECTOR_TYPES)
    monkeypatch.setattr(avx2, "TABLE", table)
    monkeypatch.setattr(canary, "corpus",
                        lambda t, full=canary.corpus: [c for c in full(t)
                                                       if c[0] == "matmul 48x64x80"])
    _fresh()
    try:
        got = canary.record("avx2")
    finally:
        monkeypatch.undo()
        _fresh()
    [line] = canary.check(canary.load_golden(GOLDEN), {"avx2": got})
    assert "matmul 48x64x80" in line and "bump" in line


# Families of every sort: primitive, decomposed, lowered, a chain (attention's).
FAMILIES = ("Matmul", "Softmax", "Conv", "Relu",
            "Compose:Matmul@0.1.3.4;Softmax{2}@0.1.3;Matmul@0.1.2.3")


def test_a_revision_moves_only_the_families_that_reach_it(monkeypatch):
    before = {f: identity.family_fingerprint(AVX2, f) for f in FAMILIES}
    monkeypatch.setattr(identity, "REVISIONS", {**identity.REVISIONS, "Conv": 99})
    after = {f: identity.family_fingerprint(AVX2, f) for f in FAMILIES}
    assert [f for f in FAMILIES if after[f] != before[f]] == ["Conv"]
    assert not identity.legacy_valid("Conv") and identity.legacy_valid("Softmax")
    monkeypatch.setattr(identity, "REVISIONS", {**identity.REVISIONS, "Matmul": 99})
    again = {f: identity.family_fingerprint(AVX2, f) for f in FAMILIES}
    moved = [f for f in FAMILIES if again[f] != after[f]]
    assert moved == ["Matmul", "Conv", FAMILIES[-1]]  # attention holds matmuls


def test_the_model_version_is_part_of_every_context(monkeypatch):
    before = [identity.family_fingerprint(AVX2, f) for f in FAMILIES]
    monkeypatch.setattr(identity, "MODEL_VERSION", identity.MODEL_VERSION + 1)
    after = [identity.family_fingerprint(AVX2, f) for f in FAMILIES]
    assert all(a != b for a, b in zip(after, before))


_EDITS = {
    # A comment, a docstring, blank lines and a reformatted statement in each model module.
    "cost.py": "\n# A new comment: why, in a line.\n\n\ndef _unused_helper():\n"
               "    '''A docstring.'''\n    return (  1 +\n        2 )\n",
    "memory.py": "\n# Measured on some host: 1.23x (a figure that belongs in docs).\n",
    "kernels/avx2.py": '\n"""A stray string statement."""\n',
    "rewrites/tile.py": "\n# Tiles: a reworded comment.\n",
    "kinds.py": "\n\n# kinds: one more comment\n",
}


def test_comment_and_formatting_edits_keep_every_context(tmp_path):
    """A copy of the installed package with comments, docstrings and formatting edited in
    its model modules computes the same family fingerprints on every target, in a fresh
    process."""
    src = Path(morello.__file__).resolve().parent
    dst = tmp_path / "morello"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    import morello.codegen as cg

    cg_src = Path(cg.__file__).resolve().parent
    if cg_src.parent != src:  # an editable install maps codegen/ from the source root
        shutil.copytree(cg_src, dst / "codegen", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in _EDITS.items():
        path = dst / name
        path.write_text(path.read_text() + text)
    code = ("import sys, morello; from morello import identity; "
            "from morello.memory import TARGETS; "
            "assert morello.__file__.startswith(sys.argv[1]), morello.__file__; "
            f"print(' '.join(identity.family_fingerprint(TARGETS[t], f) "
            f"for t in sorted(TARGETS) for f in {FAMILIES!r}))")
    out = subprocess.run([sys.executable, "-c", code, str(dst)], capture_output=True,
                         text=True, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path),
                                                       "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    here = " ".join(identity.family_fingerprint(TARGETS[t], f) for t in sorted(TARGETS)
                    for f in FAMILIES)
    assert out.stdout.split() == here.split()
