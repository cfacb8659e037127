"""The compiled modules of an in-place (editable) build are not older than their sources.

``pip install -e .`` compiles ``morello/_*.pyx`` once; editing a ``.pyx`` or a ``.pxd`` it
cimports afterwards leaves the old ``.so`` in place and the tests would run the old code. This
fails with the stale modules and the newer sources, and says how to rebuild.

Only an in-place build is compared: when the imported package is not inside a source checkout
(a wheel or ``--target`` install), its modules were built from a copy of the sources that is
not at hand, and the test skips.
"""
from __future__ import annotations

import importlib.machinery
import re
from pathlib import Path

import pytest

import morello

PKG_DIR = Path(morello.__file__).resolve().parent
PKG = morello.__name__
REBUILD = "pip install -e . --no-build-isolation"

# `cimport morello._memo`, `from morello._memo cimport X`, `from . cimport _memo`,
# `from ._memo cimport X`; `include "x.pxi"`; `cdef extern from "x.h"`.
_CIMPORT = re.compile(
    r"^\s*(?:from\s+([\w.]+)\s+cimport\s+\(?\s*([\w, ]+)|cimport\s+([\w.]+))", re.M)
_INCLUDE = re.compile(r"""^\s*(?:include|cdef\s+extern\s+from)\s+["']([^"']+)["']""", re.M)


def compiled_modules(pkg_dir: Path) -> dict[str, Path]:
    """{module stem: compiled file} of a package directory."""
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    out = {}
    for f in pkg_dir.iterdir():
        suffix = next((s for s in suffixes if f.name.endswith(s)), None)
        if suffix is not None and f.is_file():
            out[f.name[: -len(suffix)]] = f
    return out


def _local_pxd(module: str, pkg_dir: Path, pkg: str) -> Path | None:
    """The package's own .pxd for a cimported dotted name (None for libc, numpy...)."""
    if module.startswith("."):
        parts = [p for p in module.lstrip(".").split(".") if p]
    elif module.split(".")[0] == pkg:
        parts = module.split(".")[1:]
    else:
        return None
    if not parts:
        return None
    path = pkg_dir.joinpath(*parts).with_suffix(".pxd")
    return path if path.is_file() else None


def sources_of(stem: str, pkg_dir: Path, pkg: str) -> set[Path]:
    """The .pyx of a compiled module, its .pxd, and every package-local .pxd, .pxi and header
    they cimport or include, transitively."""
    todo = [p for p in (pkg_dir / f"{stem}.pyx", pkg_dir / f"{stem}.pxd") if p.is_file()]
    seen: set[Path] = set()
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        text = f.read_text(errors="replace")
        for m in _CIMPORT.finditer(text):
            if m.group(3):  # cimport a.b
                names = [m.group(3)]
            elif m.group(1) in (pkg, ".") or set(m.group(1)) == {"."}:
                # from pkg cimport a, b / from . cimport a: the names may be modules
                names = [f"{m.group(1)}.{n.split(' as ')[0].strip()}".replace("..", ".")
                         for n in m.group(2).split(",")]
            else:  # from pkg.a cimport X
                names = [m.group(1)]
            for name in names:
                pxd = _local_pxd(name, pkg_dir, pkg)
                if pxd is not None:
                    todo.append(pxd)
        for m in _INCLUDE.finditer(text):
            inc = (f.parent / m.group(1)).resolve()
            if inc.is_file() and inc.is_relative_to(pkg_dir):
                todo.append(inc)
    return seen


def in_source_checkout(pkg_dir: Path) -> bool:
    root = pkg_dir.parent
    return (root / "pyproject.toml").is_file() and (root / "setup.py").is_file()


def test_compiled_modules_are_not_older_than_their_sources() -> None:
    if not in_source_checkout(PKG_DIR):
        pytest.skip(f"{PKG} is installed at {PKG_DIR}, not built in place in a source "
                    "checkout: the sources it was built from are not here to compare")
    stale = []
    for stem, so in sorted(compiled_modules(PKG_DIR).items()):
        built = so.stat().st_mtime_ns
        newer = sorted(str(p.relative_to(PKG_DIR.parent)) for p in sources_of(stem, PKG_DIR, PKG)
                       if p.stat().st_mtime_ns > built)
        if newer:
            stale.append(f"{PKG}/{so.name} is older than {', '.join(newer)}")
    assert not stale, ("stale compiled modules, the tests would run old code: "
                       + "; ".join(stale) + f". Rebuild with `{REBUILD}`")


def test_sources_of_follows_local_cimports_and_includes(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    files = {
        "_a.pyx": "cimport cython\nfrom libc.stdint cimport int64_t\n"
                  "from pkg._b cimport B\ncimport pkg._c\nfrom . cimport _d\n"
                  "from ._e cimport E as F\ninclude \"_inc.pxi\"\n"
                  "cdef extern from \"_hdr.h\":\n    pass\n",
        "_a.pxd": "", "_b.pxd": "from pkg cimport _g\n", "_c.pxd": "", "_d.pxd": "",
        "_e.pxd": "", "_g.pxd": "", "_inc.pxi": "", "_hdr.h": "",
        "_b.pyx": "", "_unrelated.pxd": "",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    got = {p.name for p in sources_of("_a", pkg, "pkg")}
    assert got == {"_a.pyx", "_a.pxd", "_b.pxd", "_c.pxd", "_d.pxd", "_e.pxd", "_g.pxd",
                   "_inc.pxi", "_hdr.h"}
