"""Registries of task specs and trainer recipes, lm-eval style.

A task or recipe is a small YAML file (``tasks/*.yaml``, ``trainers/*.yaml``) that names a Python class
registered with :func:`register_task_class` or :func:`register_backend`. Folders are searched in this order:
the ``--include-path`` folders the user gives, folders that other packages announce through the entry point
groups ``antlm_bench.tasks`` / ``antlm_bench.trainers`` (each entry point returns a folder path), and the
folders shipped with antlm-bench (the checkout's top-level ``tasks/`` and ``trainers/``, or their copies
bundled in the wheel). The first file that defines a name wins, so a user's folder can override a shipped spec.

Model backends come from ``antlm_bench.models`` and from other packages through the entry-point group
``antlm_bench.backends`` (see :func:`load_backend_plugins`).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from antlm_bench.errors import UserError

_PACKAGE_DIR = Path(__file__).resolve().parent
T = TypeVar("T")


def shipped_folder(kind: str) -> Path:
    """The shipped ``tasks``/``trainers``/``leaderboards`` folder: the checkout's, else the wheel's copy."""
    source_tree = _PACKAGE_DIR.parent / kind
    if source_tree.is_dir():
        return source_tree
    return _PACKAGE_DIR / "_bundled" / kind


_include_paths: list[Path] = []


def add_include_path(path: str | Path) -> None:
    """Search ``path`` for task specs and recipes before the shipped ones (``--include-path``)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise UserError(f"--include-path {folder}: not a folder")
    if folder not in _include_paths:
        _include_paths.insert(0, folder)


def _entry_point_folders(group: str) -> list[Path]:
    folders = []
    for entry_point in importlib.metadata.entry_points(group=group):
        target = entry_point.load()
        folders.append(Path(target() if callable(target) else target))
    return folders


def search_folders(kind: str) -> list[Path]:
    """Folders holding ``kind`` ('tasks' or 'trainers') YAML files, highest priority first."""
    user = [p / kind if (p / kind).is_dir() else p for p in _include_paths]
    return user + _entry_point_folders(f"antlm_bench.{kind}") + [shipped_folder(kind)]


def load_yaml(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise UserError(f"{where}: invalid YAML ({getattr(err, 'problem', err)})") from None
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text (byte {err.start}); save it as UTF-8") from None
    if not isinstance(document, dict):
        raise UserError(f"{path}: expected a mapping at the top level")
    return document


def discover(kind: str) -> dict[str, tuple[Path, dict[str, Any]]]:
    """name -> (file, parsed YAML) for every spec of ``kind``; earlier folders win."""
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for folder in search_folders(kind):
        for path in sorted(folder.glob("*.yaml")):
            document = load_yaml(path)
            name = document.get("name") or document.get("group")
            if not name:
                raise UserError(f"{path}: missing field 'name'")
            found.setdefault(str(name), (path, document))
    return found


class ClassRegistry:
    """Name -> Python class, filled by decorators at import time."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._classes: dict[str, type] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        def decorator(cls: type[T]) -> type[T]:
            self._classes[name] = cls
            return cls

        return decorator

    def get(self, name: str, where: str) -> type:
        if name not in self._classes:
            known = ", ".join(sorted(self._classes)) or "none"
            raise UserError(f"{where}: unknown {self.what} {name!r}; known: {known}")
        return self._classes[name]

    def names(self) -> list[str]:
        return sorted(self._classes)


TASK_CLASSES = ClassRegistry("task class")
BACKENDS = ClassRegistry("architecture backend")
register_task_class = TASK_CLASSES.register
register_backend = BACKENDS.register


BACKEND_GROUP = "antlm_bench.backends"
_backend_plugins_loaded = False


def load_backend_plugins() -> None:
    """Register the shipped backends, then every entry point of ``antlm_bench.backends`` (once per process).

    An entry point names a module (importing it registers its backends with ``@register_backend``) or a backend
    class, registered under the entry point's name unless it registered itself. A plug-in that fails to import
    is one line naming the entry point and its distribution.
    """
    global _backend_plugins_loaded
    if _backend_plugins_loaded:
        return
    _backend_plugins_loaded = True  # set first: a plug-in importing antlm_bench.models comes back here
    import antlm_bench.models  # noqa: F401  (the shipped backends register themselves)

    for entry_point in importlib.metadata.entry_points(group=BACKEND_GROUP):
        try:
            target = entry_point.load()
        except Exception as err:  # noqa: BLE001  (any failure of foreign code: name the plug-in, stop)
            _backend_plugins_loaded = False
            dist = getattr(entry_point.dist, "name", None) or "unknown distribution"
            raise UserError(f"backend plug-in {entry_point.name} = {entry_point.value} ({dist}): cannot import it "
                            f"({type(err).__name__}: {err}); fix or uninstall the plug-in") from None
        if isinstance(target, type) and entry_point.name not in BACKENDS.names():
            BACKENDS.register(entry_point.name)(target)
