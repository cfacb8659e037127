"""The declared closure of each kind (``morello.identity.closure``) holds every kind its
rewrites reach: walked from the canary's corpus (every kind the constructors make) and
from convs, through every applicable action, each child's kind is in its parent's
closure."""
from __future__ import annotations

import pytest

import morello
from morello import canary, identity
from morello.memory import TARGETS

PER_ROOT = 120  # Specs expanded per root: the first levels of every kind's programs


def _roots(target: str):
    specs = [make() for _, make, _ in canary.corpus(target)]
    specs += [morello.conv2d(1, 3, 7, 6, 5, 3, 3, pad=1, target=target),
              morello.conv2d(1, 4, 6, 6, 8, 1, 1, layout="nhwc", target=target),
              morello.conv_block(1, 3, 6, 6, 5, 3, 3, pad=1, target=target),
              morello.conv_block(1, 4, 6, 6, 8, 1, 1, steps=("add", "relu"), layout="nhwc",
                                 target=target),
              morello.conv2d(1, 3, 7, 6, 3, 3, 3, pad=1, groups=3, target=target),
              morello.conv_block(2, 4, 7, 7, 4, 3, 3, stride=2, groups=4, target=target)]
    return specs


@pytest.mark.parametrize("target", ["avx2"])
def test_every_child_kind_is_in_its_parent_s_closure(target):
    from morello.rewrites import actions

    tgt = TARGETS[target]
    kinds_seen = set()
    for root in _roots(target):
        todo, seen = [root.canonical()], set()
        while todo and len(seen) < PER_ROOT:
            spec = todo.pop(0)
            if spec in seen:
                continue
            seen.add(spec)
            allowed = identity.closure(spec.kind)
            for act in actions(spec, tgt):
                exp = act.expand(spec, tgt)
                if exp is None:
                    continue
                for child in exp.children:
                    assert child.kind in allowed, (
                        f"{act} of {spec} makes a {child.kind.title} Spec, outside the declared "
                        f"closure of {spec.kind.title}: add the edge in identity._reaches")
                    kinds_seen.add(child.kind)
                    todo.append(child)
    assert len(kinds_seen) >= 20  # the walk reached deep enough to mean something


def test_a_closure_holds_its_own_kind_and_only_what_it_reaches():
    from morello.kinds import PrimKind

    mm = identity.closure(PrimKind.MATMUL)
    assert PrimKind.MATMUL_ACCUM in mm and PrimKind.CONV not in mm
    assert PrimKind.SOFTMAX not in mm
    assert mm <= identity.closure(PrimKind.CONV)
    chain = morello.attention(64, 64).kind
    assert PrimKind.SOFTMAX in identity.closure(chain) and mm <= identity.closure(chain)


def _fps(target):
    return {f: identity.family_fingerprint(target, f)
            for f in ("Matmul", "Softmax", "Conv", "Relu")}


def test_a_kind_no_family_reaches_leaves_the_family_fingerprints(monkeypatch):
    """Without the conv rows (as before conv existed) the legacy global fingerprint
    moves, and every family that cannot reach a conv keeps its own."""
    from morello import kinds
    from morello.memory import AVX2

    before, glob = _fps(AVX2), identity.legacy_fingerprint(AVX2)
    fewer = {k: v for k, v in kinds.KINDS.items()
             if k not in (kinds.PrimKind.CONV, kinds.PrimKind.CONV_ACCUM)}
    monkeypatch.setattr(kinds, "KINDS", fewer)
    assert identity.legacy_fingerprint(AVX2) != glob
    after = {f: identity.family_fingerprint(AVX2, f) for f in ("Matmul", "Softmax", "Relu")}
    assert after == {f: before[f] for f in after}


def test_a_kernel_row_moves_the_families_that_reach_it_only(monkeypatch):
    from morello.kernels import table_for
    from morello.kinds import PrimKind
    from morello.memory import AVX2

    before = _fps(AVX2)
    table = table_for(AVX2)
    real = table.for_kind

    def renamed(kind):
        rows = real(kind)
        if kind is PrimKind.MATMUL_ACCUM:
            rows = tuple(rows)[:-1]  # as if its last kernel row were gone
        return rows

    monkeypatch.setattr(table, "for_kind", renamed)
    after = _fps(AVX2)
    assert after["Matmul"] != before["Matmul"] and after["Conv"] != before["Conv"]
    assert after["Softmax"] == before["Softmax"] and after["Relu"] == before["Relu"]


def test_the_model_version_moves_every_family(monkeypatch):
    from morello.memory import AVX2

    before = _fps(AVX2)
    monkeypatch.setattr(identity, "MODEL_VERSION", identity.MODEL_VERSION + 1)
    after = _fps(AVX2)
    assert all(after[f] != before[f] for f in before)
