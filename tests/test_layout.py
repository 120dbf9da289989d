"""The package's layout (issue #17): stage packages whose imports run one way, modules of a readable size, and the
old flat import paths still working as the very modules of their new homes."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from antlm_bench._moved import MOVED, new_name

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "antlm_bench"

MAX_MODULE_LINES = 400  # "about 400": a model file (models/) keeps one model's math in one place and may run longer
MAX_CLASS_LINES = 200

# Modules every stage may use: errors, locks, the registries and their declarative files, the scoring conventions,
# and the two records that cross stages: the schedule grammar and a checkpoint's state record (written by the
# trainer, read by every scorer and by the leaderboard).
SHARED = {"antlm_bench", "antlm_bench._moved", "antlm_bench.errors", "antlm_bench.locking", "antlm_bench.registry",
          "antlm_bench.recipes", "antlm_bench.tasks", "antlm_bench.conventions", "antlm_bench.runs.schedule",
          "antlm_bench.runs.record", "antlm_bench.runs"}
RESULT_ROWS = {"antlm_bench.results.tables", "antlm_bench.results.store", "antlm_bench.results.stats"}
# stage -> the stages (module-name prefixes) it may import, besides itself and SHARED. The flow:
# cli -> pipeline -> (training, evaluate) -> (adapters -> scoring) -> models -> data; result rows are written by
# evaluation and training and read by the leaderboard and check, which sit at the end of the flow.
ALLOWED = {
    "antlm_bench.data": set(),
    "antlm_bench.lm_eval_tasks": {"antlm_bench.data"},
    "antlm_bench.models": {"antlm_bench.data"},
    "antlm_bench.scoring": {"antlm_bench.models", "antlm_bench.data"},
    "antlm_bench.adapters": {"antlm_bench.scoring", "antlm_bench.models", "antlm_bench.data", *RESULT_ROWS},
    "antlm_bench.results": {"antlm_bench.data"},  # rows, store and statistics: below the stages that write rows
    "antlm_bench.results.leaderboard": {"antlm_bench.results", "antlm_bench.data"},
    "antlm_bench.results.check": {"antlm_bench.results", "antlm_bench.data"},
    "antlm_bench.training": {"antlm_bench.models", "antlm_bench.data", *RESULT_ROWS},
    "antlm_bench.evaluate": {"antlm_bench.adapters", "antlm_bench.scoring", "antlm_bench.models", "antlm_bench.data",
                             "antlm_bench.training.checkpoint", *RESULT_ROWS},
    "antlm_bench.export": {"antlm_bench.models", "antlm_bench.data"},
    "antlm_bench.pipeline": {"antlm_bench.training", "antlm_bench.evaluate", "antlm_bench.adapters",
                             "antlm_bench.scoring", "antlm_bench.models", "antlm_bench.data", "antlm_bench.results"},
}
TOP = {"antlm_bench.cli", "antlm_bench.__main__"}  # the commands may import anything


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every antlm_bench import in the file, function-level (lazy) imports included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("antlm_bench"):
            found.append((node.lineno, node.module))
            # "from antlm_bench.results import stats" imports a module too
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                         if (PACKAGE / Path(*node.module.split(".")[1:], alias.name)).exists()
                         or (PACKAGE / Path(*node.module.split(".")[1:], alias.name + ".py")).exists())
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names if a.name.startswith("antlm_bench"))
    return found


def _stage(module: str) -> str | None:
    """The most specific ALLOWED key that ``module`` belongs to."""
    keys = [k for k in ALLOWED if module == k or module.startswith(k + ".")]
    return max(keys, key=len) if keys else None


def _within(module: str, prefixes: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_imports_run_one_way():
    wrong = []
    for name, path in _modules().items():
        if _within(name, TOP) or name in SHARED:
            continue
        stage = _stage(name)
        assert stage is not None, f"{name}: no stage; add it to ALLOWED in this test (and to the layout docs)"
        allowed = {stage} | ALLOWED[stage]  # prefixes; SHARED are exact names ("antlm_bench" is not a prefix)
        for line, target in _imports(path):
            target = new_name(target) or target
            if not _within(target, allowed) and target not in SHARED:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {stage} imports {target}")
    assert not wrong, "imports against the flow:\n" + "\n".join(wrong)


def test_shared_modules_import_no_stage_at_module_level():
    """errors, locking, registry, ... are used by every stage, so they import no stage but the bottom one (data)
    when loaded (a registry may load the shipped backends or adapters lazily, on first lookup)."""
    wrong = []
    for name in SHARED - {"antlm_bench", "antlm_bench._moved"}:
        path = _modules()[name]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("antlm_bench"):
                if node.module not in SHARED and not _within(node.module, {"antlm_bench.data"}):
                    wrong.append(f"{name}:{node.lineno}: {node.module}")
    assert not wrong, wrong


def test_module_and_class_sizes():
    too_long = []
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES and not name.startswith("antlm_bench.models."):
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES \
                    and not name.startswith("antlm_bench.models."):
                too_long.append(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not too_long, too_long


def test_no_code_uses_an_old_import_path():
    """The aliases are for users' code; ours (package, tests, benchmarks) imports the new homes."""
    old = []
    for folder in (PACKAGE, ROOT / "tests", ROOT / "benchmarks"):
        for path in folder.rglob("*.py"):
            if path.name == "test_layout.py":
                continue
            old.extend(f"{path.relative_to(ROOT)}:{line}: {module} -> {new_name(module)}"
                       for line, module in _imports(path) if new_name(module))
    assert not old, old


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_import_path_is_the_new_module(old):
    if old in sys.modules:  # imported by an earlier test: it warned then
        module = importlib.import_module(old)
    else:
        with pytest.warns(DeprecationWarning, match=f"{old} has moved to {MOVED[old]}"):
            module = importlib.import_module(old)
    new = importlib.import_module(MOVED[old])
    assert module is new and sys.modules[old] is new
    assert module.__spec__.name == MOVED[old]  # the real module keeps its own spec (reload, pickling, -m)


def test_old_paths_warn_and_name_the_new_place():
    code = ("import warnings; warnings.simplefilter('always')\n"
            "from antlm_bench.schedule import parse_schedule\n"
            "import antlm_bench.leaderboard.board as board\n"
            "import antlm_bench.results.leaderboard.board as new\n"
            "assert board is new and parse_schedule('2_CLM').canonical\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "antlm_bench.schedule has moved to antlm_bench.runs.schedule" in done.stderr
    assert "antlm_bench.leaderboard has moved to antlm_bench.results.leaderboard" in done.stderr


def test_a_patch_through_the_old_name_reaches_the_new_module(monkeypatch):
    import antlm_bench.results.tables as tables

    old = importlib.import_module("antlm_bench.tables")
    monkeypatch.setattr(old, "current_git_commit", lambda: "patched")
    assert tables.current_git_commit() == "patched"


def test_unknown_modules_still_fail_as_usual():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("antlm_bench.no_such_module")


def test_entry_points_and_scripts_resolve():
    """Console scripts and plug-in entry points in pyproject name importable objects at their new homes."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    targets = list(project.get("scripts", {}).values())
    for group in project.get("entry-points", {}).values():
        targets.extend(group.values())
    assert targets
    for target in targets:
        module, _, attr = target.partition(":")
        assert new_name(module) is None, f"{target}: an old path; point it at {new_name(module)}"
        loaded = importlib.import_module(module)
        if attr:
            assert hasattr(loaded, attr), target


def test_python_dash_m_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "antlm_bench", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "Usage" in done.stdout


def test_python_dash_m_on_an_old_module_path_runs_the_new_module():
    """docs once said ``python -m antlm_bench.lm_eval_plugin``; it runs the module's new home."""
    done = subprocess.run([sys.executable, "-m", "antlm_bench.lm_eval_plugin", "--help"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower()
