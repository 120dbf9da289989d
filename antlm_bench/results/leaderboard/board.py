"""The board's data: one row per group of runs (seeds of one configuration), a cell per task, curves."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.checkpoints import RunCheckpoint, base_task, run_checkpoints
from antlm_bench.results.leaderboard.compare import FAMILIES, apply_holm, compare
from antlm_bench.results.leaderboard.curves import curves_of
from antlm_bench.results.leaderboard.definition import (
    GROUP_KEYS,
    METRICS,
    Z95,
    LeaderboardDefinition,
    metric_kind,
    two_choice_task,
)
from antlm_bench.results.leaderboard.model import BoardRow, Cell, Comparison, Leaderboard
from antlm_bench.results.leaderboard.results import Results, run_items
from antlm_bench.results.leaderboard.signal import signal_noise
from antlm_bench.results.stats import ItemMatrix, item_variance
from antlm_bench.results.stats import estimate as stats_estimate
from antlm_bench.runs.identity import labelled_schedule


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


def _cell_item_metric(subtask_metrics: Mapping[str, str]) -> str | None:
    """The metric whose per-item values average to the task's number (``definition.METRICS``' item_value): the
    one metric every subtask reports it by, when that metric has per-item values (accuracy, margin, loss; not F1,
    whose items do not average to it); else None."""
    metrics = set(subtask_metrics.values())
    metric = next(iter(metrics)) if len(metrics) == 1 else None
    return metric if metric_kind(metric).item_value is not None and metric in METRICS else None


def build_leaderboard(
    results: Results,
    definition: LeaderboardDefinition | None = None,
    group_by: Sequence[str] | None = None,
    reference: Mapping[str, str] | None = None,
    alpha: float = 0.05,
    macro_tasks: Sequence[str] | None = None,
    gaps: bool = True,
    family: str = "board",
) -> Leaderboard:
    """Aggregate result rows into a leaderboard; see the module docstring for the rules.

    ``family``: the Holm family of the gaps' p-values (``compare.FAMILIES``): every gap on the board (the
    default), each row's, or none.
    """
    if family not in FAMILIES:
        raise UserError(f"--family {family}: choose one of {', '.join(FAMILIES)}")
    definition = definition or LeaderboardDefinition()
    group_by = list(group_by or definition.group_by)
    for key in group_by:
        if key not in GROUP_KEYS:
            raise UserError(f"--by {key}: unknown key; choose from {', '.join(GROUP_KEYS)}")
    notes: list[str] = list(results.notes)
    _check_metrics_exist(results, definition)
    definition = _one_convention(results, definition, notes)
    checkpoints = run_checkpoints(results, definition, notes)
    if not checkpoints:
        raise UserError(f"no rows for tasks {', '.join(definition.tasks)} in the results "
                        f"({len(results.rows)} rows read); check the task names and filters")

    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for run_id, ckpts in checkpoints.items():
        groups[_group_key(ckpts[-1], group_by)].append(run_id)
    if "run_id" not in group_by and "config_fingerprint" not in group_by:
        groups = _split_configurations(groups, checkpoints, group_by)

    column_set = {c for ckpts in checkpoints.values() for c in ckpts[-1].cells}
    order = {t: i for i, t in enumerate(definition.tasks)}
    columns = sorted(column_set, key=lambda c: (c.split(":")[0] not in order, order.get(c.split(":")[0], 0),
                                                ":" in c, c))
    macro_columns = list(macro_tasks) if macro_tasks is not None else definition.effective_macro_tasks()

    rows = [_row(results, checkpoints, key, sorted(run_ids), group_by, columns, macro_columns)
            for key, run_ids in sorted(groups.items())]
    _check_macro_metrics(rows, macro_columns)
    for row in rows:
        note = chance_note(row)
        if note is not None:
            row.notes.append(note)
    rows.sort(key=lambda r: _rank_key(r, columns))
    ref_row = _find_reference(rows, group_by, reference or definition.reference) if gaps else None
    comparisons: list[Comparison] = []
    if ref_row is not None:
        for row in rows:
            if row is not ref_row:
                comparisons.extend(compare(row, ref_row, columns, macro_columns, alpha, family=family))
    if family == "board":
        apply_holm(comparisons, alpha)
    if any(c.interval == "" for r in rows for c in r.cells.values()):
        notes.append("some cells have no interval (one seed, and rows without ci_low/ci_high or items)")
    return Leaderboard(definition, group_by, columns, macro_columns, rows, comparisons,
                       ref_row.key if ref_row else None, alpha, notes,
                       _newest_result(results, checkpoints), family,
                       signal_noise(rows, columns))


def _newest_result(results: Results, checkpoints: Mapping[str, Any]) -> str:
    """When the newest score row of the board's runs was written: the board's "as of", so that the same results
    render the same board byte for byte (a committed board changes only when its results do), not the time of
    rendering."""
    stamps = [row["created_at"] for row in results.rows
              if row["run_id"] in checkpoints and row["created_at"] is not None]
    return max(stamps).strftime("%Y-%m-%d %H:%M UTC") if stamps else "no result time recorded"


MINIMAL_PAIR_METHODS = ("clm", "pll", "pll-word-l2r", "mntp")


def chance_note(row: BoardRow) -> str | None:
    """One line when every minimal-pair accuracy of the row is within chance: each cell's 95% interval (the one
    the board shows: over seeds and items, or one run's own bootstrap over items) contains 50%."""
    pairs = {column: cell for column, cell in row.cells.items()
             if cell.metric == "accuracy" and cell.scoring in MINIMAL_PAIR_METHODS and two_choice_task(column)}
    if not pairs or any(cell.low is None or cell.high is None or not cell.low <= 0.5 <= cell.high
                        for cell in pairs.values()):
        return None
    tests = sorted({cell.interval for cell in pairs.values() if cell.interval})
    return (f"every minimal-pair task within chance ({', '.join(f'{c} {100 * cell.value:.1f}' for c, cell in pairs.items())}"
            f"): each 95% interval contains 50%, chance for a pair (test: {'; '.join(tests) or 'its interval'})")


def _check_metrics_exist(results: Results, definition: LeaderboardDefinition) -> None:
    """A definition's ``metrics`` name, for each task the results hold, a metric some row of that task has: a
    mistyped one would leave the task's column empty instead of saying why."""
    have: dict[str, set[str]] = defaultdict(set)
    for row in results.rows:
        have[row["task"]].add(row["metric"])
    for task, metric in definition.metrics.items():
        if have.get(task) and metric not in have[task]:
            where = f"{definition.source}: " if definition.source else ""
            raise UserError(f"{where}field metrics: {task}: no row of {task} has metric {metric!r} (its rows have "
                            f"{', '.join(sorted(have[task]))}); name one of those")


def _check_macro_metrics(rows: Sequence[BoardRow], macro_columns: Sequence[str]) -> None:
    """A macro averages percentages of one direction: a column measured by a loss or a margin is refused."""
    for column in macro_columns:
        metric = next((r.cells[column].metric for r in rows if column in r.cells), None)
        if metric is not None and not metric_kind(metric).in_macro:
            kind = metric_kind(metric)
            raise UserError(f"macro_tasks: {column} is measured by {metric} ({kind.unit}"
                            f"{', lower is better' if kind.lower_is_better else ''}), which is never averaged "
                            "with accuracies into a macro; leave it out of macro_tasks")


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


def plain_model_identity(final: RunCheckpoint) -> str | None:
    """What a run of a plain model (one ``eval`` scored without an antlm-bench training record: no recipe) is
    known by: the model folder it scored, else its run id. None for our own runs (their recipe says what they
    are)."""
    if final.meta.get("recipe"):
        return None
    return str(final.meta.get("checkpoint") or "") or str(final.run_id)


def _group_key(final: RunCheckpoint, group_by: Sequence[str]) -> tuple[str, ...]:
    """The configuration a run belongs to. Plain models have no recipe, preset or schedule: two different ones
    would share the empty key and be averaged as if they were seeds of one model, so a plain model's identity
    (its folder) stands in the first grouping column; only evaluations of the same folder pool."""
    key = ["" if final.meta[k] is None else str(final.meta[k]) for k in group_by]
    label = final.meta.get("label")
    if label and "label" not in group_by and group_by:
        # a labelled run (runs.identity) is never a seed of the unlabelled row: its label joins the schedule
        slot = group_by.index("schedule") if "schedule" in group_by else len(group_by) - 1
        key[slot] = labelled_schedule(key[slot], str(label))
    identity = plain_model_identity(final)
    if identity is not None and group_by:
        slot = group_by.index("recipe") if "recipe" in group_by else 0
        key[slot] = identity if not key[slot] else f"{key[slot]} ({identity})"
    return tuple(key)


def run_fingerprint(final: RunCheckpoint, which: str) -> str | None:
    """A run's ``training_fingerprint`` or ``config_fingerprint`` (antlm_bench.results.tables): None when its score
    rows do not record it (tables written before the columns, or a plain model)."""
    value = final.meta.get(which)
    if value is None:
        value = next((row.get(which) for row in final.cells.values() if row.get(which)), None)
    return str(value) if value else None


def _short(fingerprint: str | None) -> str:
    return "unknown" if fingerprint is None else fingerprint[:8]


def _split_configurations(groups: Mapping[tuple[str, ...], list[str]], checkpoints: Mapping[str, list[RunCheckpoint]],
                          group_by: Sequence[str]) -> dict[tuple[str, ...], list[str]]:
    """Runs of two recorded configuration fingerprints are never seeds of one row: a group whose runs record two
    or more splits into one row per fingerprint (runs without one form their own row), the fingerprint shown in
    the last grouping column. Runs without a fingerprint beside runs of a single one stay in the row, which then
    says so (``BoardRow.mixed_configurations``): nothing proves them the same configuration or another."""
    out: dict[tuple[str, ...], list[str]] = {}
    for key, run_ids in groups.items():
        by_fingerprint: dict[str | None, list[str]] = defaultdict(list)
        for run_id in run_ids:
            by_fingerprint[run_fingerprint(checkpoints[run_id][-1], "config_fingerprint")].append(run_id)
        if len([f for f in by_fingerprint if f is not None]) < 2 or not key:
            out[key] = run_ids
            continue
        for fingerprint, members in by_fingerprint.items():
            out[(*key[:-1], f"{key[-1]} [config {_short(fingerprint)}]")] = members
    return out


def _row(results: Results, checkpoints: Mapping[str, list[RunCheckpoint]], key: tuple[str, ...],
         run_ids: list[str], group_by: Sequence[str], columns: Sequence[str], macro_columns: Sequence[str]) -> BoardRow:
    """One configuration: its runs' final checkpoints pooled as seeds, a cell per column, macro and curves."""
    finals = [checkpoints[r][-1] for r in run_ids]
    row = BoardRow(key, run_ids, {}, None,
                   config_fingerprints={f.run_id: run_fingerprint(f, "config_fingerprint") for f in finals})
    if row.mixed_configurations:
        counts = defaultdict(int)
        for fingerprint in row.config_fingerprints.values():
            counts[_short(fingerprint)] += 1
        row.notes.append("seeds from more than one configuration fingerprint ("
                         + ", ".join(f"{name}: {n} run(s)" for name, n in sorted(counts.items()))
                         + "): pooled as one configuration, which nothing proves; re-run the old seeds, or see "
                         "them apart with --by run_id")
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
    row.curves = curves_of(checkpoints, run_ids, columns, macro_columns)
    return row


def _cell(results: Results, present: list[RunCheckpoint], column: str) -> Cell:
    """The seeds of one configuration on one column: their mean, interval (seeds + items) and item tables."""
    cell_rows = [f.cells[column] for f in present]
    values = [r["value"] for r in cell_rows]
    scorings = sorted({r["scoring"] for r in cell_rows})
    task = column.split(":")[0]
    subtasks = {k: v for f in present for k, v in f.subtask_metrics.get((task, scorings[0]), {}).items()}
    cell = Cell(float(np.mean(values)), None, None, _spread(values), len(present), "+".join(scorings),
                int(np.mean([r["n"] or 0 for r in cell_rows])), seed_values=values,
                seed_runs=[f.run_id for f in present], seed_labels=[_seed_label(f) for f in present],
                subtasks=subtasks, seed_digests=[run_fingerprint(f, "weights_digest") for f in present],
                metric=cell_rows[0]["metric"])
    limits = [r["limit"] for r in cell_rows if r["limit"] is not None]
    cell.limit = min(limits) if limits else None
    keys = {tuple(str(f.meta.get(k) or "") for k in ("recipe", "preset", "data_hash")) for f in present}
    cell.tokenizer_key = keys.pop() if len(keys) == 1 else None
    cell.items = _group_items(results, present, column, scorings)
    cell.item_var = item_variance(cell.items) if cell.items is not None else _item_var_from_rows(cell_rows)
    own = cell_rows[0] if len(cell_rows) == 1 else None
    _set_interval(cell, None if own is None or own["ci_low"] is None or own["ci_high"] is None
                  else (float(own["ci_low"]), float(own["ci_high"])))
    return cell


def _seed_label(final: RunCheckpoint) -> str:
    seed = final.meta.get("seed")
    return final.run_id if seed is None else str(seed)


ONE_RUN_INTERVAL = "the run's own 95% interval, as eval printed it (1 seed: items only)"


def _set_interval(cell: Cell, own: tuple[float, float] | None = None) -> None:
    """95% interval over seeds and items (``stats.estimate``), cut at the metric's range (``bound_interval``);
    none when neither part is known.

    One run's cell shows the interval its evaluation computed (``own``: the score row's ci_low/ci_high, the task's
    own method: a stratified, grouped or cluster bootstrap), so that ``eval`` and the board print one interval for
    one run; the item variance (``cell.item_var``) still feeds the gaps."""
    if own is not None and cell.n_seeds == 1:
        cell.low, cell.high = own
        cell.interval = ONE_RUN_INTERVAL
    elif cell.item_var is None and cell.n_seeds < 2:
        return
    else:
        estimate = stats_estimate(cell.seed_values, cell.item_var or 0.0)
        cell.low, cell.high = estimate.low, estimate.high
        cell.interval = estimate.method + ("" if cell.item_var is not None else " (no item interval)")
    cell.low, cell.high, cell.bounded = bound_interval(cell.value, cell.low, cell.high, cell.metric)


def bound_interval(value: float, low: float, high: float, metric: str) -> tuple[float, float, str]:
    """``(low, high, how)``: the interval cut at the metric's range (``MetricKind.bounds``: a percentage 0..1, a
    Spearman correlation -1..1, a loss from 0, a margin unbounded): ``how`` is "clipped" when an end was cut,
    "uninformative" when the interval is at least as wide as the whole range (cutting it would hide that: a
    2-seed accuracy of 44 [-17.7, 105.7] says nothing), else "". A value outside the range means the range does
    not fit this metric: nothing is cut."""
    lowest, highest = metric_kind(metric).bounds
    if (lowest is not None and value < lowest) or (highest is not None and value > highest):
        return low, high, ""
    cut_low = low if lowest is None else max(low, lowest)
    cut_high = high if highest is None else min(high, highest)
    if lowest is not None and highest is not None and high - low >= highest - lowest:
        return cut_low, cut_high, "uninformative"
    return cut_low, cut_high, "clipped" if (cut_low, cut_high) != (low, high) else ""


def _group_items(results: Results, present: list[RunCheckpoint], column: str,
                 scorings: list[str]) -> dict[str, ItemMatrix] | None:
    """Per-seed item values of one cell (under its metric) on the items every seed has, when every run has item
    tables."""
    if len(scorings) != 1:
        return None
    task, scoring = column.split(":")[0], scorings[0]
    per_seed = []
    for final in present:
        metrics = final.subtask_metrics.get((task, scoring), {})
        metric = _cell_item_metric(metrics)
        if metric is None:
            return None
        row = final.cells[column]
        items = run_items(results, final.run_id, row, base_task(row["task"], metric), scoring, sorted(metrics),
                          metric)
        if items is None:
            return None
        per_seed.append(items)
    if any(set(items) != set(per_seed[0]) for items in per_seed[1:]):
        return None  # the seeds scored other subtasks: no item-level statistic of the cell
    out: dict[str, ItemMatrix] = {}
    for subtask in per_seed[0]:
        ids = per_seed[0][subtask][0]
        if all(np.array_equal(ids, other[subtask][0]) for other in per_seed[1:]):  # the usual case: one item set
            rows = [correct for _, correct, _ in (s[subtask] for s in per_seed)]
            groups = next((g for _, _, g in (s[subtask] for s in per_seed) if g is not None), None)
            out[subtask] = ItemMatrix(ids, np.stack(rows), groups)
            continue
        for other in per_seed[1:]:
            ids = np.intersect1d(ids, other[subtask][0])
        if ids.size == 0:  # the seeds share no item of this subtask: no item-level statistic of the cell
            return None
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
    fingerprints = [cells[0].seed_digests[cells[0].seed_runs.index(r)] for r in runs]
    item_vars = [c.item_var for c in cells]
    macro = Cell(float(np.mean(per_seed)), None, None, _spread(per_seed), len(runs), "auto", seed_values=per_seed,
                 seed_runs=runs, seed_labels=labels, seed_digests=fingerprints)
    macro.item_var = None if None in item_vars else sum(item_vars) / len(cells) ** 2
    limits = [c.limit for c in cells if c.limit is not None]
    macro.limit = min(limits) if limits else None
    _set_interval(macro)
    return macro


def _rank_key(row: BoardRow, columns: Sequence[str]) -> tuple:
    """The board's one ranking, which every format shows (``text.RANK_RULE`` words it). Rows whose numbers all
    stand on every item first, then rows on a subset of the items (a ``--limit``: other, fewer items, never
    comparable with a full evaluation), larger subsets first; within each, macro descending; rows without a macro
    after, by their mean over the percentage columns they have (the metrics a macro may average), else by their
    first column, best first (a loss: lowest first)."""
    subset = (row.limit is not None, -(row.limit or 0))
    if row.macro is not None:
        return (*subset, 0, -row.macro.value, row.key)
    cells = [row.cells[c] for c in columns if c in row.cells and ":" not in c]
    have = [c.value for c in cells if metric_kind(c.metric).in_macro]
    if have:
        return (*subset, 1, -float(np.mean(have)), row.key)
    if cells:
        return (*subset, 2, cells[0].value if metric_kind(cells[0].metric).lower_is_better else -cells[0].value,
                row.key)
    return (*subset, 3, 0.0, row.key)


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

