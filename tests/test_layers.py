"""The import graph keeps its layers: the store below the search, the algebra below the
rewrites, the emitter below the API (``tools/layers.py``)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("layers", ROOT / "tools" / "layers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_module_imports_above_its_layer():
    layers = _tool()
    g = layers.graph(ROOT)
    assert "morello.store.file" in g and "morello.codegen.emit" in g
    assert layers.broken(g) == []
    lv = layers.layers(g)
    assert max(lv[m] for m in g if m.startswith("morello.store")) < lv["morello.search"]


def test_an_upward_import_is_reported():
    layers = _tool()
    g = {"morello.store.file": {"morello.search"}, "morello.search": set()}
    assert layers.broken(g) == ["morello.store.file imports morello.search (rule: "
                                "morello.store stays below morello.search)"]


def test_a_cycle_shares_one_layer():
    layers = _tool()
    lv = layers.layers({"a": {"b"}, "b": {"a", "c"}, "c": set()})
    assert lv == {"a": 1, "b": 1, "c": 0}
