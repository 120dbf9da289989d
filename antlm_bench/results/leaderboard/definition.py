"""Leaderboard definitions (``leaderboards/<name>.yaml``) and the names every part of the board shares."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from antlm_bench.errors import UserError, validation_line

DEFAULT_TASKS = ("blimp", "blimp_supplement", "ewok", "glue")


def macro_label(tasks: Sequence[str]) -> str:
    """What an average of ``tasks`` is called wherever it is shown: "macro" means one thing, the AntLM paper's
    four-task macro (BLiMP, supplement, EWoK, GLUE); any other average is named by the tasks it averages
    (``mean(blimp,blimp_supplement,ewok)``), so that two numbers called "macro" are always the same quantity. No
    task: "macro" (a board without one shows '-' there: the paper's macro is not on it)."""
    if not tasks or sorted(tasks) == sorted(DEFAULT_TASKS):
        return MACRO
    return f"mean({','.join(tasks)})"
DEFAULT_GROUP_BY = ("recipe", "preset", "schedule")
# config_fingerprint: the run record's hash of the recipe's content, preset, schedule and convention; the board
# splits a group whose runs record two of them even when it is not named here (board._split_configurations)
# label: run --label (runs.identity); a board not grouped by it shows a labelled run's schedule as
# "SCHEDULE [label]" (board._group_key), so labelled runs never pool with unlabelled ones
GROUP_KEYS = ("recipe", "architecture", "preset", "schedule", "seed", "run_id", "limit", "data_hash",
              "config_fingerprint", "label")
# when a checkpoint was scored several ways and its last phase does not decide, the first of these wins
SCORING_PREFERENCE = ("clm", "pll", "mntp", "pll-word-l2r", "finetune", "finetune-official", "probe")
# GLUE's methods (adapters/glue): their rows' seed is the fine-tuning seed, not the training seed
FINETUNED_SCORING = ("finetune", "finetune-official", "probe")
# a linear probe is a different measurement from fine-tuning, and fine-tuning under the BabyLM 2025 pipeline's
# protocol (best epoch chosen on the reported split) another: their rows get their own column
SEPARATE_SCORING = ("probe", "finetune-official")
REQUIRED_COLUMNS = ("run_id", "task", "subtask", "metric", "value", "scoring")
Z95 = 1.959963984540054
MACRO = "macro"
EVAL_SETS = ("full", "fast")


@dataclass(frozen=True)
class MetricKind:
    """How the board, ``check`` and the macro treat one metric: its unit, its direction, and where its per-item
    values come from (the items table's columns)."""

    unit: str  # printed after a value or a gap: "%" for fractions shown x100, else the metric's own unit
    scale: float  # shown value = stored value x scale
    lower_is_better: bool = False
    in_macro: bool = True  # averaged with the other tasks into the macro (never a loss or a margin with accuracies)
    item_value: str | None = None  # the per-item value whose subtask mean is the metric, for item-level statistics
    digits: int = 1  # decimals shown
    words: str = ""  # what it is, for the footnotes
    # the values the metric can take (stored units; None: unbounded on that side): an interval is cut there, and
    # called uninformative when it is wider than the whole range (board.bound_interval)
    bounds: tuple[float | None, float | None] = (0.0, 1.0)
    # measured per token of the model's own tokenizer: rows that may tokenize differently (another recipe, preset
    # or corpus) measure in different units, and their gap is not tested
    per_token: bool = False


# every metric that is not named here is a fraction shown as a percentage, higher is better (accuracy, F1, GLUE's
# score, reading's eye_tracking ...); a metric that is not a percentage or not "higher is better" must be here
METRICS: dict[str, MetricKind] = {
    "accuracy": MetricKind("%", 100.0, item_value="correct"),
    "margin": MetricKind("nats", 1.0, in_macro=False, item_value="margin", digits=3,
                         words="margin: mean of log P(good) - log P(bad) over the pairs, in nats, higher is better",
                         bounds=(None, None)),
    "loss": MetricKind("nats/token", 1.0, lower_is_better=True, in_macro=False, item_value="value", digits=3,
                       words="loss: held-out pre-training text, nats per token, LOWER is better; compared only "
                             "between rows of one recipe, preset and corpus (one tokenizer)",
                       bounds=(0.0, None), per_token=True),
    # a rank correlation (WUG): shown x100 like the percentages, but it runs from -1 to 1
    "spearman": MetricKind("%", 100.0, bounds=(-1.0, 1.0)),
}
PERCENT = MetricKind("%", 100.0)
# metrics that are a task's number of their own, never a subtask's way of being scored under another metric
# (GLUE's MRPC and QQP subtasks report F1, which scores their share of GLUE's "score"; a margin never does)
SEPARATE_METRICS = frozenset(name for name, kind in METRICS.items() if not kind.in_macro)


def metric_kind(metric: str | None) -> MetricKind:
    """The metric's kind; a metric not in ``METRICS`` is a percentage, higher is better."""
    return METRICS.get(metric or "", PERCENT)


def separate_metric_columns(rows: Iterable[Mapping[str, Any]], tasks: Iterable[str]) -> list[str]:
    """``task.metric`` columns for the separate metrics (margin) that ``tasks`` report beside their main one, in
    the order of ``tasks``: what a board without a definition (and ``check``) shows beside each task. A task whose
    only metric is a separate one (heldout's loss) is its own column already."""
    metrics: dict[str, set[str]] = {}
    for row in rows:
        if row["subtask"] == "":
            metrics.setdefault(row["task"], set()).add(row["metric"])
    return [f"{task}.{metric}" for task in tasks for metric in sorted(metrics.get(task, set()) & SEPARATE_METRICS)
            if metrics[task] - SEPARATE_METRICS]
@functools.cache
def two_choice_task(task: str) -> bool:
    """A task of pairs (BLiMP, supplement, EWoK: its spec's adapter is a ``MinimalPairTask``): chance is 50%."""
    from antlm_bench.registry import TASK_CLASSES
    from antlm_bench.tasks import resolve_tasks

    try:
        (request,) = resolve_tasks(task)
        # a shipped class outside the minimal-pair module is no pair task: decided without importing its module,
        # which may import torch (heldout, GLUE), so that a board imports no model library (tests/cli/test_startup.py
        # checks this against every shipped class's lineage)
        module = TASK_CLASSES.shipped_module(request.spec.class_name)
        if module is not None and module != PAIR_TASKS_MODULE:
            return False
        # else by the class's lineage, through the registry
        cls = TASK_CLASSES.get(request.spec.class_name, where=f"{request.spec.source}: field class")
        return any(base.__name__ == "MinimalPairTask" for base in cls.__mro__)
    except Exception:  # noqa: BLE001  (a column of another package's task: its chance level is unknown)
        return False


TWO_CHOICE_CHANCE = 0.5  # a two-way choice guessed at random: 50%
PAIR_TASKS_MODULE = "antlm_bench.adapters.minimal_pairs"  # the shipped MinimalPairTask and its subclasses


def chance_level(column: str, metric: str) -> float | None:
    """Chance on a board column, in stored units: 0.5 for a two-way choice task's accuracy (``blimp``), 0 nats for
    its margin (``blimp.margin``: no preference); None where there is no single chance level (GLUE, whose floor is
    each member's majority class; a loss; a macro; another package's task)."""
    task, _, suffix = column.partition(".")
    if not two_choice_task(task):
        return None
    if metric == "margin" and suffix in ("", "margin"):
        return 0.0
    return TWO_CHOICE_CHANCE if metric == "accuracy" and not suffix else None


# ----------------------------------------------------------------------------------------------------------
# definitions


class LeaderboardDefinition(BaseModel):
    """``leaderboards/<name>.yaml``: which runs, tasks and metrics a leaderboard holds."""

    model_config = ConfigDict(extra="forbid")

    name: str = "results"
    description: str = ""
    results: list[str] = []  # globs, relative to the definition file
    tasks: list[str] = list(DEFAULT_TASKS)
    macro_tasks: list[str] | None = None  # default: the four AntLM tasks that are among ``tasks``
    metrics: dict[str, str] = {}  # task -> metric of its task-level row (default: score, else accuracy)
    group_by: list[str] = list(DEFAULT_GROUP_BY)
    scoring: dict[str, list[str]] = {}  # task (or "*") -> allowed scoring methods
    filters: dict[str, list[str]] = {}  # run column -> allowed values, e.g. {preset: [small]}
    reference: dict[str, str] = {}  # the row the others are compared with (default: the leader)
    source: Path | None = None

    @model_validator(mode="after")
    def _one_eval_set(self) -> LeaderboardDefinition:
        """A board holds one evaluation set: "full" unless ``filters: {eval_set: [fast]}``. Fast scores (the
        official BabyLM 2025 fast subsets) are other numbers, never averaged or compared with full ones."""
        chosen = [str(v) for v in self.filters.get("eval_set", ["full"])]
        if len(chosen) != 1 or chosen[0] not in EVAL_SETS:
            raise ValueError(f"filters.eval_set must name one of {', '.join(EVAL_SETS)} (fast and full scores "
                             "are never mixed on one board)")
        self.filters = {**self.filters, "eval_set": chosen}
        return self

    def effective_macro_tasks(self) -> list[str]:
        if self.macro_tasks is not None:
            return list(self.macro_tasks)
        return [t for t in DEFAULT_TASKS if t in self.tasks] if set(DEFAULT_TASKS) <= set(self.tasks) else []


def load_definition(name_or_path: str | Path) -> LeaderboardDefinition:
    """A definition by file path, or by name from ``leaderboards/`` (and ``--include-path`` folders)."""
    from antlm_bench.registry import discover, load_yaml

    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise UserError(f"leaderboard definition {path}: no such file")
        document = load_yaml(path)
    else:
        found = discover("leaderboards")
        if str(name_or_path) not in found:
            known = ", ".join(sorted(found)) or "none"
            raise UserError(f"unknown leaderboard {str(name_or_path)!r}; known: {known} (or give a .yaml path)")
        path, document = found[str(name_or_path)]
    try:
        definition = LeaderboardDefinition.model_validate({**document, "source": path})
    except ValidationError as err:
        raise UserError(f"{path}: {validation_line(err)}") from None
    for key in definition.group_by:
        if key not in GROUP_KEYS:
            raise UserError(f"{path}: field group_by: unknown key {key!r}; choose from {', '.join(GROUP_KEYS)}")
    for task, methods in definition.scoring.items():
        unknown = [m for m in methods if m not in SCORING_PREFERENCE]
        if unknown:
            raise UserError(f"{path}: field scoring: {task}: unknown method {unknown[0]!r}; choose from "
                            f"{', '.join(SCORING_PREFERENCE)}")
    tasks = set(definition.tasks)
    for column in definition.macro_tasks or []:
        task = column.split(":")[0].split(".")[0]
        if task not in tasks:
            raise UserError(f"{path}: field macro_tasks: {column!r} is not one of the board's tasks "
                            f"({', '.join(definition.tasks)}); add it to tasks, or leave it out of the macro")
    for task in definition.metrics:
        if task not in tasks:
            raise UserError(f"{path}: field metrics: {task!r} is not one of the board's tasks "
                            f"({', '.join(definition.tasks)})")
    return definition


def definition_result_paths(definition: LeaderboardDefinition) -> list[Path]:
    """The definition's ``results`` globs, relative to its file."""
    base = definition.source.parent if definition.source else Path.cwd()
    paths: list[Path] = []
    for pattern in definition.results:
        matches = sorted(base.glob(pattern)) if any(c in pattern for c in "*?[") else [base / pattern]
        paths.extend(m for m in matches if m.exists())
    return paths


def missing_results_line(definition: LeaderboardDefinition) -> str:
    """The one line for a definition whose ``results`` match nothing: run the study first, or, for a definition an
    installed wheel carries (it ships definitions, not the studies' results), where the results are."""
    from antlm_bench.registry import is_bundled

    globs = ", ".join(definition.results)
    if definition.source is not None and is_bundled(definition.source):
        return (f"leaderboard {definition.name}: its results ({globs}) are not installed (the package ships board "
                f"definitions, not the studies' results); they are committed in the antlm-bench source repository "
                f"under leaderboards/: run the command from a clone of it, or give the result folders")
    where = f" (relative to {definition.source.parent})" if definition.source is not None else ""
    return f"{definition.source}: results {globs} matched nothing{where}; run the study first, or give result folders"
