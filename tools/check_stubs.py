#!/usr/bin/env python3
"""Check that the type stubs (.pyi) of the compiled modules match the modules themselves.

For every compiled extension module of the package (``morello/_*.so`` beside the imported
package) this reads the stub beside it and compares, both ways:

* the public names (classes, functions, constants) of the module and of each class;
* what each member is: method, classmethod, staticmethod, or attribute/property;
* every signature: parameter names, order, kinds (positional-only, keyword-only, *args,
  **kwargs), which have defaults and the default values written in the stub;
* the C types that Cython embeds in the docstrings (``embedsignature=True``): an argument or
  attribute typed ``int64_t``/``int``/``Py_ssize_t`` must be annotated ``int`` (or
  ``SupportsIndex``...), ``bint`` ``bool``, ``double`` ``float``, and so on;
* ``@final`` on a class that cannot be subclassed at runtime (``@cython.final``).

Signatures come from ``inspect.signature`` (Cython 3 ``binding=True`` functions) and from the
first docstring line Cython embeds (``Cls.meth(self, int64_t i, lo)``; for classes with an
``__init__``, ``Cls(int ndim, int nvalues)``). A constructor implemented only by ``__cinit__``
has no signature at runtime: it is reported as a note, not checked. Cython's own members
(``__pyx_vtable__``, ``__reduce_cython__``, ``__test__``, ``__pyx_capi__`` ...) are ignored.

The stubs are read with ``ast`` (not imported): nothing in them is executed. Names starting with
an underscore (private helpers, type aliases such as ``_Ints``) are not compared, except dunder
methods, and private aliases are expanded when annotations are compared with C types.

Usage:  python tools/check_stubs.py [--package morello] [MODULE ...]
Exit status 0 when every stub matches, 1 with one line per mismatch otherwise, 2 on a usage
or import error.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.machinery
import importlib.util
import inspect
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Members Cython adds on its own, never written in a stub.
CYTHON_INTERNAL = re.compile(r"^(__pyx_.*|.*_cython__|__test__|__pyx_capi__|__loader__|__spec__)$")
# Dunders every class has (or Cython fills in) that a stub need not repeat.
IGNORED_CLASS_DUNDERS = {
    "__doc__", "__module__", "__dict__", "__weakref__", "__slots__", "__qualname__",
    "__annotations__", "__new__", "__init__", "__dealloc__", "__cinit__", "__hash__",
    "__setstate__", "__getstate__", "__init_subclass__", "__subclasshook__", "__class_getitem__",
}
# C types Cython may embed, by the Python types a stub may use for them.
C_INT = re.compile(
    r"^(?:(?:un)?signed\s+)?(?:(?:short|int|long|long\s+long|char|Py_ssize_t|ssize_t|size_t|"
    r"Py_hash_t|Py_UCS4|u?int(?:8|16|32|64)_t|u?intptr_t|npy_u?int(?:8|16|32|64)|npy_intp)"
    r"(?:\s+int)?)$"
)
C_FLOAT = re.compile(r"^(?:long\s+)?(?:float|double|npy_float(?:32|64))$")
C_BOOL = {"bint", "bool"}
ACCEPT = {
    "int": ("int", "SupportsIndex", "SupportsInt", "bool", "Any", "object"),
    "float": ("float", "int", "SupportsFloat", "SupportsIndex", "Any", "object"),
    "bool": ("bool", "int", "Any", "object"),
}
PY_TYPES = {"str", "bytes", "list", "dict", "tuple", "set", "frozenset", "bytearray", "type"}


@dataclass
class StubFunc:
    name: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    kind: str  # "method", "classmethod", "staticmethod", "property"
    overloaded: bool = False


@dataclass
class StubClass:
    name: str
    node: ast.ClassDef
    final: bool
    members: dict[str, StubFunc | ast.expr | None] = field(default_factory=dict)


@dataclass
class Stub:
    path: Path
    classes: dict[str, StubClass] = field(default_factory=dict)
    functions: dict[str, StubFunc] = field(default_factory=dict)
    variables: dict[str, ast.expr | None] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # private names -> their source


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    out = set()
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Name):
            out.add(target.id)
        elif isinstance(target, ast.Attribute):
            out.add(target.attr)  # typing.final, abc.abstractmethod, x.setter
    return out


def _func(node: ast.FunctionDef | ast.AsyncFunctionDef) -> StubFunc:
    decs = _decorator_names(node)
    kind = ("property" if decs & {"property", "cached_property"} else
            "classmethod" if "classmethod" in decs else
            "staticmethod" if "staticmethod" in decs else "method")
    return StubFunc(node.name, node, kind, overloaded="overload" in decs)


def _flatten(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements of a body, with `if`/`try` blocks (e.g. on sys.version_info) inlined."""
    out: list[ast.stmt] = []
    for s in body:
        if isinstance(s, ast.If):
            out += _flatten(s.body) + _flatten(s.orelse)
        elif isinstance(s, ast.Try):
            out += _flatten(s.body)
        else:
            out.append(s)
    return out


def _add_func(table: dict, f: StubFunc) -> None:
    prev = table.get(f.name)
    if isinstance(prev, StubFunc):
        if f.kind == "property" or prev.kind == "property":
            return  # @x.setter / @x.deleter of a property
        prev.overloaded = True
        return
    table[f.name] = f


def parse_stub(path: Path) -> Stub:
    stub = Stub(path)
    tree = ast.parse(path.read_text(), str(path))
    for s in _flatten(tree.body):
        if isinstance(s, ast.ClassDef):
            cls = StubClass(s.name, s, final="final" in _decorator_names(s))
            for m in _flatten(s.body):
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    _add_func(cls.members, _func(m))
                elif isinstance(m, ast.AnnAssign) and isinstance(m.target, ast.Name):
                    cls.members[m.target.id] = m.annotation
                elif isinstance(m, ast.Assign):
                    for t in m.targets:
                        if isinstance(t, ast.Name):
                            cls.members[t.id] = None
            stub.classes[s.name] = cls
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _add_func(stub.functions, _func(s))
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
            name = s.target.id
            if name.startswith("_"):
                if s.value is not None:
                    stub.aliases[name] = ast.unparse(s.value)
            else:
                stub.variables[name] = s.annotation
        elif isinstance(s, ast.Assign):
            for t in s.targets:
                if isinstance(t, ast.Name):
                    if t.id.startswith("_"):
                        stub.aliases[t.id] = ast.unparse(s.value)
                    else:
                        stub.variables[t.id] = None
        elif isinstance(s, getattr(ast, "TypeAlias", ())):  # `type X = ...` (3.12)
            stub.aliases[s.name.id] = ast.unparse(s.value)  # type: ignore[attr-defined]
    return stub


# ---- runtime side -------------------------------------------------------------------------

def _split_params(text: str) -> list[str]:
    """Split a parameter list on top-level commas (defaults may hold brackets, strings)."""
    out, depth, cur, quote = [], 0, "", ""
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def embedded_signature(doc: str | None, name: str) -> tuple[list[str], dict[str, str]] | None:
    """(parameter names, {name: C type}) from a Cython embedsignature docstring line
    ``[Cls.]name(self, int64_t i, lo=...)``, or None when the docstring has none."""
    if not doc:
        return None
    first = doc.lstrip().splitlines()[0] if doc.strip() else ""
    m = re.match(rf"^(?:[\w.]+\.)?{re.escape(name)}\((.*)\)(?:\s*->\s*.*)?$", first)
    if not m:
        return None
    names, ctypes = [], {}
    for p in _split_params(m.group(1)):
        decl = p.split("=", 1)[0].strip()
        if decl in ("/", "*"):
            continue
        words = decl.replace("*", " * ").split()
        pname = words[-1]
        names.append(pname)
        ctype = " ".join(w for w in words[:-1] if w != "*").strip()
        if ctype and not decl.startswith("*"):
            ctypes[pname] = ctype.strip("'\"")
    return names, ctypes


def runtime_signature(obj: Any, name: str) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def c_type_class(ctype: str) -> str | None:
    ctype = ctype.strip().strip("'\"")
    if ctype in C_BOOL:
        return "bool"
    if C_INT.match(ctype):
        return "int"
    if C_FLOAT.match(ctype):
        return "float"
    if ctype in PY_TYPES:
        return ctype
    return None


def annotation_accepts(annotation: str, ctype: str, aliases: dict[str, str]) -> bool:
    """Does a stub annotation admit the Python values the C type ``ctype`` takes?"""
    cls = c_type_class(ctype)
    if cls is None:
        return True  # object, memoryviews, extension types...: not compared
    text = annotation
    for _ in range(5):  # expand private aliases (they may refer to each other)
        new = re.sub(r"\b_\w+\b", lambda m: f"({aliases[m.group(0)]})"
                     if m.group(0) in aliases else m.group(0), text)
        if new == text:
            break
        text = new
    words = set(re.findall(r"[A-Za-z_]\w*", text))
    accepted = ACCEPT.get(cls, (cls, cls.capitalize(), "Any", "object"))
    if cls in PY_TYPES:  # list -> list[...] or typing.List
        accepted = (cls, cls.capitalize(), "Any", "object")
    return bool(words & set(accepted))


# ---- comparison ----------------------------------------------------------------------------

KIND = inspect.Parameter
# A stub parameter: name, kind, default and annotation (the last two None when absent).
StubParam = tuple[str, inspect._ParameterKind, ast.expr | None, ast.expr | None]


def _stub_params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[StubParam]:
    """[(name, kind, default node or None, annotation node or None)] of a stub function."""
    a = node.args
    pos = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    out: list[StubParam] = []
    for i, arg in enumerate(pos):
        posonly = i < len(a.posonlyargs) or (arg.arg.startswith("__")
                                               and not arg.arg.endswith("__"))
        kind = KIND.POSITIONAL_ONLY if posonly else KIND.POSITIONAL_OR_KEYWORD
        out.append((arg.arg, kind, defaults[i], arg.annotation))
    if a.vararg:
        out.append((a.vararg.arg, KIND.VAR_POSITIONAL, None, a.vararg.annotation))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        out.append((arg.arg, KIND.KEYWORD_ONLY, d, arg.annotation))
    if a.kwarg:
        out.append((a.kwarg.arg, KIND.VAR_KEYWORD, None, a.kwarg.annotation))
    return out


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return False, None


def _fmt(sig: inspect.Signature | list[str]) -> str:
    return str(sig) if isinstance(sig, inspect.Signature) else f"({', '.join(sig)})"


def compare_signature(where: str, stub: StubFunc | None,
                      node: ast.FunctionDef | ast.AsyncFunctionDef | None,
                      rt_obj: Any, rt_name: str, drop_first: bool, aliases: dict[str, str],
                      errors: list[str], notes: list[str], doc: str | None = None) -> None:
    node = node or (stub.node if stub else None)
    assert node is not None
    if stub is not None and stub.overloaded:
        notes.append(f"{where}: overloaded in the stub; signature not compared")
        return
    sig = runtime_signature(rt_obj, rt_name) if rt_obj is not None else None
    embedded = embedded_signature(doc if doc is not None else getattr(rt_obj, "__doc__", None),
                                  rt_name)
    if sig is not None and any(p.kind is KIND.VAR_POSITIONAL for p in sig.parameters.values()) \
            and embedded is not None:
        sig = None  # a generic (*args, **kwargs) wrapper: the docstring knows better
    if sig is None and embedded is None:
        notes.append(f"{where}: the compiled module exposes no signature; not compared")
        return
    sparams = _stub_params(node)
    if drop_first and sparams and sparams[0][1] not in (KIND.VAR_POSITIONAL, KIND.VAR_KEYWORD):
        sparams = sparams[1:]
    ctypes: dict[str, str] = embedded[1] if embedded else {}
    if sig is not None:
        rparams = list(sig.parameters.values())
        if drop_first and rparams and rparams[0].kind not in (KIND.VAR_POSITIONAL,
                                                              KIND.VAR_KEYWORD):
            rparams = rparams[1:]
        rt_desc = _fmt(sig)
    else:
        assert embedded is not None
        names = embedded[0][1:] if drop_first and not doc else embedded[0]
        rparams = []
        for n in names:
            kind = (KIND.VAR_KEYWORD if n.startswith("**") else
                    KIND.VAR_POSITIONAL if n.startswith("*") else KIND.POSITIONAL_OR_KEYWORD)
            rparams.append(inspect.Parameter(n.lstrip("*"), kind))
        rt_desc = _fmt(embedded[0])
    stub_desc = "(" + ", ".join(n for n, *_ in _stub_params(node)) + ")"
    dunder = rt_name.startswith("__") and rt_name.endswith("__")
    problems: list[str] = []

    spos = [p for p in sparams if p[1] in (KIND.POSITIONAL_ONLY, KIND.POSITIONAL_OR_KEYWORD)]
    rpos = [p for p in rparams if p.kind in (KIND.POSITIONAL_ONLY, KIND.POSITIONAL_OR_KEYWORD)]
    s_var = any(p[1] is KIND.VAR_POSITIONAL for p in sparams)
    r_var = any(p.kind is KIND.VAR_POSITIONAL for p in rparams)
    s_kw = any(p[1] is KIND.VAR_KEYWORD for p in sparams)
    r_kw = any(p.kind is KIND.VAR_KEYWORD for p in rparams)
    for i in range(max(len(spos), len(rpos))):
        s = spos[i] if i < len(spos) else None
        r = rpos[i] if i < len(rpos) else None
        if s is None:
            assert r is not None
            if not s_var:
                problems.append(f"stub lacks parameter {r.name!r}")
            continue
        if r is None:
            if not r_var:
                problems.append(f"compiled module has no parameter {s[0]!r}")
            continue
        sname = s[0]
        positional_only_stub = s[1] is KIND.POSITIONAL_ONLY
        if sname != r.name and not positional_only_stub and r.kind is not KIND.POSITIONAL_ONLY:
            problems.append(f"parameter {i + 1} is {r.name!r}, stub says {sname!r}")
        if (r.kind is KIND.POSITIONAL_ONLY and not positional_only_stub and not dunder):
            problems.append(f"parameter {r.name!r} is positional-only, not in the stub")
        _compare_default(s, r, problems)
        _compare_ctype(s, r.name, ctypes, aliases, problems)
    skw = {p[0]: p for p in sparams if p[1] is KIND.KEYWORD_ONLY}
    rkw = {p.name: p for p in rparams if p.kind is KIND.KEYWORD_ONLY}
    for n in skw.keys() - rkw.keys():
        if not r_kw:
            problems.append(f"compiled module has no keyword-only parameter {n!r}")
    for n in rkw.keys() - skw.keys():
        if not s_kw:
            problems.append(f"stub lacks keyword-only parameter {n!r}")
    for n in skw.keys() & rkw.keys():
        _compare_default(skw[n], rkw[n], problems)
        _compare_ctype(skw[n], n, ctypes, aliases, problems)
    if s_var and not r_var:
        problems.append("stub takes *args, the compiled module does not")
    if s_kw and not r_kw:
        problems.append("stub takes **kwargs, the compiled module does not")
    if problems:
        errors.append(f"{where}: {'; '.join(problems)} (compiled: {rt_desc}; stub: {stub_desc})")


def _compare_default(s: StubParam, r: inspect.Parameter, problems: list[str]) -> None:
    sdefault = s[2]
    rdefault = r.default
    if rdefault is KIND.empty and sdefault is not None:
        problems.append(f"parameter {r.name!r} has a default in the stub but not at runtime")
    elif rdefault is not KIND.empty and sdefault is None:
        problems.append(f"parameter {r.name!r} has a default ({rdefault!r}) at runtime "
                        "but not in the stub")
    elif sdefault is not None and not (isinstance(sdefault, ast.Constant)
                                       and sdefault.value is Ellipsis):
        ok, value = _literal(sdefault)
        if ok and rdefault != value:
            problems.append(f"parameter {r.name!r} defaults to {rdefault!r} at runtime, "
                            f"to {value!r} in the stub")


def _compare_ctype(s: StubParam, name: str, ctypes: dict[str, str], aliases: dict[str, str],
                   problems: list[str]) -> None:
    ann = s[3]
    if ann is None or name not in ctypes:
        return
    text = ast.unparse(ann)
    if not annotation_accepts(text, ctypes[name], aliases):
        problems.append(f"parameter {name!r} is {ctypes[name]} in the compiled module, "
                        f"annotated {text!r} in the stub")


def runtime_kind(obj: Any) -> str:
    if isinstance(obj, (classmethod, types.ClassMethodDescriptorType)):
        return "classmethod"
    if isinstance(obj, staticmethod):
        return "staticmethod"
    if isinstance(obj, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
        return "attribute"
    if callable(obj) or isinstance(obj, (types.MethodDescriptorType,
                                         types.WrapperDescriptorType)):
        return "method"
    return "attribute"


def check_class(modname: str, stub_cls: StubClass, cls: type, aliases: dict[str, str],
                errors: list[str], notes: list[str]) -> None:
    qual = f"{modname}.{stub_cls.name}"
    subclassable = bool(cls.__flags__ & (1 << 10))  # Py_TPFLAGS_BASETYPE
    if not subclassable and not stub_cls.final:
        errors.append(f"{qual}: cannot be subclassed at runtime (@cython.final); "
                      "mark it @final in the stub")
    elif subclassable and stub_cls.final:
        errors.append(f"{qual}: @final in the stub but can be subclassed at runtime")
    own = vars(cls)
    for name, member in stub_cls.members.items():
        where = f"{qual}.{name}"
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            continue
        if name in ("__init__", "__new__"):
            if not isinstance(member, StubFunc):
                continue
            doc_sig = embedded_signature(cls.__doc__, cls.__name__)
            if "__init__" in own and doc_sig is not None:
                compare_signature(where, member, None, None, cls.__name__, True, aliases,
                                  errors, notes, doc=cls.__doc__)
            else:
                notes.append(f"{where}: the constructor is implemented by __cinit__ (no "
                             "signature at runtime); not compared")
            continue
        if not hasattr(cls, name):
            errors.append(f"{where}: in the stub, missing from the compiled module")
            continue
        rt = own.get(name, getattr(cls, name))
        rkind = runtime_kind(rt)
        if isinstance(member, StubFunc):
            skind = "attribute" if member.kind == "property" else member.kind
            if skind != rkind:
                errors.append(f"{where}: a {rkind} in the compiled module, "
                              f"a {member.kind} in the stub")
                continue
            if member.kind == "property":
                _check_attr_type(where, member.node.returns, rt, aliases, errors)
            else:
                func = rt.__func__ if isinstance(rt, (classmethod, staticmethod)) else rt
                compare_signature(where, member, None, func, name,
                                  member.kind != "staticmethod", aliases, errors, notes)
        else:
            if rkind != "attribute":
                errors.append(f"{where}: a {rkind} in the compiled module, "
                              "an attribute in the stub")
                continue
            _check_attr_type(where, member, rt, aliases, errors)
    for name, rt in own.items():
        if name in stub_cls.members or CYTHON_INTERNAL.match(name):
            continue
        if getattr(rt, "__name__", "").endswith("_cython__"):
            continue  # Cython's pickling support (__reduce__ = __reduce_cython__)
        if name.startswith("__") and name.endswith("__"):
            if name in IGNORED_CLASS_DUNDERS or hasattr(object, name):
                continue
        elif name.startswith("_"):
            continue
        errors.append(f"{qual}.{name}: a public {runtime_kind(rt)} of the compiled module, "
                      "missing from the stub")


def _check_attr_type(where: str, ann: ast.expr | None, rt: Any, aliases: dict[str, str],
                     errors: list[str]) -> None:
    doc = getattr(rt, "__doc__", None) or ""
    m = re.match(r"^\s*\w+\s*:\s*'?([\w\s]+?)'?\s*$", doc.splitlines()[0] if doc else "")
    if ann is None or not m:
        return
    text = ast.unparse(ann)
    if not annotation_accepts(text, m.group(1), aliases):
        errors.append(f"{where}: {m.group(1)} in the compiled module, annotated {text!r} "
                      "in the stub")


def check_module(modname: str, stub_path: Path) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    notes: list[str] = []
    mod = importlib.import_module(modname)
    stub = parse_stub(stub_path)
    for name, scls in stub.classes.items():
        rt = getattr(mod, name, None)
        if rt is None:
            errors.append(f"{modname}.{name}: class in the stub, missing from the compiled module")
        elif not isinstance(rt, type):
            errors.append(f"{modname}.{name}: a class in the stub, a {type(rt).__name__} "
                          "in the compiled module")
        else:
            check_class(modname, scls, rt, stub.aliases, errors, notes)
    for name, f in stub.functions.items():
        rt = getattr(mod, name, None)
        if rt is None:
            errors.append(f"{modname}.{name}: function in the stub, missing from the compiled "
                          "module")
        elif not callable(rt):
            errors.append(f"{modname}.{name}: a function in the stub, a {type(rt).__name__} "
                          "in the compiled module")
        else:
            compare_signature(f"{modname}.{name}", f, None, rt, name, False, stub.aliases,
                              errors, notes)
    for name in stub.variables:
        if not hasattr(mod, name):
            errors.append(f"{modname}.{name}: in the stub, missing from the compiled module")
    declared = stub.classes.keys() | stub.functions.keys() | stub.variables.keys()
    for name, obj in vars(mod).items():
        if name.startswith("_") or name in declared or isinstance(obj, types.ModuleType):
            continue
        owner = getattr(obj, "__module__", modname) if isinstance(obj, type) or callable(obj) \
            else modname
        if owner != modname:
            continue  # imported from elsewhere (numpy, typing...), not this module's API
        what = "class" if isinstance(obj, type) else "function" if callable(obj) else "name"
        errors.append(f"{modname}.{name}: a public {what} of the compiled module, "
                      "missing from the stub")
    return errors, notes


def compiled_modules(package: str) -> list[tuple[str, Path, Path]]:
    """(module name, compiled file, stub path) of every extension module of the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"check_stubs: package {package!r} is not importable; "
                         "install it first (pip install -e . --no-build-isolation)")
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    out = []
    for loc in spec.submodule_search_locations:
        for so in sorted(Path(loc).iterdir()):
            suffix = next((s for s in suffixes if so.name.endswith(s)), None)
            if suffix is not None and so.is_file():
                name = so.name[: -len(suffix)]
                out.append((f"{package}.{name}", so, so.with_name(name + ".pyi")))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*",
                    help="modules to check (default: every compiled module of the package)")
    ap.add_argument("--package", default="morello")
    ap.add_argument("-v", "--verbose", action="store_true", help="also print notes")
    args = ap.parse_args(argv)
    found = compiled_modules(args.package)
    if args.modules:
        found = [f for f in found if f[0] in args.modules]
        missing = set(args.modules) - {f[0] for f in found}
        if missing:
            print(f"check_stubs: no compiled module {', '.join(sorted(missing))}",
                  file=sys.stderr)
            return 2
    if not found:
        print(f"check_stubs: no compiled module in package {args.package!r} (not built?)",
              file=sys.stderr)
        return 2
    total: list[str] = []
    for modname, so, stub_path in found:
        if not stub_path.exists():
            total.append(f"{modname}: compiled module {so.name} has no stub {stub_path.name}")
            continue
        try:
            errors, notes = check_module(modname, stub_path)
        except ImportError as exc:
            print(f"check_stubs: cannot import {modname}: {exc}", file=sys.stderr)
            return 2
        total += errors
        status = f"{len(errors)} mismatch{'es' * (len(errors) != 1)}" if errors else "ok"
        print(f"{stub_path} vs {so.name}: {status}")
        if args.verbose:
            for n in notes:
                print(f"  note: {n}")
    if total:
        print(f"\n{len(total)} stub mismatch{'es' * (len(total) != 1)} (fix the .pyi, or "
              "rebuild if the compiled modules are stale: pip install -e . "
              "--no-build-isolation):", file=sys.stderr)
        for line in total:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
