"""The prose maps are held by tests, so that they cannot lag the code: every package's docstring names each of its
modules, no package facade exports a private name, each class a map names exists, and every arrow the layer table allows is one the code uses (an
arrow nobody uses is a dependency the table invites for no reason)."""

from __future__ import annotations

import ast
import re

from test_layout import ALLOWED, PACKAGE, ROOT, SHARED, _imports, _modules, _shared, _stage, _within


def _docstring(path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def test_each_package_docstring_names_its_modules():
    missing = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        package = init.parent
        if not any(package.glob("*.py")) or package.name.startswith("_"):
            continue
        doc = _docstring(init)
        members = [p.stem for p in package.glob("*.py") if p.stem != "__init__" and not p.stem.startswith("_")]
        members += [d.name for d in package.iterdir() if (d / "__init__.py").is_file()]
        for name in sorted(members):
            # a module is named as a word (``name``, name.py, name/): "check" inside "checkpoint" does not count
            if not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", doc):
                missing.append(f"{init.relative_to(ROOT)}: its docstring never names {name}")
    assert not missing, "\n".join(missing)


def test_no_package_facade_exports_a_private_name():
    private = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                names = [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
                private += [f"{init.relative_to(ROOT)}: __all__ exports {n}" for n in names if n.startswith("_")]
    assert not private, "\n".join(private)


def test_every_allowed_arrow_is_used():
    modules = _modules()
    used: set[tuple[str, str]] = set()
    for name, path in modules.items():
        stage = _stage(name) if _shared(name) is None else _shared(name)
        for _, target in _imports(path, modules):
            used.add((stage, target))
    unused = []
    for stage, entries in ALLOWED.items():
        for entry in sorted(entries):
            if not any(s == stage and _within(target, entry) for s, target in used):
                unused.append(f"ALLOWED[{stage!r}] names {entry}, which no module of {stage} imports")
    for shared, entries in SHARED.items():
        for entry in sorted(entries):
            if not any(s == shared and _within(target, entry) for s, target in used):
                unused.append(f"SHARED[{shared!r}] names {entry}, which {shared} never imports")
    assert not unused, "\n".join(unused)


def test_each_class_a_package_docstring_names_exists():
    """A ``CamelCase`` name (or ``Class.method``) a package's map gives is a class (or method) defined in the
    package: a map still naming a class after its rename (training's once named ``Reporting`` for ``Reporter``,
    ``StopOnSignal`` for ``StopSignal``) fails here."""
    stale = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        package = init.parent
        classes: dict[str, set[str]] = {}
        for path in package.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    classes.setdefault(node.name, set()).update(
                        item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
        for quoted in re.findall(r"``([A-Z][A-Za-z0-9]*[a-z]\w*(?:\.\w+)?)``", _docstring(init)):
            name, _, method = quoted.partition(".")
            if name not in classes or (method and method not in classes[name]):
                stale.append(f"{init.relative_to(ROOT)}: its docstring names ``{quoted}``, which no module of "
                             f"{package.relative_to(ROOT)} defines")
    assert not stale, "\n".join(stale)
