"""The import graph of morello's modules, in layers, and the rules it must keep.

    python tools/layers.py [ROOT]      (ROOT: a checkout, default this one)

A module's layer is one more than the highest layer among the morello modules it imports
(imports inside functions count: they are the same dependency, only later); modules in
an import cycle share one layer. Prints each layer's modules, then any broken rule, and
exits 1 if there is one. The rules: the store sits below the search (it is handed what
it needs), the algebra below the rewrites, the emitter below the API.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

# (modules matching this prefix, may not import modules matching these prefixes)
RULES = [
    ("morello.store", ("morello.search", "morello.api", "morello.cli", "morello.db",
                       "morello.precompute", "morello.identity", "morello.rewrites")),
    ("morello.kinds", ("morello.rewrites", "morello.search", "morello.api", "morello.store")),
    ("morello.specs", ("morello.rewrites", "morello.search", "morello.api", "morello.store")),
    ("morello.tensorspec", ("morello.rewrites", "morello.search", "morello.api")),
    ("morello.codegen", ("morello.search", "morello.api", "morello.cli", "morello.store",
                         "morello.db")),
    ("morello.kernels", ("morello.search", "morello.api", "morello.cli", "morello.store")),
]


def modules(root: Path) -> dict[str, Path]:
    """Module name -> source file, for morello/ and codegen/ (``morello.codegen``)."""
    out = {}
    for base, package in ((root / "morello", "morello"), (root / "codegen", "morello.codegen")):
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".py", ".pyx") or "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    text = path.read_text()
    if path.suffix == ".pyx":  # Cython's cimport lines are not Python: read plain imports
        text = "\n".join(line for line in text.splitlines()
                         if line.startswith(("import ", "from ")) and " cimport " not in line)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    package = name if path.name.startswith("__init__") else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join([*base, mod] if mod else base)
            for a in node.names:  # a submodule by name, else a name of the module
                sub = f"{mod}.{a.name}"
                found.add(sub if sub in known else mod)
    out = set()
    for f in found:
        while f and f not in known:
            f = f.rpartition(".")[0]
        if f and f != name:
            out.add(f)
    return out


def graph(root: Path) -> dict[str, set[str]]:
    mods = modules(root)
    known = set(mods)
    return {name: _imports(path, name, known) for name, path in mods.items()}


def layers(g: dict[str, set[str]]) -> dict[str, int]:
    """Each module's layer (Tarjan's components, then longest path from the bottom)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    comp: dict[str, int] = {}
    comps: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is the import depth: small
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w not in comp:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                comp[w] = len(comps)
                members.append(w)
                if w == v:
                    break
            comps.append(members)

    for v in sorted(g):
        if v not in index:
            visit(v)
    level: dict[int, int] = {}
    for c, members in enumerate(comps):  # Tarjan emits components dependencies first
        deps = {comp[w] for v in members for w in g[v]} - {c}
        level[c] = 1 + max((level[d] for d in deps), default=-1)
    return {v: level[comp[v]] for v in g}


def broken(g: dict[str, set[str]]) -> list[str]:
    out = []
    for prefix, banned in RULES:
        for mod, deps in sorted(g.items()):
            if mod == prefix or mod.startswith(prefix + "."):
                out.extend(f"{mod} imports {d} (rule: {prefix} stays below {b})"
                           for d in sorted(deps) for b in banned
                           if d == b or d.startswith(b + "."))
    return out


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    g = graph(root)
    lv = layers(g)
    for n in range(max(lv.values()) + 1):
        names = sorted(m for m, v in lv.items() if v == n)
        print(f"layer {n}: {', '.join(names)}")
    bad = broken(g)
    for b in bad:
        print(f"broken: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
