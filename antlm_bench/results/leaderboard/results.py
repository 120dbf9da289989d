"""Reading result tables: score rows of every run, and a run's per-item values for one cell."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.definition import REQUIRED_COLUMNS, metric_kind
from antlm_bench.results.store import find_results, read_results_folder, score_parts

# ----------------------------------------------------------------------------------------------------------
# reading result tables


@dataclass
class Results:
    """Standing score rows of every results folder read (the latest row of every key, see antlm_bench.results.store)."""

    rows: list[dict[str, Any]]
    items_sources: dict[str, Path]  # run_id -> the first results store (or old file) holding items of that run
    files: list[Path]  # the results stores (scores.parquet folders) and old single scores.parquet files read
    notes: list[str] = field(default_factory=list)


def _check_columns(part: Path) -> None:
    try:
        names = set(pq.read_schema(part).names)
    except (pa.ArrowException, OSError) as err:
        raise UserError(f"{part}: not a readable Parquet file ({err}); re-run the evaluation") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise UserError(f"{part}: not a scores table (columns {', '.join(missing)} missing)")


def read_results(paths: Sequence[str | Path]) -> Results:
    """Every results store under ``paths``; a missing path or none at all: UserError."""
    rows: list[dict[str, Any]] = []
    items_sources: dict[str, Path] = {}
    run_files: dict[str, list[Path]] = defaultdict(list)
    files = find_results(paths)
    empty: list[Path] = []
    for source in files:
        for part in score_parts(source):
            _check_columns(part)
        stored = read_results_folder(source, with_items=False)
        file_rows = stored.scores.to_pylist()
        if not file_rows:
            empty.append(source)
        has_items = _has_items(source)
        for run_id in dict.fromkeys(row["run_id"] for row in file_rows):
            run_files[run_id].append(source)
            if has_items:
                items_sources.setdefault(run_id, source)
        rows.extend(file_rows)
    notes = [f"run {run_id} appears in {len(found)} tables ({', '.join(str(f) for f in found)}): its rows are "
             "merged as one run (a copy of a run folder?)" for run_id, found in run_files.items() if len(found) > 1]
    notes += [f"{source}: no score rows (a run that was never evaluated, or whose evaluation failed); nothing of "
              "it is on the board" for source in empty]
    return Results(rows, items_sources, files, notes)


def _has_items(source: Path) -> bool:
    from antlm_bench.results.store import ITEMS_PART

    return any((part.parent / ITEMS_PART).is_file() for part in score_parts(source))


_items_cache: dict[tuple[str, tuple], pa.Table] = {}


def _stamp(source: Path) -> tuple:
    """What changes when a results folder does: its committed events."""
    return tuple(p.parent.name for p in score_parts(source))


def _read_items_table(source: Path) -> pa.Table:
    key = (str(source), _stamp(source))
    if key not in _items_cache:
        try:
            items = read_results_folder(source).items
        except UserError as err:
            raise UserError(f"{err}; re-run with --log-samples") from None
        if items is None:
            from antlm_bench.results.tables import ITEM_SCHEMA

            items = ITEM_SCHEMA.empty_table()
        _items_cache[key] = items.select(["run_id", "checkpoint", "phase_index", "scoring", "task", "subtask",
                                          "item_id", "group_id", "correct", "score_good", "score_bad", "value"])
    return _items_cache[key]


def _eq(column: pa.ChunkedArray, value: Any) -> pa.ChunkedArray:
    return pc.is_null(column) if value is None else pc.fill_null(pc.equal(column, value), False)


def _item_values(table: pa.Table, metric: str) -> np.ndarray:
    """Each item's value under ``metric`` (``definition.METRICS``: accuracy -> correct, margin -> score_good -
    score_bad, loss -> value), NaN where an item lacks it."""
    column = metric_kind(metric).item_value
    if column == "margin":
        values = pc.subtract(table["score_good"], table["score_bad"])
    elif column is not None:
        values = table[column]
    else:
        raise ValueError(f"metric {metric!r} has no per-item value")
    return np.asarray(pc.fill_null(pc.cast(values, pa.float64()), float("nan")).to_numpy(zero_copy_only=False),
                      dtype=np.float64)


def run_items(results: Results, run_id: str, meta: Mapping[str, Any], task: str, scoring: str,
              subtasks: Iterable[str], metric: str = "accuracy",
              ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] | None:
    """One run's items of one cell (``meta``: its score row), subtask -> (sorted ids, each item's value under
    ``metric``, groups). The items table holds the base task's items: a ``task.metric`` column reads ``task``'s.

    None when a subtask has no items, or an item lacks the metric's value, so that an interval or a gap is never
    computed on part of a task.
    """
    source = results.items_sources.get(run_id)
    if source is None:
        return None
    table = _read_items_table(source)
    mask = pc.and_(pc.and_(_eq(table["run_id"], run_id), _eq(table["task"], task)), _eq(table["scoring"], scoring))
    mask = pc.and_(mask, _eq(table["phase_index"], meta["phase_index"]))
    if meta["checkpoint"]:
        mask = pc.and_(mask, _eq(table["checkpoint"], meta["checkpoint"]))
    chosen = table.filter(mask)
    by_subtask: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}
    subtask_col = np.asarray(chosen["subtask"].to_pylist(), dtype=object)
    ids_all = np.asarray(chosen["item_id"].to_pylist(), dtype=object).astype(str)
    values_all = _item_values(chosen, metric)
    groups_all = chosen["group_id"].to_pylist()
    for subtask in subtasks:
        where = np.flatnonzero(subtask_col == subtask)
        if where.size == 0:
            return None
        # the last record of an item wins (the store already keeps one per item and seed; GLUE's seeds repeat
        # an item, and this keeps one of them, as before); np.unique keeps the first, so reverse
        rev = where[::-1]
        uniq, first = np.unique(ids_all[rev], return_index=True)
        pick = rev[first]
        groups = [groups_all[i] for i in pick]
        group_array = None if all(g is None for g in groups) else np.asarray(
            [g if g is not None else f"_item_{uid}" for g, uid in zip(groups, uniq)], dtype=object).astype(str)
        if np.isnan(values_all[pick]).any():
            return None
        by_subtask[subtask] = (uniq, values_all[pick], group_array)
    return by_subtask
