"""Commands that need no model import neither torch nor transformers (#54): a board, a gate, a plan, a typo are
answered in well under a second on an idle machine instead of after the trainer's import. Each command runs in a
fresh interpreter (imports are per process) and reports the heavy modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from leaderboard_tables import write_run

HEAVY = ("torch", "transformers")
ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import json, sys
from antlm_bench.cli import main
sys.argv = ["antlm-bench", *json.loads(sys.argv[1])]
code = 0
try:
    main()
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "heavy": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)


def _heavy_imports(args: list[str], cwd: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("startup")
    rng = np.random.default_rng(0)
    for seed in (1, 2):
        for schedule in ("1_CLM", "1_MLM"):
            write_run(root, f"{schedule}-s{seed}", [{"phase_index": 0, "tasks": {"blimp": {
                "a": (rng.random(40) < 0.6) * 1.0}}}], schedule=schedule, seed=seed)
    return root


COMMANDS = {
    "help": ["--help"],
    "a command's help": ["run", "--help"],
    "list": ["list"],
    "schedule": ["schedule", "4_CLM+16_MLM+4_CLM"],
    "leaderboard": ["leaderboard", "{results}"],
    "a committed board": ["leaderboard", "-d", "mini-antlm-ltgbert"],
    "check": ["check", "--results", "{results}", "--baseline", "{results}"],
    "power": ["power", "{results}"],
    "plan": ["plan", "-k", "2", "--seed-sd", "0.5", "--gap", "1", "--max-seeds", "4", "--reps", "200"],
    "data verify": ["data", "verify", "--data-dir", "{results}"],
    "a missing results folder": ["leaderboard", "{results}/missing"],
    "a missing model": ["eval", "--model", "{results}/missing", "--tasks", "blimp"],
    "a mistyped recipe": ["run", "--model", "antlm-babylama"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_model_free_command_imports_no_model_library(name, results):
    args = [a.format(results=results) for a in COMMANDS[name]]
    report = _heavy_imports(args, ROOT)
    assert report["heavy"] == [], f"antlm-bench {' '.join(args)} imported {report['heavy']}"


def test_a_shipped_task_is_a_pair_task_exactly_when_its_class_is_a_minimal_pair_task():
    """The board tells a pair task (chance 50%) without importing a shipped adapter outside the minimal-pair
    module (heldout and GLUE import torch): that shortcut agrees with every shipped class's lineage."""
    import importlib

    from antlm_bench.registry import SHIPPED_TASK_CLASSES
    from antlm_bench.results.leaderboard.definition import PAIR_TASKS_MODULE, two_choice_task
    from antlm_bench.tasks import resolve_tasks

    for name, path in SHIPPED_TASK_CLASSES.items():
        module, _, attribute = path.partition(":")
        cls = getattr(importlib.import_module(module), attribute)
        is_pairs = any(base.__name__ == "MinimalPairTask" for base in cls.__mro__)
        assert is_pairs == (module == PAIR_TASKS_MODULE), name
    for task in ("blimp", "blimp_supplement", "ewok", "heldout", "glue", "wug_adj", "entity_tracking"):
        (request,) = resolve_tasks(task)
        module = SHIPPED_TASK_CLASSES[request.spec.class_name].partition(":")[0]
        assert two_choice_task(task) == (module == PAIR_TASKS_MODULE), task
