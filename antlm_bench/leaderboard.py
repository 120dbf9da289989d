"""Leaderboards: result tables in, one row per (recipe, preset, schedule) out, with intervals and paired gaps.

The pipeline, top to bottom:

1. ``find_score_files`` / ``read_results``: every ``scores.parquet`` under the given folders (and the
   ``items.parquet`` beside it, when ``--log-samples`` wrote one).
2. ``build_leaderboard``: per run, the *final* checkpoint (highest ``phase_index``, then epoch, then tokens seen);
   per task column, one scoring method (the method that matches the checkpoint's last phase when several were
   scored, GLUE ``probe`` rows in their own column so they never mix with ``finetune`` rows); seeds of one group
   averaged (mean, spread = sample standard deviation over seeds); a 95% interval from the items when they exist.
3. ``compare``: the gap between two rows, task by task and for the macro. With item tables on both sides the
   gap is *paired*: items are aligned by (task, subtask, item_id), correctness is averaged over each row's seeds
   first, and the same resampled items are used for both (stratified over subtasks, clusters kept together).
   Without items the gap is *unpaired*: normal approximation from the two intervals.
4. Renderers: terminal (rich), Markdown, one self-contained HTML page (sortable table, plots inline), Parquet.

Macro = mean of the macro tasks' scores (BLiMP, supplement, EWoK, GLUE by default, as the AntLM paper's
Table 2); a row that lacks one of them has no macro. Its interval comes from the items (a joint bootstrap over
all tasks) when every macro task has them, else from the task intervals combined as independent errors.
Values are fractions in tables and percentages on screen.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, ValidationError

from antlm_bench import __version__
from antlm_bench.checkpoint_state import SCORING_FOR_OBJECTIVE, dominant_objective
from antlm_bench.errors import UserError
from antlm_bench.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, _replicate_means, bootstrap_macro
from antlm_bench.tables import ITEMS_FILE, find_score_files, read_scores

DEFAULT_TASKS = ("blimp", "blimp_supplement", "ewok", "glue")
DEFAULT_GROUP_BY = ("recipe", "preset", "schedule")
GROUP_KEYS = ("recipe", "architecture", "preset", "schedule", "seed", "run_id", "limit", "data_hash")
# when a checkpoint was scored several ways and its last phase does not decide, the first of these wins
SCORING_PREFERENCE = ("clm", "pll", "mntp", "pll-word-l2r", "finetune", "probe")
# a linear probe is a different measurement from fine-tuning: its rows get their own column
SEPARATE_SCORING = ("probe",)
REQUIRED_COLUMNS = ("run_id", "task", "subtask", "metric", "value", "scoring")
Z95 = 1.959963984540054
MACRO = "macro"


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
        first = err.errors()[0]
        raise UserError(f"{path}: field {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    for key in definition.group_by:
        if key not in GROUP_KEYS:
            raise UserError(f"{path}: field group_by: unknown key {key!r}; choose from {', '.join(GROUP_KEYS)}")
    return definition


def definition_result_paths(definition: LeaderboardDefinition) -> list[Path]:
    """The definition's ``results`` globs, relative to its file."""
    base = definition.source.parent if definition.source else Path.cwd()
    paths: list[Path] = []
    for pattern in definition.results:
        matches = sorted(base.glob(pattern)) if any(c in pattern for c in "*?[") else [base / pattern]
        paths.extend(m for m in matches if m.exists())
    return paths


# ----------------------------------------------------------------------------------------------------------
# reading result tables


@dataclass
class Results:
    rows: list[dict[str, Any]]
    items_files: dict[str, Path]  # run_id -> items.parquet beside its scores
    files: list[Path]
    notes: list[str] = field(default_factory=list)


def read_results(paths: Sequence[str | Path]) -> Results:
    rows: list[dict[str, Any]] = []
    items_files: dict[str, Path] = {}
    run_files: dict[str, list[Path]] = defaultdict(list)
    files = find_score_files(paths)
    for file in files:
        try:
            names = set(pq.read_schema(file).names)
        except (pa.ArrowException, OSError) as err:
            raise UserError(f"{file}: not a readable Parquet file ({err}); re-run the evaluation") from None
        missing = [c for c in REQUIRED_COLUMNS if c not in names]
        if missing:
            raise UserError(f"{file}: not a scores table (columns {', '.join(missing)} missing)")
        try:
            table = read_scores([file])
        except (pa.ArrowException, OSError) as err:
            raise UserError(f"{file}: schema mismatch with the scores table ({err})") from None
        file_rows = table.to_pylist()
        items = file.parent / ITEMS_FILE
        for run_id in dict.fromkeys(row["run_id"] for row in file_rows):
            run_files[run_id].append(file)
            if items.is_file():
                items_files.setdefault(run_id, items)
        rows.extend(file_rows)
    notes = [f"run {run_id} appears in {len(found)} tables ({', '.join(str(f) for f in found)}): its rows are "
             "merged as one run (a copy of a run folder?)" for run_id, found in run_files.items() if len(found) > 1]
    return Results(rows, items_files, files, notes)


# ----------------------------------------------------------------------------------------------------------
# the leaderboard's data


@dataclass
class ItemSet:
    """Per-item correctness of one cell, averaged over the row's seeds: subtask -> (ids, correct, groups)."""

    subtasks: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]]

    def n_items(self) -> int:
        return int(sum(ids.size for ids, _, _ in self.subtasks.values()))


@dataclass
class Cell:
    value: float
    low: float | None
    high: float | None
    spread: float | None  # sample standard deviation over seeds
    n_seeds: int
    scoring: str
    n: int = 0
    interval: str = ""  # "items", "rows" or "tasks" (macro from task intervals)
    items: ItemSet | None = None
    seed_values: list[float] = field(default_factory=list)
    seed_runs: list[str] = field(default_factory=list)  # the run of each seed value


@dataclass
class CurvePoint:
    phase_index: int | None
    epoch: float | None
    tokens_seen: float | None
    value: float
    scoring: str


@dataclass
class BoardRow:
    key: tuple[str, ...]
    run_ids: list[str]
    cells: dict[str, Cell]
    macro: Cell | None
    curves: dict[str, list[CurvePoint]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    row: tuple[str, ...]
    reference: tuple[str, ...]
    column: str
    delta: float  # row - reference, fraction
    low: float | None
    high: float | None
    p_value: float | None
    paired: bool
    n_items: int
    significant: bool | None
    scoring: str = ""


@dataclass
class Leaderboard:
    definition: LeaderboardDefinition
    group_by: list[str]
    columns: list[str]
    macro_columns: list[str]
    rows: list[BoardRow]
    comparisons: list[Comparison]
    reference: tuple[str, ...] | None
    alpha: float
    notes: list[str]
    created_at: str


def column_of(task: str, scoring: str) -> str:
    return f"{task}:{scoring}" if scoring in SEPARATE_SCORING else task


def _task_metric(definition: LeaderboardDefinition, task: str, present: set[str]) -> str | None:
    if task in definition.metrics:
        return definition.metrics[task]
    for metric in ("score", "accuracy"):
        if metric in present:
            return metric
    return next(iter(sorted(present)), None)


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


def _pick_scoring(candidates: Iterable[str], phase_objective: str | None) -> str:
    """The method that matches the checkpoint's last phase, else the first by preference."""
    candidates = sorted(set(candidates), key=lambda s: (SCORING_PREFERENCE.index(s) if s in SCORING_PREFERENCE
                                                        else len(SCORING_PREFERENCE), s))
    if phase_objective:
        try:
            auto = SCORING_FOR_OBJECTIVE.get(dominant_objective(phase_objective))
        except ValueError:
            auto = None
        if auto in candidates:
            return auto
    return candidates[0]


@dataclass
class _RunCheckpoint:
    """One checkpoint of one run: its task-level rows by column, and its subtask rows."""

    run_id: str
    ckpt: tuple
    meta: dict[str, Any]
    cells: dict[str, dict[str, Any]]  # column -> chosen task-level row
    subtask_metrics: dict[tuple[str, str], dict[str, str]]  # (task, scoring) -> subtask -> metric
    # column -> limit -> task-level row of the chosen method: the curves keep one sample size along training
    by_limit: dict[str, dict[int | None, dict[str, Any]]] = field(default_factory=dict)


def _checkpoints(results: Results, definition: LeaderboardDefinition) -> dict[str, list[_RunCheckpoint]]:
    """run_id -> its checkpoints in training order, each with one chosen row per column."""
    filters = {k: set(map(str, v)) for k, v in definition.filters.items()}
    by_run_ckpt: dict[str, dict[tuple, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in results.rows:
        if row["task"] not in definition.tasks or row["value"] is None or not math.isfinite(row["value"]):
            continue
        if any(str(row.get(k)) not in allowed for k, allowed in filters.items()):
            continue
        if not _allowed(definition, row["task"], row["scoring"] or ""):
            continue
        by_run_ckpt[row["run_id"]][_checkpoint_key(row)].append(row)
    out: dict[str, list[_RunCheckpoint]] = {}
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
            subtask_metrics: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
            for (task, subtask, metric, scoring), row in latest.items():
                if subtask == "":
                    task_rows[column_of(task, scoring)][metric][scoring] = row
                elif metric != "accuracy":  # a subtask that reports F1 is scored by it (GLUE's MRPC, QQP)
                    subtask_metrics[(task, scoring)][subtask] = metric
                else:
                    subtask_metrics[(task, scoring)].setdefault(subtask, metric)
            cells: dict[str, dict] = {}
            for column, by_metric in task_rows.items():
                task = column.split(":")[0]
                metric = _task_metric(definition, task, set(by_metric))
                if metric not in by_metric:
                    continue
                choice = _pick_scoring(by_metric[metric], rows[0]["phase_objective"])
                cells[column] = by_metric[metric][choice]
            meta = {k: rows[0].get(k) for k in ("phase_index", "phase_objective", "epoch", "tokens_seen",
                                                 "checkpoint", *GROUP_KEYS)}
            variants = {column: by_limit[(column, row["metric"], row["scoring"])] for column, row in cells.items()}
            out[run_id].append(_RunCheckpoint(run_id, ckpt, meta, cells, dict(subtask_metrics), variants))
    return out


_items_cache: dict[Path, pa.Table] = {}


def _read_items_table(path: Path) -> pa.Table:
    stamp = path.stat().st_mtime_ns
    key = Path(f"{path}@{stamp}")
    if key not in _items_cache:
        try:
            _items_cache[key] = pq.read_table(path, columns=["run_id", "checkpoint", "phase_index", "scoring", "task",
                                                               "subtask", "item_id", "group_id", "correct"])
        except (pa.ArrowException, OSError) as err:
            raise UserError(f"{path}: unreadable items table ({err}); re-run with --log-samples") from None
    return _items_cache[key]


def _eq(column: pa.ChunkedArray, value: Any) -> pa.ChunkedArray:
    return pc.is_null(column) if value is None else pc.fill_null(pc.equal(column, value), False)


def _run_items(path: Path, run_id: str, meta: Mapping[str, Any], task: str, scoring: str,
               subtasks: Iterable[str]) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] | None:
    """One run's items of one cell (``meta``: its score row), subtask -> (sorted ids, correct, groups).

    None when a subtask has no items, so that an interval or a gap is never computed on part of a task.
    """
    table = _read_items_table(path)
    mask = pc.and_(pc.and_(_eq(table["run_id"], run_id), _eq(table["task"], task)), _eq(table["scoring"], scoring))
    mask = pc.and_(mask, _eq(table["phase_index"], meta["phase_index"]))
    if meta["checkpoint"]:
        mask = pc.and_(mask, _eq(table["checkpoint"], meta["checkpoint"]))
    chosen = table.filter(mask)
    by_subtask: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}
    subtask_col = np.asarray(chosen["subtask"].to_pylist(), dtype=object)
    ids_all = np.asarray(chosen["item_id"].to_pylist(), dtype=object).astype(str)
    correct_all = np.asarray(chosen["correct"].to_pylist(), dtype=np.float64)
    groups_all = chosen["group_id"].to_pylist()
    for subtask in subtasks:
        where = np.flatnonzero(subtask_col == subtask)
        if where.size == 0:
            return None
        # the last record of an item wins (an appended re-evaluation); np.unique keeps the first, so reverse
        rev = where[::-1]
        uniq, first = np.unique(ids_all[rev], return_index=True)
        pick = rev[first]
        groups = [groups_all[i] for i in pick]
        group_array = None if all(g is None for g in groups) else np.asarray(
            [g if g is not None else f"_item_{uid}" for g, uid in zip(groups, uniq)], dtype=object).astype(str)
        by_subtask[subtask] = (uniq, correct_all[pick], group_array)
    return by_subtask


def _average_seeds(per_seed: list[dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]]]) -> ItemSet:
    """Mean correctness over seeds, on the items every seed has."""
    out = {}
    for subtask in per_seed[0]:
        ids = per_seed[0][subtask][0]
        for other in per_seed[1:]:
            ids = np.intersect1d(ids, other[subtask][0])
        total = np.zeros(ids.size)
        groups = None
        for seed_items in per_seed:
            seed_ids, correct, seed_groups = seed_items[subtask]
            index = np.searchsorted(seed_ids, ids)
            total += correct[index]
            if groups is None and seed_groups is not None:
                groups = seed_groups[index]
        out[subtask] = (ids, total / len(per_seed), groups)
    return ItemSet(out)


def _interval_from_rows(rows: Sequence[Mapping[str, Any]], value: float) -> tuple[float | None, float | None]:
    """Mean of the seeds' bounds, re-centred on the mean (a seed mean shares its items' sampling error)."""
    lows = [r["ci_low"] for r in rows if r["ci_low"] is not None]
    highs = [r["ci_high"] for r in rows if r["ci_high"] is not None]
    if len(lows) != len(rows) or len(highs) != len(rows):
        return None, None
    below = float(np.mean([r["value"] - r["ci_low"] for r in rows]))
    above = float(np.mean([r["ci_high"] - r["value"] for r in rows]))
    return value - below, value + above


def _spread(values: Sequence[float]) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def hierarchical_replicates(
    tasks: Mapping[str, Mapping[str, tuple[np.ndarray, np.ndarray | None]]],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, np.ndarray]:
    """Point and bootstrap replicates of mean over tasks of mean over subtasks of mean over items.

    ``tasks[task][subtask] = (values, groups)``. Items are resampled within each subtask (clusters from ``groups``
    as one), as ``stats.bootstrap_macro`` does; the two levels of unweighted means match how task and macro scores
    are defined (a plain mean over all subtasks would weight BLiMP's 67 paradigms over the supplement's 5).
    For one task without clusters this draws exactly what ``stats.paired_bootstrap`` draws.
    """
    rng = np.random.default_rng(seed)
    replicates = np.zeros(resamples)
    points = []
    for task in sorted(tasks):
        subtasks = tasks[task]
        task_reps = np.zeros(resamples)
        for name in sorted(subtasks):
            values, groups = subtasks[name]
            task_reps += _replicate_means(np.asarray(values, dtype=np.float64), groups, resamples, rng)
        replicates += task_reps / len(subtasks)
        points.append(np.mean([np.mean(subtasks[n][0]) for n in sorted(subtasks)]))
    return float(np.mean(points)), replicates / len(tasks)


def _percentile_interval(point: float, replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    alpha = (1 - level) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    return float(low), float(high)


def _two_sided_p(replicates: np.ndarray) -> float:
    tail = min(np.mean(replicates <= 0), np.mean(replicates >= 0))
    return float(min(1.0, 2 * tail))


def _cell_items_usable(task: str, subtask_metrics: Mapping[str, str]) -> bool:
    """Item correctness averages to the task score only when every subtask's metric is an accuracy (not F1)."""
    return bool(subtask_metrics) and all(m == "accuracy" for m in subtask_metrics.values())


def build_leaderboard(
    results: Results,
    definition: LeaderboardDefinition | None = None,
    group_by: Sequence[str] | None = None,
    reference: Mapping[str, str] | None = None,
    alpha: float = 0.05,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    macro_tasks: Sequence[str] | None = None,
    gaps: bool = True,
) -> Leaderboard:
    """Aggregate result rows into a leaderboard; see the module docstring for the rules."""
    definition = definition or LeaderboardDefinition()
    group_by = list(group_by or definition.group_by)
    for key in group_by:
        if key not in GROUP_KEYS:
            raise UserError(f"--by {key}: unknown key; choose from {', '.join(GROUP_KEYS)}")
    notes: list[str] = list(results.notes)
    checkpoints = _checkpoints(results, definition)
    if not checkpoints:
        raise UserError(f"no rows for tasks {', '.join(definition.tasks)} in the results "
                        f"({len(results.rows)} rows read); check the task names and filters")

    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for run_id, ckpts in checkpoints.items():
        final = ckpts[-1]
        groups[tuple("" if final.meta[k] is None else str(final.meta[k]) for k in group_by)].append(run_id)

    column_set = {c for ckpts in checkpoints.values() for c in ckpts[-1].cells}
    order = {t: i for i, t in enumerate(definition.tasks)}
    columns = sorted(column_set, key=lambda c: (c.split(":")[0] not in order, order.get(c.split(":")[0], 0),
                                                ":" in c, c))
    macro_columns = list(macro_tasks) if macro_tasks is not None else definition.effective_macro_tasks()

    rows: list[BoardRow] = []
    for key, run_ids in sorted(groups.items()):
        run_ids = sorted(run_ids)
        finals = [checkpoints[r][-1] for r in run_ids]
        row = BoardRow(key, run_ids, {}, None)
        for k in ("recipe", "preset", "schedule", "limit"):
            if k not in group_by:
                distinct = sorted({str(f.meta[k]) for f in finals if f.meta[k] is not None})
                if len(distinct) > 1:
                    row.notes.append(f"pools runs of several {k}s: {', '.join(distinct)}")
        for column in columns:
            present = [f for f in finals if column in f.cells]
            if not present:
                continue
            if len(present) < len(finals):
                row.notes.append(f"{column}: {len(present)} of {len(finals)} runs scored")
            cell_rows = [f.cells[column] for f in present]
            values = [r["value"] for r in cell_rows]
            value = float(np.mean(values))
            scorings = sorted({r["scoring"] for r in cell_rows})
            cell = Cell(value, None, None, _spread(values), len(present), "+".join(scorings),
                        int(np.mean([r["n"] or 0 for r in cell_rows])), seed_values=values,
                        seed_runs=[f.run_id for f in present])
            cell.items = _group_items(results, present, column, scorings)
            if len(present) == 1:
                cell.low, cell.high = cell_rows[0]["ci_low"], cell_rows[0]["ci_high"]
                cell.interval = "rows" if cell.low is not None else ""
            elif cell.items is not None:
                subtask_values = {s: v for s, (_, v, _) in cell.items.subtasks.items()}
                subtask_groups = {s: g for s, (_, _, g) in cell.items.subtasks.items() if g is not None}
                interval = bootstrap_macro(subtask_values, subtask_groups or None, resamples, seed)
                # the items' interval, around the seeds' mean (equal to it when every seed scored the same items)
                cell.low, cell.high = value - (interval.value - interval.low), value + (interval.high - interval.value)
                cell.interval = "items"
            else:
                cell.low, cell.high = _interval_from_rows(cell_rows, value)
                cell.interval = "rows" if cell.low is not None else ""
            row.cells[column] = cell
        row.macro = macro_cell(row, macro_columns, resamples, seed)
        row.curves = _curves(checkpoints, run_ids, columns, macro_columns)
        rows.append(row)

    rows.sort(key=lambda r: _rank_key(r, columns))
    ref_row = _find_reference(rows, group_by, reference or definition.reference) if gaps else None
    comparisons: list[Comparison] = []
    if ref_row is not None:
        for row in rows:
            if row is not ref_row:
                comparisons.extend(compare(row, ref_row, columns, macro_columns, alpha, resamples, seed))
    if any(c.interval == "" for r in rows for c in r.cells.values()):
        notes.append("some cells have no interval (rows without ci_low/ci_high and no items)")
    return Leaderboard(definition, group_by, columns, macro_columns, rows, comparisons,
                       ref_row.key if ref_row else None, alpha, notes,
                       _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def _group_items(results: Results, present: list[_RunCheckpoint], column: str, scorings: list[str]) -> ItemSet | None:
    """Seed-averaged items of one cell, when every run of the group has them for every subtask."""
    if len(scorings) != 1:
        return None
    task, scoring = column.split(":")[0], scorings[0]
    per_seed = []
    for final in present:
        metrics = final.subtask_metrics.get((task, scoring), {})
        path = results.items_files.get(final.run_id)
        if path is None or not _cell_items_usable(task, metrics):
            return None
        items = _run_items(path, final.run_id, final.cells[column], task, scoring, sorted(metrics))
        if items is None:
            return None
        per_seed.append(items)
    return _average_seeds(per_seed)


def macro_cell(row: BoardRow, macro_columns: Sequence[str], resamples: int = DEFAULT_RESAMPLES,
               seed: int = DEFAULT_SEED) -> Cell | None:
    """Mean of ``macro_columns``; None when the row lacks one of them."""
    if not macro_columns or any(c not in row.cells for c in macro_columns):
        return None
    cells = [row.cells[c] for c in macro_columns]
    value = float(np.mean([c.value for c in cells]))
    # a run's own macro needs every macro task scored on that run
    runs = [r for r in cells[0].seed_runs if all(r in c.seed_runs for c in cells)]
    per_seed = [float(np.mean([c.seed_values[c.seed_runs.index(r)] for c in cells])) for r in runs]
    macro = Cell(value, None, None, _spread(per_seed), len(runs), "auto", seed_values=per_seed, seed_runs=runs)
    if all(c.items is not None for c in cells):
        tasks = {col: {s: (v, g) for s, (_, v, g) in c.items.subtasks.items()} for col, c in zip(macro_columns, cells)}
        point, reps = hierarchical_replicates(tasks, resamples, seed)
        low, high = _percentile_interval(point, reps)
        macro.low, macro.high, macro.interval = value - (point - low), value + (high - point), "items"
    elif all(c.low is not None and c.high is not None for c in cells):
        # task scores come from disjoint item sets: their errors add as independent ones
        below = math.sqrt(sum((c.value - c.low) ** 2 for c in cells)) / len(cells)
        above = math.sqrt(sum((c.high - c.value) ** 2 for c in cells)) / len(cells)
        macro.low, macro.high, macro.interval = value - below, value + above, "tasks"
    return macro


def _curves(checkpoints: Mapping[str, list[_RunCheckpoint]], run_ids: Sequence[str], columns: Sequence[str],
            macro_columns: Sequence[str]) -> dict[str, list[CurvePoint]]:
    """Per column, the seed-averaged score at each checkpoint (same phase index and epoch across seeds)."""
    points: dict[str, dict[tuple, list[tuple[_RunCheckpoint, float, str]]]] = defaultdict(lambda: defaultdict(list))
    for run_id in run_ids:
        # one sample size along the curve: the per-phase scores use --eval-limit, the final evaluation may use
        # more items; the curve keeps the limit of the run's first scored checkpoint wherever that exists
        curve_limit: dict[str, int | None] = {}
        for ckpt in checkpoints[run_id]:
            for column, cell_row in ckpt.cells.items():
                curve_limit.setdefault(column, cell_row["limit"])
        for ckpt in checkpoints[run_id]:
            at = (ckpt.ckpt[0], ckpt.ckpt[1])
            chosen = {column: ckpt.by_limit.get(column, {}).get(curve_limit[column], cell_row)
                      for column, cell_row in ckpt.cells.items()}
            for column, cell_row in chosen.items():
                points[column][at].append((ckpt, cell_row["value"], cell_row["scoring"]))
            if macro_columns and all(c in chosen for c in macro_columns):
                value = float(np.mean([chosen[c]["value"] for c in macro_columns]))
                methods = "/".join(sorted({chosen[c]["scoring"] for c in macro_columns},
                                          key=lambda m: (m in ("finetune", "probe"), m)))
                points[MACRO][at].append((ckpt, value, methods))
    curves: dict[str, list[CurvePoint]] = {}
    for column in [*columns, MACRO]:
        if column not in points:
            continue
        curve = []
        for at in sorted(points[column]):
            entries = points[column][at]
            meta = entries[0][0].meta
            tokens = [e[0].meta["tokens_seen"] for e in entries if e[0].meta["tokens_seen"] is not None]
            curve.append(CurvePoint(meta["phase_index"], meta["epoch"], float(np.mean(tokens)) if tokens else None,
                                    float(np.mean([e[1] for e in entries])),
                                    "+".join(dict.fromkeys(e[2] for e in entries))))
        curves[column] = curve
    return curves


def _rank_key(row: BoardRow, columns: Sequence[str]) -> tuple:
    """Macro descending; rows without a macro after, by their mean over the columns they have."""
    if row.macro is not None:
        return (0, -row.macro.value, row.key)
    have = [row.cells[c].value for c in columns if c in row.cells and ":" not in c]
    return (1, -(float(np.mean(have)) if have else -1.0), row.key)


def _find_reference(rows: list[BoardRow], group_by: Sequence[str], wanted: Mapping[str, str] | None) -> BoardRow | None:
    if not rows:
        return None
    if not wanted:
        return rows[0]
    for key in wanted:
        if key not in group_by:
            raise UserError(f"reference {key}={wanted[key]}: {key} is not a grouping key ({', '.join(group_by)})")
    matches = [r for r in rows if all(r.key[group_by.index(k)] == str(v) for k, v in wanted.items())]
    if len(matches) != 1:
        shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
        raise UserError(f"reference {shown}: matches {len(matches)} rows; name exactly one row")
    return matches[0]


# ----------------------------------------------------------------------------------------------------------
# comparisons


def _normal_p(z: float) -> float:
    return math.erfc(abs(z) / math.sqrt(2))


def unpaired_gap(a: Cell, b: Cell, alpha: float) -> tuple[float, float | None, float | None, float | None]:
    """(delta, low, high, p) of a - b from the two 95% intervals, as independent normal errors.

    Scores of two models on the *same* items are positively correlated, so this overstates the noise of the
    gap: an unpaired verdict of "significant" is conservative.
    """
    delta = a.value - b.value
    if None in (a.low, a.high, b.low, b.high):
        return delta, None, None, None
    se = math.sqrt(((a.high - a.low) / (2 * Z95)) ** 2 + ((b.high - b.low) / (2 * Z95)) ** 2)
    if se == 0:
        return delta, delta, delta, (1.0 if delta == 0 else 0.0)
    return delta, delta - Z95 * se, delta + Z95 * se, _normal_p(delta / se)


def _aligned_diffs(a: ItemSet, b: ItemSet) -> dict[str, tuple[np.ndarray, np.ndarray | None]] | None:
    out = {}
    for subtask in sorted(set(a.subtasks) & set(b.subtasks)):
        ids_a, va, ga = a.subtasks[subtask]
        ids_b, vb, _ = b.subtasks[subtask]
        common, ia, ib = np.intersect1d(ids_a, ids_b, return_indices=True)
        if common.size:
            out[subtask] = (va[ia] - vb[ib], None if ga is None else ga[ia])
    return out or None


def compare(a: BoardRow, b: BoardRow, columns: Sequence[str], macro_columns: Sequence[str], alpha: float = 0.05,
            resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> list[Comparison]:
    """Gaps a - b for every column both rows have, and for the macro; paired over items where both have them."""
    out: list[Comparison] = []
    diffs_by_column: dict[str, dict[str, tuple[np.ndarray, np.ndarray | None]]] = {}
    for column in columns:
        if column not in a.cells or column not in b.cells:
            continue
        ca, cb = a.cells[column], b.cells[column]
        scoring = ca.scoring if ca.scoring == cb.scoring else f"{ca.scoring} vs {cb.scoring}"
        diffs = _aligned_diffs(ca.items, cb.items) if ca.items and cb.items else None
        if diffs is not None:
            diffs_by_column[column] = diffs
            point, reps = hierarchical_replicates({column: diffs}, resamples, seed)
            low, high = _percentile_interval(point, reps, 1 - alpha)
            p = _two_sided_p(reps)
            n = int(sum(d.size for d, _ in diffs.values()))
            out.append(Comparison(a.key, b.key, column, point, low, high, p, True, n, p < alpha, scoring))
        else:
            delta, low, high, p = unpaired_gap(ca, cb, alpha)
            out.append(Comparison(a.key, b.key, column, delta, low, high, p, False, 0,
                                  None if p is None else p < alpha, scoring))
    if a.macro is not None and b.macro is not None:
        if all(c in diffs_by_column for c in macro_columns):
            point, reps = hierarchical_replicates({c: diffs_by_column[c] for c in macro_columns}, resamples, seed)
            low, high = _percentile_interval(point, reps, 1 - alpha)
            p = _two_sided_p(reps)
            n = int(sum(d.size for c in macro_columns for d, _ in diffs_by_column[c].values()))
            out.append(Comparison(a.key, b.key, MACRO, point, low, high, p, True, n, p < alpha, "auto"))
        else:
            delta, low, high, p = unpaired_gap(a.macro, b.macro, alpha)
            out.append(Comparison(a.key, b.key, MACRO, delta, low, high, p, False, 0,
                                  None if p is None else p < alpha, "auto"))
    return out


# ----------------------------------------------------------------------------------------------------------
# rendering

MARKERS = {"clm": "o", "pll": "s", "mntp": "^", "pll-word-l2r": "D", "finetune": "P", "probe": "X"}


def pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.{digits}f}"


def cell_text(cell: Cell | None, with_method: bool = True) -> str:
    if cell is None:
        return "-"
    text = pct(cell.value)
    if cell.low is not None and cell.high is not None:
        text += f" [{pct(cell.low)}, {pct(cell.high)}]"
    if cell.spread is not None:
        text += f" ±{pct(cell.spread)}"
    if with_method and cell.scoring != "auto":
        text += f" {cell.scoring}"
    return text


def comparison_text(c: Comparison) -> str:
    text = f"{100 * c.delta:+.1f}"
    if c.low is not None and c.high is not None:
        text += f" [{100 * c.low:+.1f}, {100 * c.high:+.1f}]"
    return text


def verdict(c: Comparison) -> str:
    kind = "paired" if c.paired else "unpaired"
    if c.significant is None:
        return f"no interval ({kind})"
    return f"{'significant' if c.significant else 'not significant'} ({kind}, {p_text(c.p_value)})"


def p_text(p: float | None) -> str:
    if p is None:
        return "p -"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def shown_keys(board: Leaderboard) -> list[int]:
    """Grouping keys whose value differs between rows; the others (all of them for one row) go in the title."""
    return [i for i in range(len(board.group_by)) if len({r.key[i] for r in board.rows}) > 1]


def common_text(board: Leaderboard) -> str:
    """``recipe=antlm-babyllama, preset=tiny``: the grouping values every row shares."""
    shown = shown_keys(board)
    if not board.rows:
        return ""
    return ", ".join(f"{k}={board.rows[0].key[i]}" for i, k in enumerate(board.group_by)
                     if i not in shown and board.rows[0].key[i])


def key_text(board: Leaderboard, key: tuple[str, ...] | None, full: bool = False) -> str:
    if key is None:
        return "-"
    indices = shown_keys(board)
    if full or not indices:
        indices = range(len(board.group_by))
    return ", ".join(f"{board.group_by[i]}={key[i]}" for i in indices if key[i]) or "(all runs)"


def method_lines(board: Leaderboard) -> list[str]:
    macro = ", ".join(board.macro_columns) if board.macro_columns else "not defined"
    return [
        ("Scores are percentages: mean over seeds [95% bootstrap interval over items] ±standard deviation over "
         "seeds, then the scoring method (clm: sum of log-probabilities left to right; pll / pll-word-l2r: "
         "pseudo-log-likelihood; mntp: masked next-token; finetune / probe: GLUE)."),
        f"Final checkpoint of each run (highest phase index). Macro = mean of {macro}; '-' when a row lacks one.",
        ("Gaps to the reference row are paired over shared items (bootstrap, same resampled items on both sides) "
         "where item tables exist, unpaired (normal approximation from both intervals) otherwise; "
         f"significant at alpha={board.alpha}."),
    ]


def render_terminal(board: Leaderboard, console: Any) -> None:
    from rich.table import Table

    shown = shown_keys(board)
    common = common_text(board)
    table = Table(title=f"leaderboard: {board.definition.name}" + (f" ({common})" if common else ""))
    table.add_column("#", justify="right")
    for i in shown:
        table.add_column(board.group_by[i], overflow="fold")
    table.add_column("runs", justify="right")
    for column in board.columns:
        table.add_column(column, justify="right")
    table.add_column(MACRO, justify="right", style="bold")
    for rank, row in enumerate(board.rows, 1):
        table.add_row(str(rank), *[row.key[i] for i in shown], str(len(row.run_ids)),
                      *[cell_text(row.cells.get(c)) for c in board.columns], cell_text(row.macro, False))
    console.print(table)
    if board.comparisons:
        gaps = Table(title=f"gaps to the reference: {key_text(board, board.reference)} (percentage points)")
        for column in ("row", "task", "gap [95% CI]", "verdict"):
            gaps.add_column(column)
        for c in board.comparisons:
            style = "" if not c.significant else ("green" if c.delta > 0 else "red")
            gaps.add_row(key_text(board, c.row), c.column, comparison_text(c), verdict(c), style=style)
        console.print(gaps)
    for line in method_lines(board):
        console.print(f"[dim]{line}[/dim]")
    for row in board.rows:
        for note in row.notes:
            console.print(f"[yellow]note[/yellow] {key_text(board, row.key)}: {note}")
    for note in board.notes:
        console.print(f"[yellow]note[/yellow] {note}")


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(board: Leaderboard, plot_files: Sequence[str] = ()) -> str:
    shown = shown_keys(board)
    lines = [f"# {board.definition.name}", ""]
    if board.definition.description:
        lines += [board.definition.description, ""]
    if common_text(board):
        lines += [f"All rows: {common_text(board)}.", ""]
    header = ["#", *[board.group_by[i] for i in shown], "runs", *board.columns, MACRO]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---:" if h in ("#", "runs") or h in board.columns or h == MACRO else "---"
                                for h in header) + "|")
    for rank, row in enumerate(board.rows, 1):
        cells = [str(rank), *[row.key[i] for i in shown], str(len(row.run_ids)), *[cell_text(row.cells.get(c)) for c in board.columns],
                 f"**{cell_text(row.macro, False)}**"]
        lines.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
    if board.comparisons:
        lines += ["", f"## Gaps to {key_text(board, board.reference)} (percentage points)", "",
                  "| row | task | gap [95% CI] | verdict |", "|---|---|---:|---|"]
        for c in board.comparisons:
            mark = "**" if c.significant else ""
            lines.append(f"| {_md_escape(key_text(board, c.row))} | {c.column} | {mark}{comparison_text(c)}{mark} "
                         f"| {verdict(c)} |")
    for path in plot_files:
        lines += ["", f"![per-checkpoint curves]({path})"]
    lines += ["", *[f"- {line}" for line in method_lines(board)]]
    notes = [f"{key_text(board, r.key)}: {n}" for r in board.rows for n in r.notes] + board.notes
    lines += [f"- note: {n}" for n in notes]
    lines += ["", f"_antlm-bench {__version__}, {board.created_at}_", ""]
    return "\n".join(lines)


def plot_curves(board: Leaderboard, fmt: str = "png", x: str = "epoch") -> bytes | None:
    """Figure-2-style curves: one panel per task (and macro), one line per row, markers by scoring method."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    panels = [c for c in [*board.columns, MACRO] if any(c in r.curves for r in board.rows)]
    if not panels:
        return None
    attr = "tokens_seen" if x == "tokens" else "epoch"
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    methods_seen: set[str] = set()
    for ax, panel in zip(axes.flat, panels):
        for i, row in enumerate(board.rows):
            curve = [p for p in row.curves.get(panel, []) if getattr(p, attr) is not None]
            if not curve:
                continue
            color = colors[i % len(colors)]
            xs = [getattr(p, attr) for p in curve]
            ys = [100 * p.value for p in curve]
            ax.plot(xs, ys, color=color, linewidth=1.4, label=key_text(board, row.key))
            for xv, yv, p in zip(xs, ys, curve):
                method = p.scoring.split("+")[0].split("/")[0]
                methods_seen.add(method)
                ax.plot([xv], [yv], marker=MARKERS.get(method, "o"), color=color, markersize=5, linestyle="none")
        ax.set_title(panel)
        ax.set_xlabel("tokens seen" if x == "tokens" else "epoch")
        ax.set_ylabel("score (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    handles += [Line2D([], [], color="gray", marker=MARKERS.get(m, "o"), linestyle="none", label=f"scored {m}")
                for m in sorted(methods_seen)]
    labels += [f"scored {m}" for m in sorted(methods_seen)]
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 + 0.03 * math.ceil(len(labels) / 4), 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=100, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
    return buffer.getvalue()


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#1b1b1b;max-width:1400px}
table{border-collapse:collapse;margin:1rem 0;font-size:14px}
th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:right;white-space:nowrap}
th{background:#f3f3f3;cursor:pointer;user-select:none}
th.sorted-desc::after{content:" \\25BC"}th.sorted-asc::after{content:" \\25B2"}
td.key,th.key{text-align:left}
.ci,.sd,.m{color:#666;font-size:12px}
td.macro{font-weight:bold}
tr.sig-up td{background:#eaf7ea}tr.sig-down td{background:#fbeaea}
.notes{color:#555;font-size:13px}
img{max-width:100%}
"""

_JS = """
(function(){
  function val(cell){var v=cell.getAttribute('data-value');if(v===null)return cell.textContent.trim();
    return v===''?null:parseFloat(v);}
  function sortTable(table,col,desc){
    var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){var x=val(a.cells[col]),y=val(b.cells[col]);
      if(x===null&&y===null)return 0;if(x===null)return 1;if(y===null)return -1;
      if(typeof x==='number'&&typeof y==='number')return desc?y-x:x-y;
      return desc?String(y).localeCompare(String(x)):String(x).localeCompare(String(y));});
    rows.forEach(function(r){body.appendChild(r);});
    Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){
      th.classList.remove('sorted-asc','sorted-desc');if(i===col)th.classList.add(desc?'sorted-desc':'sorted-asc');});
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'),function(table){
    var heads=table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads,function(th,i){th.addEventListener('click',function(){
      sortTable(table,i,!th.classList.contains('sorted-desc'));});});
    var start=table.getAttribute('data-sort-column');
    if(start!==null){sortTable(table,parseInt(start,10),true);
      // the rank is the position by macro, fixed once: re-sorting by another column keeps it
      Array.prototype.forEach.call(table.tBodies[0].rows,function(r,i){
        var cell=r.querySelector('td.rank');if(cell){cell.textContent=String(i+1);cell.setAttribute('data-value',i+1);}});
      table.setAttribute('data-ranked','yes');
      // a link ending in #sort=<column> opens the page sorted by that column (best first)
      var m=/^#sort=(.+)$/.exec(window.location.hash);
      if(m){var name=decodeURIComponent(m[1]);Array.prototype.forEach.call(heads,function(th,i){
        if(th.textContent.trim()===name){sortTable(table,i,true);}});}}
  });
})();
"""


def _html_cell(cell: Cell | None, css: str = "") -> str:
    cls = f' class="{css}"' if css else ""
    if cell is None:
        return f'<td{cls} data-value="">-</td>'
    parts = [html.escape(pct(cell.value))]
    if cell.low is not None and cell.high is not None:
        parts.append(f'<span class="ci">[{pct(cell.low)}, {pct(cell.high)}]</span>')
    if cell.spread is not None:
        parts.append(f'<span class="sd">±{pct(cell.spread)}</span>')
    if cell.scoring != "auto":
        parts.append(f'<span class="m">{html.escape(cell.scoring)}</span>')
    return f'<td{cls} data-value="{cell.value:.10g}">{" ".join(parts)}</td>'


def render_html(board: Leaderboard, x: str = "epoch") -> str:
    """One self-contained page: inline CSS, a few lines of JS (sortable columns), the plot as inline PNG."""
    e = html.escape
    shown = shown_keys(board)
    macro_index = 2 + len(shown) + len(board.columns)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{e(board.definition.name)} — antlm-bench leaderboard</title>", f"<style>{_CSS}</style></head>",
           "<body>", f"<h1>{e(board.definition.name)}</h1>"]
    if board.definition.description:
        out.append(f"<p>{e(board.definition.description)}</p>")
    if common_text(board):
        out.append(f"<p>All rows: {e(common_text(board))}.</p>")
    # rows go out in group order; the script ranks them by macro on load (without JS: unranked, still readable)
    out.append(f'<table id="leaderboard" class="sortable" data-sort-column="{macro_index}"><thead><tr>')
    out.append('<th class="key">#</th>' + "".join(f'<th class="key">{e(board.group_by[i])}</th>' for i in shown)
               + "<th>runs</th>" + "".join(f"<th>{e(c)}</th>" for c in board.columns) + f"<th>{MACRO}</th>")
    out.append("</tr></thead><tbody>")
    for row in sorted(board.rows, key=lambda r: r.key):
        out.append("<tr>" + '<td class="rank key" data-value=""></td>'
                   + "".join(f'<td class="key">{e(row.key[i])}</td>' for i in shown)
                   + f'<td data-value="{len(row.run_ids)}">{len(row.run_ids)}</td>'
                   + "".join(_html_cell(row.cells.get(c)) for c in board.columns)
                   + _html_cell(row.macro, "macro") + "</tr>")
    out.append("</tbody></table>")
    out.append("<noscript><p>Rows are in group order; enable JavaScript to rank and sort them.</p></noscript>")
    if board.comparisons:
        out.append(f"<h2>Gaps to {e(key_text(board, board.reference))}</h2>")
        out.append('<table id="gaps" class="sortable"><thead><tr><th class="key">row</th><th class="key">task</th>'
                   "<th>gap (pp)</th><th>95% CI</th><th>p</th><th class=\"key\">pairing</th>"
                   '<th class="key">verdict</th></tr></thead><tbody>')
        for c in board.comparisons:
            css = "" if not c.significant else (' class="sig-up"' if c.delta > 0 else ' class="sig-down"')
            ci = f"[{100 * c.low:+.1f}, {100 * c.high:+.1f}]" if c.low is not None else "-"
            pv = "" if c.p_value is None else f"{c.p_value:.4g}"
            pv_text = "-" if c.p_value is None else p_text(c.p_value).removeprefix("p=")
            sig = "-" if c.significant is None else ("significant" if c.significant else "not significant")
            out.append(f'<tr{css}><td class="key">{e(key_text(board, c.row))}</td><td class="key">{e(c.column)}</td>'
                       f'<td data-value="{c.delta:.10g}">{100 * c.delta:+.1f}</td><td>{ci}</td>'
                       f'<td data-value="{pv}">{e(pv_text)}</td>'
                       f'<td class="key">{"paired, " + str(c.n_items) + " items" if c.paired else "unpaired"}</td>'
                       f'<td class="key">{sig}</td></tr>')
        out.append("</tbody></table>")
    image = plot_curves(board, "png", x)
    if image is not None:
        out.append("<h2>Scores per checkpoint</h2>")
        out.append(f'<img alt="scores per checkpoint" src="data:image/png;base64,{base64.b64encode(image).decode()}">')
    out.append('<div class="notes"><ul>' + "".join(f"<li>{e(line)}</li>" for line in method_lines(board)))
    for row in board.rows:
        for note in row.notes:
            out.append(f"<li>note, {e(key_text(board, row.key))}: {e(note)}</li>")
    for note in board.notes:
        out.append(f"<li>note: {e(note)}</li>")
    out.append(f"</ul><p>antlm-bench {e(__version__)}, {e(board.created_at)}</p></div>")
    out.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(out)


def board_table(board: Leaderboard) -> pa.Table:
    """Long form: one row per (leaderboard row, column), macro included; the gaps as a JSON column-free table."""
    records = []
    for rank, row in enumerate(board.rows, 1):
        for column, cell in [*row.cells.items(), (MACRO, row.macro)]:
            if cell is None:
                continue
            records.append({
                "leaderboard": board.definition.name, "rank": rank,
                **{k: v for k, v in zip(board.group_by, row.key)},
                "run_ids": ",".join(row.run_ids), "column": column, "value": cell.value, "ci_low": cell.low,
                "ci_high": cell.high, "interval": cell.interval, "spread": cell.spread, "n_seeds": cell.n_seeds,
                "scoring": cell.scoring, "n": cell.n,
            })
    schema = pa.schema([("leaderboard", pa.string()), ("rank", pa.int32()),
                        *[(k, pa.string()) for k in board.group_by],
                        ("run_ids", pa.string()), ("column", pa.string()), ("value", pa.float64()),
                        ("ci_low", pa.float64()), ("ci_high", pa.float64()), ("interval", pa.string()),
                        ("spread", pa.float64()), ("n_seeds", pa.int32()), ("scoring", pa.string()),
                        ("n", pa.int64())])
    gaps = [{"row": key_text(board, c.row, full=True), "column": c.column, "delta": c.delta, "low": c.low, "high": c.high,
             "p_value": c.p_value, "paired": c.paired, "n_items": c.n_items, "significant": c.significant}
            for c in board.comparisons]
    meta = {"antlm_bench.reference": key_text(board, board.reference, full=True), "antlm_bench.gaps": json.dumps(gaps),
            "antlm_bench.version": __version__}
    return pa.Table.from_pylist(records, schema=schema.with_metadata(meta))


def leaderboard_from_paths(
    results: Sequence[str | Path] = (),
    definition: str | Path | None = None,
    group_by: Sequence[str] | None = None,
    reference: Mapping[str, str] | None = None,
    alpha: float = 0.05,
) -> Leaderboard:
    """The ``antlm-bench leaderboard`` entry point: a definition's results and/or result folders, aggregated."""
    loaded = load_definition(definition) if definition is not None else LeaderboardDefinition()
    paths = [*definition_result_paths(loaded), *map(Path, results)]
    if not paths:
        if loaded.results:
            raise UserError(f"{loaded.source}: results {', '.join(loaded.results)} matched nothing (relative to "
                            f"{loaded.source.parent}); run the study first, or give result folders")
        raise UserError("no results: give result folders, or --definition with a results: list")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha}: must be between 0 and 1")
    results = read_results(paths)
    if definition is None:
        # no definition: the AntLM tasks first, then any other task the tables hold (an --include-path task)
        others = sorted({r["task"] for r in results.rows} - set(loaded.tasks))
        loaded = loaded.model_copy(update={"tasks": [*loaded.tasks, *others]})
    return build_leaderboard(results, loaded, group_by=group_by, reference=reference, alpha=alpha)


FORMATS = ("terminal", "markdown", "html", "parquet")
_SUFFIX_FORMAT = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html", ".parquet": "parquet"}


def format_for(fmt: str | None, out: Path | None) -> str:
    if fmt is None:
        return _SUFFIX_FORMAT.get(out.suffix.lower(), "terminal") if out is not None else "terminal"
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    return fmt


def write_leaderboard(board: Leaderboard, fmt: str, out: Path | None, console: Any,
                      plots: Path | None = None, x: str = "epoch") -> list[Path]:
    """Render ``board`` in ``fmt`` to ``out`` (or the console); write plots to ``plots`` as PNG and SVG."""
    from antlm_bench.data import atomic_write_bytes
    from antlm_bench.tables import write_table_atomic

    written: list[Path] = []
    plot_names: list[str] = []
    if plots is not None:
        for kind in ("png", "svg"):
            image = plot_curves(board, kind, x)
            if image is not None:
                path = plots / f"{board.definition.name}-curves.{kind}"
                atomic_write_bytes(path, image)
                written.append(path)
                if kind == "png":
                    plot_names.append(str(path if out is None else _relative(path, out.parent)))
    if fmt == "parquet":
        if out is None:
            raise UserError("--format parquet needs --out FILE")
        write_table_atomic(board_table(board), out)
        written.append(out)
    elif fmt == "terminal" and out is None:
        render_terminal(board, console)
    else:
        if fmt == "terminal":
            from rich.console import Console

            buffer = io.StringIO()
            render_terminal(board, Console(file=buffer, width=200, no_color=True))
            text = buffer.getvalue()
        elif fmt == "markdown":
            text = render_markdown(board, plot_names)
        else:
            text = render_html(board, x)
        if out is None:
            console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            atomic_write_bytes(out, text.encode("utf-8"))
            written.append(out)
    return written


def _relative(path: Path, base: Path) -> Path:
    try:
        return path.resolve().relative_to(base.resolve())
    except ValueError:
        return path.resolve()
