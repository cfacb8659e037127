"""The docs cannot silently rot: their marked walkthroughs run, their links resolve, the
plot in docs/performance.md is what its command draws from recorded figures, and the
README stays short.

A fenced block whose info string is ``python walkthrough`` runs as one script; in a
``sh walkthrough`` block each line ``morello ARGS`` runs as ``python -m morello ARGS``.
Each must exit 0 (the Python blocks assert what they show). They run outside the source
tree, with the built-in constants, no shipped database and a fresh cache directory.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_BYTES = 12_000
FENCE = re.compile(r"^```(\w+) walkthrough\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _blocks(lang: str) -> list:
    """(doc name, block number, text) of every ``LANG walkthrough`` block, as params."""
    out = []
    for doc in DOCS:
        name = doc.relative_to(ROOT).as_posix()
        for i, m in enumerate(m for m in FENCE.finditer(doc.read_text()) if m[1] == lang):
            out.append(pytest.param(name, i, m[2], id=f"{name}:{i}"))
    return out


def _run(cmd: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MORELLO_CALIBRATION="builtin", MORELLO_SHIPPED_DB="off",
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)


def test_the_docs_have_walkthroughs_to_run():
    # A renamed marker would otherwise leave the tests below with nothing to run.
    assert len(_blocks("python")) >= 3 and len(_blocks("sh")) >= 1


@pytest.mark.parametrize("doc, index, code", _blocks("python"))
def test_python_walkthrough_runs(doc, index, code, tmp_path):
    proc = _run([sys.executable, "-c", code], tmp_path)
    assert proc.returncode == 0, f"{doc}, python block {index}:\n{proc.stderr[-2000:]}"


@pytest.mark.parametrize("doc, index, text", _blocks("sh"))
def test_shell_walkthrough_runs(doc, index, text, tmp_path):
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines
    for line in lines:
        words = shlex.split(line, comments=True)
        assert words[0] == "morello", f"{doc}: only `morello ...` lines can run: {line}"
        proc = _run([sys.executable, "-m", "morello", *words[1:]], tmp_path)
        assert proc.returncode == 0, f"{doc}: {line}\n{proc.stderr[-2000:]}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    return {_slug(m[1]) for m in re.finditer(r"^#+ (.*)$", doc.read_text(), re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_relative_link_points_to_an_existing_file(doc):
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{doc.name}: links to nothing: {broken}"


def test_the_readme_stays_short_and_opens_with_its_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= README_MAX_BYTES
    lines = text.splitlines()
    assert lines[3].startswith("pip install . && morello bench matmul 64 64 64")
    assert lines[4].startswith("pip install '.[test]' && pytest -n auto")


def _plot():
    spec = importlib.util.spec_from_file_location("plot", ROOT / "benchmarks" / "plot.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_plotted_figures_are_the_recorded_ones():
    plot = _plot()
    results = ROOT / "benchmarks" / "results"
    csv = plot.read_table(results / "2026-12-05-avx2-matmul-1thread.csv")
    # The first paired.py table of the dated document is its one-thread one.
    assert csv == plot.read_table(results / "2026-12-05-host-fit.md")


def test_the_svg_in_the_docs_is_what_its_documented_command_draws(tmp_path):
    text = (ROOT / "docs" / "performance.md").read_text()
    cmd = re.search(r"^python benchmarks/plot\.py .*?(?<!\\)$", text, re.M | re.S)
    assert cmd is not None
    args = shlex.split(cmd[0].replace("\\\n", " "))[2:]
    out = args.index("-o") + 1
    want, args[out] = ROOT / args[out], str(tmp_path / "plot.svg")
    args[0] = str(ROOT / args[0])
    assert _plot().main(args) == 0
    assert (tmp_path / "plot.svg").read_text() == want.read_text()
    assert want.name in text  # and the document shows it
