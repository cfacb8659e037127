"""The model's canary: a fixed corpus of Specs whose optimal programs stand for the model.

The database identity names the model's decisions by declared versions
(``morello.identity.MODEL_VERSION`` and the per-family ``REVISIONS``) instead of hashing
source, so that comments and refactors never orphan a database. The canary is what keeps
that honest: it synthesizes every Spec of ``corpus()`` on every target with the built-in
constants and records each program's trace, the cost of every node and the context its
family's results are stored under (``identity.family_fingerprint``).
``tests/golden/canary.json`` holds those records and, for every context a record was made
under, its digest. A program that changes under an unchanged context fails
``tests/test_canary.py`` (``check``): bump the revision of the family that decides it (or
``MODEL_VERSION`` for the shared core), then ``python tools/canary.py --update``. A change
the context already names (a new kind, kernel row or lowering in the family's closure)
needs the update only.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

FORMAT = "morello-canary"


def corpus(target: str) -> list[tuple[str, Callable, int]]:
    """``(name, make Spec, threads)`` for every kind the constructors reach, each in a
    register-sized, a cache-sized and (where the model has rules for it) a main-memory
    problem; the internal kinds (accumulating twins, softmax's parts, moves) appear as
    nodes of their programs."""
    import morello as m

    cases: list[tuple[str, Callable, int]] = [
        ("matmul 8x8x8", lambda: m.matmul(8, 8, 8, target=target), 1),
        ("matmul 48x64x80", lambda: m.matmul(48, 64, 80, target=target), 1),
        ("matmul 256x256x256", lambda: m.matmul(256, 256, 256, target=target), 1),
        ("matmul 256x256x256 2t", lambda: m.matmul(256, 256, 256, target=target), 2),
        ("matmul b4 32x32x32", lambda: m.matmul(32, 32, 32, batch=4, target=target), 1),
        ("matmul 1x2048x16384 bf16 cm",
         lambda: m.matmul(1, 2048, 16384, dtypes=("f32", "bf16", "f32"), rhs_layout="cm",
                          target=target), 1),
        ("matmul 1x512x1024 bf16 rm",
         lambda: m.matmul(1, 512, 1024, dtypes=("f32", "bf16", "f32"), target=target), 1),
        ("matmul 16x64x32 u8s8s32",
         lambda: m.matmul(16, 64, 32, dtypes=("u8", "s8", "s32"), target=target), 1),
        ("matmul 16x64x32 u8s8s32 sat",
         lambda: m.matmul(16, 64, 32, dtypes=("u8", "s8", "s32"), saturate=True, target=target), 1),
        ("add 64x256", lambda: m.add(64, 256, target=target), 1),
        ("add 4096x4096", lambda: m.add(4096, 4096, target=target), 1),
        ("mul 3x5x7", lambda: m.mul(3, 5, 7, target=target), 1),
        ("relu 4096x4096", lambda: m.relu(4096, 4096, target=target), 1),
        ("relu 100", lambda: m.relu(100, target=target), 1),
        ("fill 0 64x64", lambda: m.fill(64, 64, target=target), 1),
        ("fill -inf 16x40", lambda: m.fill(16, 40, value=float("-inf"), target=target), 1),
        ("broadcast 64x128 dim0", lambda: m.broadcast(64, 128, dim=0, target=target), 1),
        ("max 128x400 dim1", lambda: m.reduce_max(128, 400, dim=1, target=target), 1),
        ("max 4096x4096 dim0", lambda: m.reduce_max(4096, 4096, dim=0, target=target), 1),
        ("sum 16x200 dim0", lambda: m.reduce_sum(16, 200, dim=0, target=target), 1),
        ("sum 2048x3000 dim1", lambda: m.reduce_sum(2048, 3000, dim=1, target=target), 1),
        ("softmax 128x1024", lambda: m.softmax(128, 1024, target=target), 1),
        ("softmax 64x96 dim0", lambda: m.softmax(64, 96, dim=0, target=target), 1),
        ("softmax 4096x4096", lambda: m.softmax(4096, 4096, target=target), 1),
        ("bias 64x256", lambda: m.add_bias(64, 256, target=target), 1),
        ("attention 64x32", lambda: m.attention(64, 32, target=target), 1),
        ("conv 1x4x10x10 f8 3x3 pad1",
         lambda: m.conv2d(1, 4, 10, 10, 8, 3, 3, pad=1, target=target), 1),
        ("conv 1x16x8x8 f16 1x1 nhwc",
         lambda: m.conv2d(1, 16, 8, 8, 16, 1, 1, layout="nhwc", target=target), 1),
        ("conv 2x3x9x9 f8 3x3 stride2",
         lambda: m.conv2d(2, 3, 9, 9, 8, 3, 3, stride=2, target=target), 1),
        ("depthwise 1x8x12x12 3x3 pad1",
         lambda: m.conv2d(1, 8, 12, 12, 8, 3, 3, pad=1, groups=8, target=target), 1),
        ("depthwise 1x4x11x11 3x3 stride2",
         lambda: m.conv2d(1, 4, 11, 11, 4, 3, 3, stride=2, pad=1, groups=4, target=target), 1),
        ("depthwise 1x24x10x10 3x3 pad1 nhwc",
         lambda: m.conv2d(1, 24, 10, 10, 24, 3, 3, pad=1, groups=24, layout="nhwc",
                          target=target), 1),
        ("chain matmul|bias|relu 64x64x64",
         lambda: m.chain(m.matmul(64, 64, 64, target=target), m.add_bias(64, 64, target=target),
                         m.relu(64, 64, target=target)), 1),
    ]
    return cases


def record(target: str, progress: Callable[[str], None] | None = None) -> dict[str, dict]:
    """Each corpus Spec's program on ``target`` (built-in constants, no database): its
    trace and the cost of each node in pre-order."""
    import morello

    out = {}
    for name, make, threads in corpus(target):
        if progress:
            progress(f"canary: {target} {name}")
        prog = morello.synthesize(make(), target, db=False, threads=threads,
                                  calibration="builtin")
        nodes = list(prog.impl.walk())
        out[name] = {"spec": prog.spec.logical_str(), "trace": prog.impl.trace(),
                     "costs": [n.cost.main for n in nodes], "context": context(prog.spec, target)}
    return out


def context(spec, target: str) -> str:
    """The context (``family@fingerprint``) the results of ``spec``'s family are stored
    under on ``target``."""
    from morello.coords import spec_key
    from morello.identity import family_fingerprint
    from morello.memory import TARGETS

    family = spec_key(spec)[0]
    return f"{family}@{family_fingerprint(TARGETS[target], family)}"


def check(golden: dict, got: dict) -> list[str]:
    """What ``got`` (``{target: record(target)}``) breaks of the golden document: a line
    per corpus Spec whose program or costs changed under the context the golden file has
    for it (a decision the identity does not name: a bump is due), or whose record is
    stale (its context moved, or it is new: an update is due). Only the Specs ``got``
    has are compared."""
    lines = []
    for target, recs in sorted(got.items()):
        want = golden.get("records", {}).get(target, {})
        for name in sorted(recs):
            g, w = recs.get(name), want.get(name)
            if g == w:
                continue
            if g is not None and w is not None and g["context"] == w["context"]:
                lines.append(f"{target} {name}: {_change(w, g)} under the unchanged context "
                             f"{g['context']}: bump the revision of its family "
                             "(morello.identity.REVISIONS) or MODEL_VERSION, then run "
                             "`python tools/canary.py --update`")
            else:
                lines.append(f"{target} {name}: its record is stale (context "
                             f"{(w or {}).get('context', 'none')} -> "
                             f"{(g or {}).get('context', 'none')}): run "
                             "`python tools/canary.py --update`")
    return lines


def refusals(golden: dict, got: dict) -> list[str]:
    """The records of ``got`` that an update would file under a context the golden file
    already knows with another program: a changed decision needs a new context."""
    lines = []
    for target, recs in sorted(got.items()):
        known = golden.get("known", {}).get(target, {})
        for name, rec in sorted(recs.items()):
            was = known.get(name, {}).get(rec["context"])
            if was is not None and was != digest(rec):
                lines.append(f"{target} {name}: context {rec['context']} already stands "
                             "for another program")
    return lines


def updated(golden: dict, got: dict) -> dict:
    """The golden document with ``got``'s records, each digest filed under its context."""
    known: dict[str, dict[str, dict[str, str]]] = {
        t: {n: dict(c) for n, c in v.items()} for t, v in golden.get("known", {}).items()}
    for target, recs in got.items():
        for name, rec in recs.items():
            known.setdefault(target, {}).setdefault(name, {})[rec["context"]] = digest(rec)
    return {"format": FORMAT, "records": {**golden.get("records", {}), **got},
            "known": known}


def _change(want: dict, got: dict) -> str:
    what = "cost" if want.get("trace") == got.get("trace") else "program"
    return f"{what} changed ({want.get('costs', ['-'])[0]} -> {got.get('costs', ['-'])[0]})"


def digest(records: dict) -> str:
    text = json.dumps(records, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_golden(path: Path) -> dict:
    doc = json.loads(path.read_text())
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    return doc


def differences(want: dict, got: dict) -> list[str]:
    """Lines naming each corpus entry whose program or costs differ."""
    lines = []
    for target in sorted(set(want) | set(got)):
        w, g = want.get(target, {}), got.get(target, {})
        for name in sorted(set(w) | set(g)):
            if w.get(name) != g.get(name):
                a, b = w.get(name, {}), g.get(name, {})
                lines.append(f"{target} {name}: cost {a.get('costs', ['-'])[0]} -> "
                             f"{b.get('costs', ['-'])[0]}"
                             + ("" if a.get("trace") == b.get("trace") else ", program changed"))
    return lines
