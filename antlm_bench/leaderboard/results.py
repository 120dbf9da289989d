"""Reading result tables: score rows of every run, and a run's per-item correctness for one cell."""

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
from antlm_bench.leaderboard.definition import REQUIRED_COLUMNS
from antlm_bench.tables import ITEMS_FILE, find_score_files, read_scores

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


def run_items(results: Results, run_id: str, meta: Mapping[str, Any], task: str, scoring: str,
              subtasks: Iterable[str]) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] | None:
    """One run's items of one cell (``meta``: its score row), subtask -> (sorted ids, correct, groups).

    None when a subtask has no items, so that an interval or a gap is never computed on part of a task.
    """
    path = results.items_files.get(run_id)
    if path is None:
        return None
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
