"""Which rows stand for each run's checkpoints: one chosen row per column (task and scoring method) per checkpoint,
in training order."""

from __future__ import annotations

import datetime as _dt
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from antlm_bench.results.leaderboard.definition import (
    FINETUNED_SCORING,
    GROUP_KEYS,
    SCORING_PREFERENCE,
    SEPARATE_METRICS,
    SEPARATE_SCORING,
    LeaderboardDefinition,
)
from antlm_bench.results.leaderboard.results import Results
from antlm_bench.results.tables import eval_set_population
from antlm_bench.runs.record import scoring_method_of_objective


def column_of(task: str, scoring: str) -> str:
    return f"{task}:{scoring}" if scoring in SEPARATE_SCORING else task


def base_task(column_task: str, metric: str) -> str:
    """The task a ``task.metric`` column's rows came from (their items are that task's), else the task itself."""
    return column_task.removesuffix(f".{metric}")


def _task_metric(definition: LeaderboardDefinition, task: str, present: set[str]) -> str | None:
    if task in definition.metrics:
        return definition.metrics[task]
    for metric in ("score", "accuracy"):
        if metric in present:
            return metric
    return next(iter(sorted(present)), None)


def _subtask_metrics(by_metric: Mapping[str, set[str]], task_metric: str) -> dict[str, str]:
    """subtask -> the metric its share of the task's number is measured by. The task's own metric where the
    subtasks report it (accuracy under accuracy, margin under margin, loss under loss); under a composite (GLUE's
    score) each subtask's non-accuracy metric where it reports one (MRPC's and QQP's F1), else its accuracy. A
    separate metric (margin) never stands for another metric's subtask."""
    if task_metric in by_metric:
        return dict.fromkeys(sorted(by_metric[task_metric]), task_metric)
    out: dict[str, str] = {}
    for metric in sorted(by_metric, key=lambda m: m == "accuracy", reverse=True):
        if metric not in SEPARATE_METRICS:
            out.update(dict.fromkeys(by_metric[metric], metric))
    return dict(sorted(out.items()))


def _allowed(definition: LeaderboardDefinition, task: str, scoring: str) -> bool:
    allowed = definition.scoring.get(task, definition.scoring.get("*"))
    return allowed is None or scoring in allowed


def _checkpoint_key(row: Mapping[str, Any]) -> tuple:
    def num(value: Any) -> float:
        return -1.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)

    # where in training, not which folder: the per-phase score of the last phase and the final evaluation of the
    # same weights may name the checkpoint differently (phase folder, last/ link) but are one checkpoint
    return (num(row["phase_index"]), num(row["epoch"]), num(row["tokens_seen"]))


def _row_preference(row: Mapping[str, Any]) -> tuple:
    """Of two rows for the same number: all items beat a ``--limit``, a larger limit a smaller one, then the later."""
    created = row["created_at"] or _dt.datetime.min.replace(tzinfo=_dt.timezone.utc)
    return (row["limit"] is None, row["limit"] or 0, created)


def _preference(scoring: str) -> tuple:
    return (SCORING_PREFERENCE.index(scoring) if scoring in SCORING_PREFERENCE else len(SCORING_PREFERENCE), scoring)


def _pick_scoring(candidates: Mapping[str, Mapping[str, Any]], phase_objective: str | None) -> str:
    """Of a checkpoint's rows for one number by several methods (method -> row): the rows on all items (a
    ``--limit`` loses, as in ``_row_preference``: the final evaluation by ``run --final-scoring`` over the last
    phase's quick look), then the method that matches the checkpoint's last phase (``runs.record``'s rule), else
    the first by preference."""
    best = max((row["limit"] is None, row["limit"] or 0) for row in candidates.values())
    pool = sorted((s for s, row in candidates.items() if (row["limit"] is None, row["limit"] or 0) == best),
                  key=_preference)
    auto = scoring_method_of_objective(phase_objective) if phase_objective else None
    return auto if auto in pool else pool[0]


def _one_method_per_column(out: Mapping[str, list[RunCheckpoint]]) -> None:
    """The board compares runs by their last checkpoints: where those were scored by different methods on a column
    (a schedule ending in CLM, one ending in MLM) but every run also has rows by one common method (``run
    --final-scoring clm``, or an ``eval --scoring``), that method's rows stand for every run, so the gap is tested
    on one instrument."""
    lasts = [ckpts[-1] for ckpts in out.values() if ckpts]
    for column in {c for last in lasts for c in last.cells}:
        having = [last for last in lasts if column in last.cells]
        chosen = [last.cells[column]["scoring"] for last in having]
        if len(set(chosen)) < 2:
            continue
        common = set.intersection(*(set(last.options[column]) for last in having))
        if not common:
            continue
        method = min(common, key=lambda s: (-chosen.count(s), _preference(s)))
        for last in having:
            row = last.options[column][method]
            last.cells[column] = row
            last.by_limit[column] = last.limit_rows[(column, row["metric"], method)]


@dataclass
class RunCheckpoint:
    """One checkpoint of one run: its task-level rows by column, and its subtask rows."""

    run_id: str
    ckpt: tuple
    meta: dict[str, Any]
    cells: dict[str, dict[str, Any]]  # column -> chosen task-level row
    subtask_metrics: dict[tuple[str, str], dict[str, str]]  # (task, scoring) -> subtask -> metric
    # column -> limit -> task-level row of the chosen method: the curves keep one sample size along training
    by_limit: dict[str, dict[int | None, dict[str, Any]]] = field(default_factory=dict)
    # column -> method -> task-level row under the column's metric: every method the checkpoint was scored by
    options: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    limit_rows: dict[tuple, dict[int | None, dict[str, Any]]] = field(default_factory=dict)  # (column, metric, method)


# a row without the column (read from somewhere other than a store, which fills it) has the default convention
_UNSET = {"convention": "babylm-2025"}


def _filtered_value(row: Mapping[str, Any], key: str) -> str:
    """The value a definition's ``filters`` test: the row's, except that a board of the full (or fast) set holds
    that set's quick subsets too (``full-first-20``: its cells say the limit and rank after whole evaluations)."""
    value = str(row.get(key) or _UNSET.get(key))
    return eval_set_population(value) if key == "eval_set" else value


def run_checkpoints(results: Results, definition: LeaderboardDefinition,
                    notes: list[str] | None = None) -> dict[str, list[RunCheckpoint]]:
    """run_id -> its checkpoints in training order, each with one chosen row per column. A value that is no
    finite number (NaN, inf) is left out, and said in ``notes``: which run, which tasks, and a run left with no
    row at all."""
    filters = {k: set(map(str, v)) for k, v in definition.filters.items()}
    by_run_ckpt: dict[str, dict[tuple, list[dict]]] = defaultdict(lambda: defaultdict(list))
    not_finite: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))  # run -> task -> values
    for row in results.rows:
        # "task.metric" in a definition's tasks is a column of its own: reading's eye_tracking and
        # self_paced_reading are two numbers of one task, never averaged into one
        split = f"{row['task']}.{row['metric']}"
        if split in definition.tasks:
            row = {**row, "task": split}
        if row["task"] not in definition.tasks:
            continue
        if row["value"] is None:
            continue
        if not math.isfinite(row["value"]):
            not_finite[row["run_id"]][row["task"] + (f" {row['metric']}" if row["metric"] else "")] += 1
            continue
        if any(_filtered_value(row, k) not in allowed for k, allowed in filters.items()):
            continue
        if not _allowed(definition, row["task"], row["scoring"] or ""):
            continue
        by_run_ckpt[row["run_id"]][_checkpoint_key(row)].append(row)
    for run_id, tasks in sorted(not_finite.items()):
        if notes is None:
            break
        shown = ", ".join(f"{task} ({n})" for task, n in sorted(tasks.items()))
        whole = "; the run has no finite value, so it is left off the board" if run_id not in by_run_ckpt else ""
        notes.append(f"run {run_id}: values that are no finite number (NaN or inf) left out: {shown}{whole}")
    out: dict[str, list[RunCheckpoint]] = {}
    for run_id, ckpts in by_run_ckpt.items():
        out[run_id] = []
        for ckpt in sorted(ckpts):
            rows = ckpts[ckpt]
            # one row per number: a re-evaluation, or the final evaluation after the last phase's own scoring
            latest: dict[tuple, dict] = {}
            for row in sorted(rows, key=_row_preference):
                latest[(row["task"], row["subtask"], row["metric"], row["scoring"])] = row
            by_limit: dict[tuple, dict[int | None, dict]] = defaultdict(dict)
            for row in sorted(rows, key=_row_preference):
                if row["subtask"] == "":
                    by_limit[(column_of(row["task"], row["scoring"]), row["metric"], row["scoring"])][row["limit"]] = row
            task_rows: dict[str, dict[str, dict[str, dict]]] = defaultdict(lambda: defaultdict(dict))
            subtask_rows: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
            for (task, subtask, metric, scoring), row in latest.items():
                if subtask == "":
                    task_rows[column_of(task, scoring)][metric][scoring] = row
                else:
                    subtask_rows[(task, scoring)][metric].add(subtask)
            cells: dict[str, dict] = {}
            options: dict[str, dict[str, dict]] = {}
            subtask_metrics: dict[tuple[str, str], dict[str, str]] = {}
            for column, by_metric in task_rows.items():
                task = column.split(":")[0]
                metric = _task_metric(definition, task, set(by_metric))
                if metric not in by_metric:
                    continue
                choice = _pick_scoring(by_metric[metric], rows[0]["phase_objective"])
                cells[column] = by_metric[metric][choice]
                options[column] = dict(by_metric[metric])
                for scoring in by_metric[metric]:
                    subtask_metrics[(task, scoring)] = _subtask_metrics(subtask_rows[(task, scoring)], metric)
            meta = {k: rows[0].get(k) for k in ("phase_index", "phase_objective", "epoch", "tokens_seen",
                                                 "words_seen", "checkpoint", *GROUP_KEYS)}
            # the run's training seed: GLUE rows carry their fine-tuning seed instead
            trained = [r["seed"] for r in rows if r["scoring"] not in FINETUNED_SCORING and r["seed"] is not None]
            meta["seed"] = trained[0] if trained else meta["seed"]
            variants = {column: by_limit[(column, row["metric"], row["scoring"])] for column, row in cells.items()}
            out[run_id].append(RunCheckpoint(run_id, ckpt, meta, cells, dict(subtask_metrics), variants, options,
                                             dict(by_limit)))
    _one_method_per_column(out)
    return out
