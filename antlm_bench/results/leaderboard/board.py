"""The board's data: one row per group of runs (seeds of one configuration), a cell per task, curves."""

from __future__ import annotations

import datetime as _dt
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from antlm_bench.training.checkpoint_state import SCORING_FOR_OBJECTIVE, dominant_objective
from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.compare import compare
from antlm_bench.results.leaderboard.definition import (
    GROUP_KEYS,
    MACRO,
    SCORING_PREFERENCE,
    SEPARATE_SCORING,
    Z95,
    LeaderboardDefinition,
)
from antlm_bench.results.leaderboard.model import BoardRow, Cell, Comparison, CurvePoint, Leaderboard
from antlm_bench.results.leaderboard.results import Results, run_items
from antlm_bench.results.stats import ItemMatrix, item_variance
from antlm_bench.results.stats import estimate as stats_estimate


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


# a row without the column (read from somewhere other than a store, which fills it) has the default convention
_UNSET = {"convention": "babylm-2025"}


def _checkpoints(results: Results, definition: LeaderboardDefinition) -> dict[str, list[_RunCheckpoint]]:
    """run_id -> its checkpoints in training order, each with one chosen row per column."""
    filters = {k: set(map(str, v)) for k, v in definition.filters.items()}
    by_run_ckpt: dict[str, dict[tuple, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in results.rows:
        # "task.metric" in a definition's tasks is a column of its own: reading's eye_tracking and
        # self_paced_reading are two numbers of one task, never averaged into one
        split = f"{row['task']}.{row['metric']}"
        if split in definition.tasks:
            row = {**row, "task": split}
        if row["task"] not in definition.tasks or row["value"] is None or not math.isfinite(row["value"]):
            continue
        if any(str(row.get(k) or _UNSET.get(k)) not in allowed for k, allowed in filters.items()):
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
            # the run's training seed: GLUE rows carry their fine-tuning seed instead
            trained = [r["seed"] for r in rows if r["scoring"] not in ("finetune", "probe") and r["seed"] is not None]
            meta["seed"] = trained[0] if trained else meta["seed"]
            variants = {column: by_limit[(column, row["metric"], row["scoring"])] for column, row in cells.items()}
            out[run_id].append(_RunCheckpoint(run_id, ckpt, meta, cells, dict(subtask_metrics), variants))
    return out


def _item_var_from_rows(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Item variance of a seed mean from each seed's own 95% interval: the mean of their squared standard errors.

    Without per-item tables the seeds' item errors cannot be separated from their seed-by-item residual, so this
    counts the residual twice (once here, once in the seeds' spread): conservative.
    """
    if any(r["ci_low"] is None or r["ci_high"] is None for r in rows):
        return None
    return float(np.mean([((r["ci_high"] - r["ci_low"]) / (2 * Z95)) ** 2 for r in rows]))


def _spread(values: Sequence[float]) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) > 1 else None








def _cell_items_usable(task: str, subtask_metrics: Mapping[str, str]) -> bool:
    """Item correctness averages to the task score only when every subtask's metric is an accuracy (not F1)."""
    return bool(subtask_metrics) and all(m == "accuracy" for m in subtask_metrics.values())


def build_leaderboard(
    results: Results,
    definition: LeaderboardDefinition | None = None,
    group_by: Sequence[str] | None = None,
    reference: Mapping[str, str] | None = None,
    alpha: float = 0.05,
    macro_tasks: Sequence[str] | None = None,
    gaps: bool = True,
    holm: bool = False,
) -> Leaderboard:
    """Aggregate result rows into a leaderboard; see the module docstring for the rules."""
    definition = definition or LeaderboardDefinition()
    group_by = list(group_by or definition.group_by)
    for key in group_by:
        if key not in GROUP_KEYS:
            raise UserError(f"--by {key}: unknown key; choose from {', '.join(GROUP_KEYS)}")
    notes: list[str] = list(results.notes)
    definition = _one_convention(results, definition, notes)
    checkpoints = _checkpoints(results, definition)
    if not checkpoints:
        raise UserError(f"no rows for tasks {', '.join(definition.tasks)} in the results "
                        f"({len(results.rows)} rows read); check the task names and filters")

    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for run_id, ckpts in checkpoints.items():
        groups[_group_key(ckpts[-1], group_by)].append(run_id)

    column_set = {c for ckpts in checkpoints.values() for c in ckpts[-1].cells}
    order = {t: i for i, t in enumerate(definition.tasks)}
    columns = sorted(column_set, key=lambda c: (c.split(":")[0] not in order, order.get(c.split(":")[0], 0),
                                                ":" in c, c))
    macro_columns = list(macro_tasks) if macro_tasks is not None else definition.effective_macro_tasks()

    rows = [_row(results, checkpoints, key, sorted(run_ids), group_by, columns, macro_columns)
            for key, run_ids in sorted(groups.items())]
    rows.sort(key=lambda r: _rank_key(r, columns))
    ref_row = _find_reference(rows, group_by, reference or definition.reference) if gaps else None
    comparisons: list[Comparison] = []
    if ref_row is not None:
        for row in rows:
            if row is not ref_row:
                comparisons.extend(compare(row, ref_row, columns, macro_columns, alpha, holm=holm))
    if any(c.interval == "" for r in rows for c in r.cells.values()):
        notes.append("some cells have no interval (one seed, and rows without ci_low/ci_high or items)")
    return Leaderboard(definition, group_by, columns, macro_columns, rows, comparisons,
                       ref_row.key if ref_row else None, alpha, notes,
                       _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), holm)


def _one_convention(results: Results, definition: LeaderboardDefinition, notes: list[str]) -> LeaderboardDefinition:
    """A board ranks rows of ONE scoring convention (antlm_bench.conventions): the definition's
    ``filters.convention`` if it names one, else babylm-2025 where any row has it, else the one the rows have. Rows
    of another convention are left out, and a note says how many and why (a leading space alone moved a tiny
    model's BLiMP by more than most gaps between schedules)."""
    from antlm_bench.conventions import DEFAULT_CONVENTION

    present: dict[str, int] = defaultdict(int)
    for row in results.rows:
        if row["task"] in definition.tasks or f"{row['task']}.{row['metric']}" in definition.tasks:
            present[str(row.get("convention") or DEFAULT_CONVENTION)] += 1
    wanted = definition.filters.get("convention")
    chosen = [str(v) for v in wanted] if wanted else (
        [DEFAULT_CONVENTION] if DEFAULT_CONVENTION in present or not present else [sorted(present)[0]])
    left = {name: n for name, n in present.items() if name not in chosen}
    if left:
        shown = ", ".join(f"{n} row(s) scored under {name}" for name, n in sorted(left.items()))
        notes.append(f"convention {'/'.join(chosen)} only: {shown} left out (scoring conventions are never ranked "
                     "together; a definition's filters.convention picks one)")
    elif chosen != [DEFAULT_CONVENTION]:
        notes.append(f"scored under the {'/'.join(chosen)} convention")
    return definition.model_copy(update={"filters": {**definition.filters, "convention": chosen}})


def plain_model_identity(final: _RunCheckpoint) -> str | None:
    """What a run of a plain model (one ``eval`` scored without an antlm-bench training record: no recipe) is
    known by: the model folder it scored, else its run id. None for our own runs (their recipe says what they
    are)."""
    if final.meta.get("recipe"):
        return None
    return str(final.meta.get("checkpoint") or "") or str(final.run_id)


def _group_key(final: _RunCheckpoint, group_by: Sequence[str]) -> tuple[str, ...]:
    """The configuration a run belongs to. Plain models have no recipe, preset or schedule: two different ones
    would share the empty key and be averaged as if they were seeds of one model, so a plain model's identity
    (its folder) stands in the first grouping column; only evaluations of the same folder pool."""
    key = ["" if final.meta[k] is None else str(final.meta[k]) for k in group_by]
    identity = plain_model_identity(final)
    if identity is not None and group_by:
        slot = group_by.index("recipe") if "recipe" in group_by else 0
        key[slot] = identity if not key[slot] else f"{key[slot]} ({identity})"
    return tuple(key)


def _row(results: Results, checkpoints: Mapping[str, list[_RunCheckpoint]], key: tuple[str, ...],
         run_ids: list[str], group_by: Sequence[str], columns: Sequence[str], macro_columns: Sequence[str]) -> BoardRow:
    """One configuration: its runs' final checkpoints pooled as seeds, a cell per column, macro and curves."""
    finals = [checkpoints[r][-1] for r in run_ids]
    row = BoardRow(key, run_ids, {}, None)
    for k in ("recipe", "preset", "schedule", "limit", "data_hash"):
        if k not in group_by:
            distinct = sorted({str(f.meta[k]) for f in finals if f.meta[k] not in (None, "")})
            if len(distinct) > 1:
                shown = [d[:12] for d in distinct] if k == "data_hash" else distinct
                row.notes.append(f"pools runs of several {k}s: {', '.join(shown)}")
    if "seed" not in group_by and "run_id" not in group_by:
        seeds = [str(f.meta["seed"]) for f in finals if f.meta["seed"] is not None]
        repeated = sorted({s for s in seeds if seeds.count(s) > 1})
        if repeated:
            row.notes.append(f"{len(finals)} runs but seed(s) {', '.join(repeated)} appear more than once: the "
                             "interval treats them as independent seeds; use --by run_id to see them apart")
    for column in columns:
        present = [f for f in finals if column in f.cells]
        if not present:
            continue
        if len(present) < len(finals):
            row.notes.append(f"{column}: {len(present)} of {len(finals)} runs scored")
        row.cells[column] = _cell(results, present, column)
    row.macro = macro_cell(row, macro_columns)
    row.curves = _curves(checkpoints, run_ids, columns, macro_columns)
    return row


def _cell(results: Results, present: list[_RunCheckpoint], column: str) -> Cell:
    """The seeds of one configuration on one column: their mean, interval (seeds + items) and item tables."""
    cell_rows = [f.cells[column] for f in present]
    values = [r["value"] for r in cell_rows]
    scorings = sorted({r["scoring"] for r in cell_rows})
    task = column.split(":")[0]
    subtasks = {k: v for f in present for k, v in f.subtask_metrics.get((task, scorings[0]), {}).items()}
    cell = Cell(float(np.mean(values)), None, None, _spread(values), len(present), "+".join(scorings),
                int(np.mean([r["n"] or 0 for r in cell_rows])), seed_values=values,
                seed_runs=[f.run_id for f in present], seed_labels=[_seed_label(f) for f in present],
                subtasks=subtasks)
    cell.items = _group_items(results, present, column, scorings)
    cell.item_var = item_variance(cell.items) if cell.items is not None else _item_var_from_rows(cell_rows)
    _set_interval(cell)
    return cell


def _seed_label(final: _RunCheckpoint) -> str:
    seed = final.meta.get("seed")
    return final.run_id if seed is None else str(seed)


def _set_interval(cell: Cell) -> None:
    """95% interval over seeds and items (``stats.estimate``); none when neither part is known."""
    if cell.item_var is None and cell.n_seeds < 2:
        return
    estimate = stats_estimate(cell.seed_values, cell.item_var or 0.0)
    cell.low, cell.high = estimate.low, estimate.high
    cell.interval = estimate.method + ("" if cell.item_var is not None else " (no item interval)")


def _group_items(results: Results, present: list[_RunCheckpoint], column: str,
                 scorings: list[str]) -> dict[str, ItemMatrix] | None:
    """Per-seed correctness of one cell on the items every seed has, when every run has item tables."""
    if len(scorings) != 1:
        return None
    task, scoring = column.split(":")[0], scorings[0]
    per_seed = []
    for final in present:
        metrics = final.subtask_metrics.get((task, scoring), {})
        if not _cell_items_usable(task, metrics):
            return None
        items = run_items(results, final.run_id, final.cells[column], task, scoring, sorted(metrics))
        if items is None:
            return None
        per_seed.append(items)
    out: dict[str, ItemMatrix] = {}
    for subtask in per_seed[0]:
        ids = per_seed[0][subtask][0]
        for other in per_seed[1:]:
            ids = np.intersect1d(ids, other[subtask][0])
        rows = [correct[np.searchsorted(seed_ids, ids)] for seed_ids, correct, _ in (s[subtask] for s in per_seed)]
        groups = next((g[np.searchsorted(i, ids)] for i, _, g in (s[subtask] for s in per_seed) if g is not None),
                      None)
        out[subtask] = ItemMatrix(ids, np.stack(rows), groups)
    return out


def macro_cell(row: BoardRow, macro_columns: Sequence[str]) -> Cell | None:
    """Mean of ``macro_columns``; None when the row lacks one of them.

    Per seed, the macro is the mean of that run's task scores (runs that scored every macro task); the tasks use
    disjoint items, so their item variances add: Var_items(macro) = sum_t Var_items(t) / T^2.
    """
    if not macro_columns or any(c not in row.cells for c in macro_columns):
        return None
    cells = [row.cells[c] for c in macro_columns]
    runs = [r for r in cells[0].seed_runs if all(r in c.seed_runs for c in cells)]
    if not runs:
        return None
    per_seed = [float(np.mean([c.seed_values[c.seed_runs.index(r)] for c in cells])) for r in runs]
    labels = [cells[0].seed_labels[cells[0].seed_runs.index(r)] for r in runs]
    item_vars = [c.item_var for c in cells]
    macro = Cell(float(np.mean(per_seed)), None, None, _spread(per_seed), len(runs), "auto", seed_values=per_seed,
                 seed_runs=runs, seed_labels=labels)
    macro.item_var = None if None in item_vars else sum(item_vars) / len(cells) ** 2
    _set_interval(macro)
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
                points[column][at].append((ckpt, cell_row["value"], cell_row["scoring"], cell_row["ci_low"],
                                           cell_row["ci_high"], cell_row["limit"]))
            if macro_columns and all(c in chosen for c in macro_columns):
                value = float(np.mean([chosen[c]["value"] for c in macro_columns]))
                methods = "/".join(sorted({chosen[c]["scoring"] for c in macro_columns},
                                          key=lambda m: (m in ("finetune", "probe"), m)))
                limits = {chosen[c]["limit"] for c in macro_columns}
                points[MACRO][at].append((ckpt, value, methods, None, None, limits.pop() if len(limits) == 1
                                          else None))
    curves: dict[str, list[CurvePoint]] = {}
    for column in [*columns, MACRO]:
        if column not in points:
            continue
        curve = []
        for at in sorted(points[column]):
            entries = points[column][at]
            meta = entries[0][0].meta
            tokens = [e[0].meta["tokens_seen"] for e in entries if e[0].meta["tokens_seen"] is not None]
            bounds = [(e[3], e[4]) for e in entries if e[3] is not None and e[4] is not None]
            limits = {e[5] for e in entries}
            curve.append(CurvePoint(meta["phase_index"], meta["epoch"], float(np.mean(tokens)) if tokens else None,
                                    float(np.mean([e[1] for e in entries])),
                                    "+".join(dict.fromkeys(e[2] for e in entries)),
                                    float(np.mean([b[0] for b in bounds])) if len(bounds) == len(entries) else None,
                                    float(np.mean([b[1] for b in bounds])) if len(bounds) == len(entries) else None,
                                    limits.pop() if len(limits) == 1 else None, len(entries)))
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

