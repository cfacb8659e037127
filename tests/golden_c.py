"""Golden C of every kernel row on every target: ``tests/golden/c/<target>/<kernel>.c``.

    python tests/golden_c.py --update   # after a kernel edit: the diff is the review

Each row is emitted for the smallest leaf Spec it applies to among those the searches of
``SEARCHED`` meet (ties by the Spec's text), so the file changes only when the kernel's
C does (or when a smaller Spec starts to reach it). ``tests/test_golden_c.py`` diffs.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "golden" / "c"


def searched(target: str) -> list:
    """Specs whose searches reach a leaf of every kernel row."""
    import morello as m

    t = target
    bf16 = ("f32", "bf16", "f32")
    return [
        m.matmul(8, 8, 32, target=t), m.matmul(1, 64, 64, dtypes=bf16, target=t),
        m.matmul(1, 64, 64, dtypes=bf16, rhs_layout="cm", target=t),
        m.matmul(1, 2048, 16384, dtypes=bf16, rhs_layout="cm", target=t),
        m.matmul(1, 4096, 4096, dtypes=bf16, target=t),
        m.matmul(4, 64, 32, dtypes=("u8", "s8", "s32"), target=t),
        m.matmul(4, 64, 32, dtypes=("u8", "s8", "s32"), saturate=True, target=t),
        m.matmul(4, 32, 16, dtypes=("s16", "s16", "s32"), target=t),
        m.add(4096, 4096, target=t), m.mul(4096, 4096, target=t),
        m.relu(4096, 4096, target=t), m.add(8, 64, target=t), m.mul(8, 64, target=t),
        m.relu(8, 64, target=t), m.fill(8, 64, target=t),
        m.fill(8, 64, value=float("-inf"), target=t),
        m.broadcast(8, 64, dim=0, target=t), m.broadcast(8, 64, dim=1, target=t),
        m.reduce_max(8, 64, dim=0, target=t), m.reduce_max(8, 64, dim=1, target=t),
        m.reduce_sum(8, 64, dim=0, target=t), m.reduce_sum(8, 64, dim=1, target=t),
        m.softmax(8, 64, target=t), m.softmax(64, 8, dim=0, target=t),
        m.softmax(2, 8192, target=t), m.softmax(4096, 4096, target=t),
        m.add_bias(8, 64, target=t), m.attention(16, 16, target=t),
        m.channel_bias(2, 16, 5, 7, target=t),
        m.channels_last(m.channel_bias(1, 16, 5, 7, target=t)),
        m.transpose(12, 20, target=t),
        m.conv2d(1, 64, 6, 6, 64, 3, 3, pad=1, groups=64, layout="nhwc", target=t),
    ]


def generate() -> tuple[dict[Path, str], dict[str, list[str]]]:
    """``({path: C}, {target: kernel rows no searched Spec reaches})``."""
    from morello.api import problem_target
    from morello.codegen.emit import emit_kernel
    from morello.errors import SpecError
    from morello.kernels import table_for
    from morello.memory import TARGETS
    from morello.search import Engine

    files: dict[Path, str] = {}
    missing: dict[str, list[str]] = {}
    for name, target in sorted(TARGETS.items()):
        engines: dict = {}  # per target variant (within the LLC, beyond it in DRAM)
        for spec in searched(name):
            variant = problem_target(target, spec)
            eng = engines.setdefault(variant, Engine(variant))
            try:
                eng.solve(spec.canonical())
            except SpecError:
                continue  # a dtype this target has no kernels for
        leaves = sorted(((s, v) for v, eng in engines.items() for s in eng.specs),
                        key=lambda sv: (sv[0].volume, str(sv[0]), sv[1].name,
                                        sv[1].gl_in_dram, sv[1].gl_in_llc))
        for k in table_for(target).kernels:
            found = next(((s, v) for s, v in leaves if k.why_not(s, v) is None), None)
            if found is None:
                missing.setdefault(name, []).append(k.name)
                continue
            spec, variant = found
            body = emit_kernel(spec, variant, k.name)
            files[ROOT / name / f"{k.name}.c"] = (f"/* {k.name} on {name}: "
                                                   f"{spec.logical_str()} */\n{body}")
    return files, missing


def main() -> int:
    files, missing = generate()
    if "--update" not in sys.argv[1:]:
        print(__doc__)
        return 2
    for path in ROOT.glob("*/*.c"):
        if path not in files:
            path.unlink()
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(files)} files under {ROOT}; no Spec reaches: {missing or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
