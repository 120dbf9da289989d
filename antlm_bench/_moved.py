"""Old import paths of modules that moved into the stage packages (issue #17), kept working.

Code written against the flat layout (``from antlm_bench.schedule import parse_schedule``,
``import antlm_bench.trainer``) still runs: importing an old name gives the very module object of its new home
(so monkeypatching either name patches both) and emits a DeprecationWarning that names the new place. The
aliases cover submodules too (``antlm_bench.leaderboard.board`` -> ``antlm_bench.results.leaderboard.board``).
New code imports the new names; ``tests/test_layout.py`` checks that nothing inside the package uses an old one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

# old module name -> new module name
MOVED: dict[str, str] = {
    "antlm_bench.corpus": "antlm_bench.data.corpus",
    "antlm_bench.tokenizer": "antlm_bench.data.tokenizer",
    "antlm_bench.data_sources": "antlm_bench.data.sources",
    "antlm_bench.schedule": "antlm_bench.runs.schedule",
    "antlm_bench.objectives": "antlm_bench.training.objectives",
    "antlm_bench.lr_schedules": "antlm_bench.training.lr_schedules",
    "antlm_bench.checkpoint": "antlm_bench.training.checkpoint",
    "antlm_bench.checkpoint_state": "antlm_bench.runs.record",
    "antlm_bench.trainer": "antlm_bench.training.trainer",
    "antlm_bench.tables": "antlm_bench.results.tables",
    "antlm_bench.store": "antlm_bench.results.store",
    "antlm_bench.stats": "antlm_bench.results.stats",
    "antlm_bench.leaderboard": "antlm_bench.results.leaderboard",
    "antlm_bench.check": "antlm_bench.results.check",
    "antlm_bench.finetune": "antlm_bench.adapters.glue",
    "antlm_bench.lm_eval_plugin": "antlm_bench.adapters.lm_eval",
}


def new_name(old: str) -> str | None:
    """The current name of a moved module (or of a submodule of a moved package), else None."""
    for prefix, target in MOVED.items():
        if old == prefix or old.startswith(prefix + "."):
            return target + old[len(prefix):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} has moved to {self.target}; import it from there", DeprecationWarning,
                      stacklevel=2)
        module = importlib.import_module(self.target)
        self._real_spec = module.__spec__
        return module

    def get_code(self, fullname: str):
        # `python -m OLD_NAME` (runpy) runs the new module's code
        return importlib.util.find_spec(self.target).loader.get_code(self.target)

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the alias's spec on the shared module object; give it back its own, so
        # reloads, pickling and `python -m` keep seeing the real module
        module.__spec__ = self._real_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None):
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install() -> None:
    """Put the alias finder on sys.meta_path once (after the normal finders, so real modules always win)."""
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
