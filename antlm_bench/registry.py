"""Registries of task specs and trainer recipes, lm-eval style.

A task or recipe is a small YAML file (``tasks/*.yaml``, ``trainers/*.yaml``) that names a Python class: a task's
``class:`` is a name in :data:`TASK_CLASSES`, a recipe's ``architecture:`` one in :data:`BACKENDS`. YAML folders are
searched in this order: the ``--include-path`` folders the user gives, folders that other packages announce through
the entry point groups ``antlm_bench.tasks`` / ``antlm_bench.trainers`` (each entry point returns a folder path),
and the folders shipped with antlm-bench (the checkout's top-level ``tasks/`` and ``trainers/``, or their copies
bundled in the wheel). The first file that defines a name wins, so a user's folder can override a shipped spec.

The class registries (:class:`ClassRegistry`) map names to ``"module:Class"`` strings for the shipped classes,
imported on first lookup, and read the entry-point groups ``antlm_bench.task_classes`` / ``antlm_bench.backends``
for third-party ones; :func:`register_task_class` / :func:`register_backend` add a class from code.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from antlm_bench.errors import UserError, one_line

_PACKAGE_DIR = Path(__file__).resolve().parent
T = TypeVar("T")


def shipped_folder(kind: str) -> Path:
    """The shipped ``tasks``/``trainers``/``leaderboards`` folder: the checkout's, else the wheel's copy."""
    source_tree = _PACKAGE_DIR.parent / kind
    if source_tree.is_dir():
        return source_tree
    return _PACKAGE_DIR / "_bundled" / kind


def is_bundled(path: Path) -> bool:
    """True when ``path`` is in the wheel's copy of the shipped folders (``antlm_bench/_bundled``, pyproject.toml),
    which holds definitions only: a study's committed results stay in the source repository."""
    return (_PACKAGE_DIR / "_bundled") in Path(path).resolve().parents


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
    from antlm_bench.data.readers import read_text  # bounded, regular files only: a FIFO or /dev/zero never ends

    text = read_text(path, "save it as a UTF-8 YAML file")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise UserError(f"{where}: invalid YAML ({getattr(err, 'problem', err)})") from None
    except RecursionError:
        raise UserError(f"{path}: YAML nested too deeply; fix the file") from None
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
    """Name -> Python class, resolved on first lookup, as lm-eval's ``MODEL_MAPPING``.

    Three sources, in this order: classes registered from code with :meth:`register` (a user's script or a
    plug-in's module), the shipped classes (``shipped``: name -> ``"module:Class"``, imported only when looked up,
    so that importing the registry imports no stage), and third-party classes announced through the entry-point
    group ``group`` (``name = "package.module:Class"``, loaded when that name is looked up). Every class must
    derive from ``base`` (``"module:Class"``, the interface's abstract base class) and define its abstract methods;
    one that does not, or a plug-in that fails to import, is one line naming it.
    """

    def __init__(self, what: str, shipped: dict[str, str], base: str, group: str) -> None:
        self.what = what
        self.shipped = dict(shipped)
        self.base = base
        self.group = group
        self._registered: dict[str, type] = {}
        self._classes: dict[str, type] = {}  # resolved and checked, from any source
        self._entry_points: dict[str, importlib.metadata.EntryPoint] | None = None  # the group, read once

    def shipped_module(self, name: str) -> str | None:
        """The module of the shipped class ``name`` would be imported from, without importing it; None when ``name``
        is not a shipped class or a class registered from code takes its place."""
        if name in self._registered or name not in self.shipped:
            return None
        return self.shipped[name].partition(":")[0]

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """A class decorator: ``@register(name)`` adds the class under ``name`` (before the shipped ones)."""

        def decorator(cls: type[T]) -> type[T]:
            self._registered[name] = cls
            self._classes.pop(name, None)
            return cls

        return decorator

    def _plugins(self) -> dict[str, importlib.metadata.EntryPoint]:
        if self._entry_points is None:
            self._entry_points = {ep.name: ep for ep in importlib.metadata.entry_points(group=self.group)}
        return self._entry_points

    def names(self) -> list[str]:
        """Every name a lookup accepts (nothing is imported to list them)."""
        return sorted({*self._registered, *self.shipped, *self._plugins()})

    def __contains__(self, name: object) -> bool:
        return name in self._registered or name in self.shipped or name in self._plugins()

    def get(self, name: str, where: str) -> type:
        """The class registered as ``name``; ``where`` (a file, a field) starts the line that refuses a name."""
        if name not in self._classes:
            self._classes[name] = self._checked(*self._load(name, where))
        return self._classes[name]

    def _load(self, name: str, where: str) -> tuple[object, str]:
        """(what ``name`` names, how to call it in an error line)."""
        if name in self._registered:
            return self._registered[name], f"{self.what} {name!r}"
        if name in self.shipped:
            return _import_object(self.shipped[name]), f"{self.what} {name!r} ({self.shipped[name]})"
        entry_point = self._plugins().get(name)
        if entry_point is None:
            raise UserError(f"{where}: unknown {self.what} {name!r}; known: {', '.join(self.names()) or 'none'}")
        dist = getattr(entry_point.dist, "name", None) or "unknown distribution"
        origin = f"{self.what} plug-in {entry_point.name} = {entry_point.value} ({dist})"
        try:
            return entry_point.load(), origin
        except Exception as err:  # noqa: BLE001  (any failure of foreign code: name the plug-in, stop)
            raise UserError(f"{origin}: cannot import it ({one_line(err, typed=True)}); fix or uninstall "
                            "the plug-in") from None

    def _checked(self, target: object, origin: str) -> type:
        base = _import_object(self.base)
        base_name = self.base.replace(":", ".")
        if not (isinstance(target, type) and issubclass(target, base)):
            shown = f"{target.__module__}.{target.__qualname__}" if isinstance(target, type) else repr(target)
            raise UserError(f"{origin}: {shown} is not a subclass of {base_name}; derive it from that class")
        missing = sorted(target.__abstractmethods__) if inspect.isabstract(target) else []
        if missing:
            raise UserError(f"{origin}: {target.__qualname__} does not define {', '.join(missing)} (abstract in "
                            f"{base_name})")
        return target


def _import_object(path: str) -> object:
    """The object that ``"package.module:Name"`` names."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


# the shipped classes, by the names that task specs (``class:``) and recipes (``architecture:``) give
SHIPPED_TASK_CLASSES = {
    "MinimalPairTask": "antlm_bench.adapters.minimal_pairs:MinimalPairTask",
    "EwokTask": "antlm_bench.adapters.minimal_pairs:EwokTask",
    "EntityTrackingTask": "antlm_bench.adapters.babylm2025.entity_tracking:EntityTrackingTask",
    "WugAdjTask": "antlm_bench.adapters.babylm2025.wug:WugAdjTask",
    "ReadingTask": "antlm_bench.adapters.babylm2025.reading:ReadingTask",
    "GlueTask": "antlm_bench.adapters.glue:GlueTask",
    "HeldoutLossTask": "antlm_bench.adapters.heldout:HeldoutLossTask",
}
SHIPPED_BACKENDS = {
    "babyllama": "antlm_bench.models.babyllama:BabyLlamaBackend",
    "ltgbert": "antlm_bench.models.ltgbert:LtgBertBackend",
    "hf": "antlm_bench.models.hf:HfBackend",
}

TASK_CLASSES = ClassRegistry("task class", SHIPPED_TASK_CLASSES, base="antlm_bench.adapters.base:TaskAdapter",
                             group="antlm_bench.task_classes")
BACKENDS = ClassRegistry("architecture backend", SHIPPED_BACKENDS, base="antlm_bench.models.backend:Backend",
                         group="antlm_bench.backends")
register_task_class = TASK_CLASSES.register
register_backend = BACKENDS.register
