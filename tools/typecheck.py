#!/usr/bin/env python3
"""Run mypy on the package as it is installed, from the source checkout.

pyproject.toml maps the package ``morello.codegen`` to the top-level folder ``codegen/``
(``[tool.setuptools.package-dir]``), a layout mypy cannot discover from the file system: given
``codegen/`` it would check ``codegen.emit`` and fail to resolve ``morello.codegen``. This script
lets mypy collect the files named by ``[tool.mypy] files`` (or on the command line) as usual,
renames every module under a mapped folder to its installed name, and runs the build, so the
whole package is checked as one with errors reported against the real paths.

Usage: python tools/typecheck.py [mypy options and files]   (run from anywhere)
Exit status: 0 clean, 1 type errors, 2 blocking error or bad usage (as mypy).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import process_options
from mypy.modulefinder import BuildSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # mypy depends on tomli before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def package_dirs(pyproject: Path) -> dict[Path, str]:
    """Folder (absolute) -> package name, from [tool.setuptools.package-dir]."""
    conf = tomllib.loads(pyproject.read_text())
    mapping = conf.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    return {(pyproject.parent / d).resolve(): pkg for pkg, d in mapping.items() if pkg}


def remap(sources: list[BuildSource], dirs: dict[Path, str]) -> list[BuildSource]:
    out = []
    for s in sources:
        if s.path:
            path = Path(s.path).resolve()
            for d, pkg in dirs.items():
                if path.is_relative_to(d):
                    rel = path.relative_to(d).with_suffix("")
                    parts = [p for p in rel.parts if p != "__init__"]
                    s = BuildSource(s.path, ".".join([pkg, *parts]), s.text, str(ROOT))
                    break
        out.append(s)
    return out


def main(argv: list[str]) -> int:
    os.chdir(ROOT)  # [tool.mypy] files are relative to the project root
    fscache = FileSystemCache()
    sources, options = process_options(argv, fscache=fscache)
    sources = remap(sources, package_dirs(ROOT / "pyproject.toml"))
    seen: dict[str, str | None] = {}
    for s in sources:
        if s.module in seen and seen[s.module] != s.path:
            print(f"error: module {s.module} found twice: {seen[s.module]} and {s.path}",
                  file=sys.stderr)
            return 2
        seen[s.module] = s.path
    try:
        res = build.build(sources, options, fscache=fscache)
        messages = res.errors
        blocking = False
    except CompileError as e:
        messages = e.messages
        blocking = True
    for m in messages:
        print(m)
    n_errors = sum(": error:" in m for m in messages)
    files = {m.split(":", 1)[0] for m in messages if ": error:" in m}
    if n_errors:
        print(f"Found {n_errors} error{'s' * (n_errors != 1)} in {len(files)} "
              f"file{'s' * (len(files) != 1)} (checked {len(sources)} source files)")
        return 2 if blocking else 1
    print(f"Success: no issues found in {len(sources)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
