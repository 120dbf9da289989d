"""The package's layering, written once: the stages, what each owns and which stages it may import (the tables
below; docs/layout.md points here), checked against the source: imports run one way and form no cycle."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "antlm_bench"

# The stages, in the order the data flows (data -> tokenizer -> model -> trainer -> checkpoint -> scorer -> result
# table -> leaderboard, check). stage (a module-name prefix; a module belongs to the longest one that names it) ->
# the stages it may import besides itself and the SHARED modules. An entry may name a part of a stage
# ("antlm_bench.results.tables"); it never reaches into a stage of its own ("antlm_bench.results" does not
# include "antlm_bench.results.leaderboard"). Imports inside functions count.
ALLOWED: dict[str, set[str]] = {
    # the data folder (--data-dir, $ANTLM_BENCH_DATA, the cache), file readers (jsonl, xz, password zips in memory,
    # JSON with one-line errors), hashes and atomic writes, `data fetch`, the training corpus, the BPE tokenizer
    "antlm_bench.data": set(),
    # the lm-eval task folders shipped for `lm_eval --include_path` and the hook that reads their data
    "antlm_bench.lm_eval_tasks": {"antlm_bench.data"},
    # one architecture per file (babyllama, ltgbert, hf), the backend interface, masks, the loss
    "antlm_bench.models": {"antlm_bench.data"},
    # log-likelihoods and pseudo-log-likelihoods of token sequences, batched by a token budget
    "antlm_bench.scoring": {"antlm_bench.models", "antlm_bench.data"},
    # tasks built on scoring: minimal pairs, the BabyLM 2025 tasks, GLUE fine-tuning and probes, the lm-eval model;
    # heldout's MLM loss corrupts its text with the trainer's own masking (training.objectives), never a copy of it
    "antlm_bench.adapters": {"antlm_bench.scoring", "antlm_bench.models", "antlm_bench.data",
                             "antlm_bench.training.objectives", "antlm_bench.results.tables",
                             "antlm_bench.results.stats"},
    # the result rows' schema (tables), the results store, the statistics: below every stage that writes rows
    "antlm_bench.results": {"antlm_bench.data"},
    # leaderboards over results folders: reads the rows, never writes a stage's output
    "antlm_bench.results.leaderboard": {"antlm_bench.results", "antlm_bench.data"},
    # the regression gate: a leaderboard of the results against one of the baseline
    "antlm_bench.results.check": {"antlm_bench.results", "antlm_bench.results.leaderboard"},
    # objectives, learning-rate schedules, checkpoint folders, the trainer and its parts; phase scores come through a
    # scorer the caller passes in, so nothing here imports evaluation
    "antlm_bench.training": {"antlm_bench.models", "antlm_bench.data", "antlm_bench.results.tables",
                             "antlm_bench.results.store"},
    # tasks x model -> result rows
    "antlm_bench.evaluate": {"antlm_bench.adapters", "antlm_bench.scoring", "antlm_bench.models", "antlm_bench.data",
                             "antlm_bench.results.tables", "antlm_bench.results.store"},
    # a checkpoint as a plain Hugging Face model folder
    "antlm_bench.export": {"antlm_bench.models", "antlm_bench.data"},
    # `antlm-bench run`: train per seed, evaluate, reuse what is finished; a RunConfig's GLUE flags become GLUE's
    # typed options (adapters.glue.options) there, so that run and each sweep cell refuse a bad one alike
    "antlm_bench.pipeline": {"antlm_bench.training", "antlm_bench.evaluate", "antlm_bench.models", "antlm_bench.data",
                             "antlm_bench.results", "antlm_bench.adapters.glue.options"},
    # `antlm-bench sweep`: a grid of `run` cells (each its own process), its executors and --until-decided's rounds
    "antlm_bench.sweep": {"antlm_bench.pipeline", "antlm_bench.results", "antlm_bench.results.leaderboard",
                          "antlm_bench.data"},
}
# The commands (`antlm-bench`, `python -m antlm_bench`): the top, they may import anything; nothing imports them.
TOP = {"antlm_bench.cli", "antlm_bench.__main__"}
# Shared by every stage (any stage may import them): module or package -> the only things it may import itself.
SHARED: dict[str, set[str]] = {
    # the package itself: its version
    "antlm_bench": set(),
    # the error contract (UserError, exit codes)
    "antlm_bench.errors": set(),
    # command-line values every stage shares, parsed once at the edge (the seeds grammar)
    "antlm_bench.options": {"antlm_bench.errors"},
    # the typed job configuration (run's sections, each option a field with its flag and help): what the CLI flags,
    # `run --config` files, sweep cells and the pipeline's input are derived from; config files through data's reader
    "antlm_bench.config": {"antlm_bench.errors", "antlm_bench.options", "antlm_bench.data"},
    # UTC now, as every record writes it
    "antlm_bench.clock": set(),
    # progress output, one way for every stage: the bar (lines off a terminal), a stage's lines, the clock they show
    "antlm_bench.progress": set(),
    # one writer per folder, the fault-injection points
    "antlm_bench.locking": {"antlm_bench.errors"},
    # the scoring conventions (babylm-2025, babylm-2024)
    "antlm_bench.conventions": {"antlm_bench.errors"},
    # the registries of task classes, recipes and backends (names -> "module:Class", loaded on first lookup)
    "antlm_bench.registry": {"antlm_bench.errors", "antlm_bench.data"},  # spec files through data's bounded reader
    # trainer recipes (trainers/*.yaml) and task specs (tasks/*.yaml), validated
    "antlm_bench.recipes": {"antlm_bench.errors", "antlm_bench.registry"},
    "antlm_bench.tasks": {"antlm_bench.errors", "antlm_bench.registry"},
    # the run's contract at the bottom of the stack: the schedule grammar, the checkpoint record, the run folder;
    # a run's label and seed obey the one grammar of the command line (options: parse_label, MAX_SEED)
    "antlm_bench.runs": {"antlm_bench.errors", "antlm_bench.data", "antlm_bench.options"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module) of every antlm_bench import in the file: imports inside functions included, imports under
    ``if TYPE_CHECKING:`` left out (they never run); ``from antlm_bench.x import y`` imports ``antlm_bench.x``, and
    ``antlm_bench.x.y`` too when ``y`` is a submodule."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.orelse:
                    visit_one(statement)
            else:
                visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "antlm_bench":
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                         if f"{node.module}.{alias.name}" in modules)
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "antlm_bench")
        visit(node)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _stage(module: str) -> str | None:
    """The most specific ALLOWED key that ``module`` belongs to."""
    keys = [key for key in ALLOWED if _within(module, key)]
    return max(keys, key=len) if keys else None


def _shared(module: str) -> str | None:
    """The SHARED entry ``module`` is (the package ``antlm_bench`` by its exact name only), else None."""
    keys = [key for key in SHARED if module == key or (key != "antlm_bench" and _within(module, key))]
    return max(keys, key=len) if keys else None


def _may_import(stage: str, target: str) -> bool:
    if _shared(target) is not None or _stage(target) == stage:
        return True
    return any(_within(target, entry) and _stage(target) == _stage(entry) for entry in ALLOWED[stage])


def test_imports_run_one_way():
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        if any(_within(name, top) for top in TOP):
            continue
        shared = _shared(name)
        stage = _stage(name)
        assert shared or stage, f"{name}: in no stage; add it to ALLOWED or SHARED in tests/project/test_layout.py"
        for line, target in _imports(path, modules):
            if shared == "antlm_bench":
                ok = False
            elif shared is not None:  # its own package, what its entry names, the package's version
                ok = target == "antlm_bench" or any(_within(target, entry) for entry in {shared, *SHARED[shared]})
            else:
                ok = _may_import(stage, target)
            if not ok:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {shared or stage} imports {target}")
    assert not wrong, ("imports against the flow (tests/project/test_layout.py's ALLOWED and SHARED):\n"
                       + "\n".join(wrong))


def _import_graph() -> dict[str, set[str]]:
    """module -> the antlm_bench modules importing it runs: each module an import names, and the packages above it
    (importing a package runs its ``__init__``), except the importer's own packages, which already ran."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        own_packages = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        targets = set()
        for _, target in _imports(path, modules):
            parts = target.split(".")
            targets.update(prefix for prefix in (".".join(parts[:i]) for i in range(1, len(parts) + 1))
                           if prefix in modules and prefix != name and prefix not in own_packages)
        graph[name] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def test_the_cycle_finder_finds_what_it_should():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}, "g": {"g"}}
    assert import_cycles(graph) == [["a", "b", "c"], ["e", "f"]]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycles():
    cycles = import_cycles(_import_graph())
    assert not cycles, f"{len(cycles)} import cycle(s), {sum(map(len, cycles))} modules:\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles)


def test_the_import_graph_sees_lazy_imports_and_skips_type_checking_ones(tmp_path):
    source = tmp_path / "example.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from antlm_bench.models import hf\n"
                      "else:\n    import antlm_bench.errors\n"
                      "def f():\n    from antlm_bench.results import tables\n", encoding="utf-8")
    modules = _modules()
    found = {module for _, module in _imports(source, modules)}
    assert found == {"antlm_bench.errors", "antlm_bench.results", "antlm_bench.results.tables"}


def test_every_antlm_bench_import_names_a_module_that_exists():
    """Old module paths (the flat layout before 0.1.0) are gone; the package, tests and benchmarks import the
    modules where they live."""
    modules = _modules()
    missing = []
    for folder in (PACKAGE, ROOT / "tests", ROOT / "benchmarks"):
        for path in sorted(folder.rglob("*.py")):
            if path == Path(__file__).resolve():
                continue
            missing.extend(f"{path.relative_to(ROOT)}:{line}: {module}"
                           for line, module in _imports(path, modules) if module not in modules)
    assert not missing, missing


def test_class_trainer_has_at_most_one_base():
    """The Trainer holds its parts (explicit constructor arguments), it does not inherit them as mixins."""
    tree = ast.parse((PACKAGE / "training" / "trainer.py").read_text(encoding="utf-8"))
    (trainer,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Trainer"]
    assert len(trainer.bases) <= 1, [ast.unparse(base) for base in trainer.bases]


def test_no_import_hook_is_installed():
    """No compatibility aliases before 1.0: importing the package puts no finder of ours on sys.meta_path."""
    code = ("import sys, antlm_bench, antlm_bench.cli\n"
            "ours = [f for f in sys.meta_path if type(f).__module__.startswith('antlm_bench')]\n"
            "assert not ours, ours\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_entry_points_and_scripts_resolve():
    """Console scripts and plug-in entry points in pyproject name importable objects."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    targets = list(project.get("scripts", {}).values())
    for group in project.get("entry-points", {}).values():
        targets.extend(group.values())
    assert targets
    for target in targets:
        module, _, attr = target.partition(":")
        loaded = importlib.import_module(module)
        if attr:
            assert hasattr(loaded, attr), target


def test_python_dash_m_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "antlm_bench", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "Usage" in done.stdout
