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

from antlm_bench.results.leaderboard.definition import metric_kind
from antlm_bench.results.store import StoreReader, find_results, key_codes

# ----------------------------------------------------------------------------------------------------------
# reading result tables


@dataclass
class Results:
    """Standing score rows of every results folder read (the latest row of every key, see antlm_bench.results.store),
    and the reader that read them, which holds their items for ``run_items``."""

    rows: list[dict[str, Any]]
    items_sources: dict[str, Path]  # run_id -> the first results store (or old file) holding items of that run
    files: list[Path]  # the results stores (scores.parquet folders) and old single scores.parquet files read
    notes: list[str] = field(default_factory=list)
    reader: StoreReader[ItemIndex] = field(default_factory=lambda: results_reader())


def results_reader() -> StoreReader[ItemIndex]:
    """A command's reader of result tables: each store read once, its items kept as an :class:`ItemIndex`."""
    return StoreReader(ItemIndex.build)


def read_results(paths: Sequence[str | Path], reader: StoreReader[ItemIndex] | None = None) -> Results:
    """Every results store under ``paths``, each read once (``reader``: the command's, shared with what else it
    reads); a missing path or none at all: UserError."""
    reader = reader if reader is not None else results_reader()
    rows: list[dict[str, Any]] = []
    items_sources: dict[str, Path] = {}
    run_files: dict[str, list[Path]] = defaultdict(list)
    files = find_results(paths)
    empty: list[Path] = []
    for source in files:
        stored = reader.read(source)
        file_rows = stored.scores.to_pylist()
        if not file_rows:
            empty.append(source)
        has_items = stored.items is not None
        for run_id in dict.fromkeys(row["run_id"] for row in file_rows):
            run_files[run_id].append(source)
            if has_items:
                items_sources.setdefault(run_id, source)
        rows.extend(file_rows)
    notes = [f"run {run_id} appears in {len(found)} tables ({', '.join(str(f) for f in found)}): its rows are "
             "merged as one run (a copy of a run folder?)" for run_id, found in run_files.items() if len(found) > 1]
    notes += [f"{source}: no score rows (a run that was never evaluated, or whose evaluation failed); nothing of "
              "it is on the board" for source in empty]
    return Results(rows, items_sources, files, notes, reader)


# what a cell's items are looked up by (results.store's ITEM_GROUP less the subtask)
_SLICE = ("run_id", "checkpoint", "phase_index", "scoring", "task")


@dataclass
class ItemIndex:
    """One store's standing items, arranged once for every cell's lookup: sorted by (slice, subtask, item id), one
    row per item of a slice (the last record of an item wins, as the store keeps one per item and seed and GLUE's
    seeds repeat an item), each metric's per-item values as float64 (NaN where an item lacks it)."""

    slices: dict[tuple, dict[str, tuple[int, int]]]  # (run, checkpoint, phase, scoring, task) -> subtask -> rows
    ids: np.ndarray  # item ids (str), ascending within each slice's subtask
    # each item's cluster as a code that sorts as the cluster names do (an item without one: "_item_<id>"), so
    # that a statistic that orders clusters orders them as by name; and whether the item named a cluster
    clusters: np.ndarray
    grouped: np.ndarray
    values: dict[str, np.ndarray]  # item_value column (correct, margin, value) -> per-row values
    position: np.ndarray  # each row's position in the store's items (the record order)

    @classmethod
    def build(cls, items: pa.Table) -> ItemIndex:
        if items.num_rows == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls({}, np.zeros(0, dtype=str), empty, empty.astype(bool), {}, empty)
        keys = [*_SLICE, "subtask"]
        # every sort on integers: a slice's code (in no particular order: only the items within a slice are
        # ordered), each id's rank among the store's distinct ids (ascending as strings), the record's position
        slice_code = key_codes(items, keys)
        # an item without an id reads as "None", as it always has
        id_rank, id_values = _ranked(pc.fill_null(items["item_id"], "None"))
        order = np.lexsort((np.arange(items.num_rows), id_rank, slice_code))
        slice_sorted, rank_sorted = slice_code[order], id_rank[order]
        # the last record of an item in its slice wins (a stable order: the last of equal keys is the latest)
        last = np.append((slice_sorted[1:] != slice_sorted[:-1]) | (rank_sorted[1:] != rank_sorted[:-1]), True)
        order, slice_sorted = order[last], slice_sorted[last]
        starts = np.flatnonzero(np.append(True, slice_sorted[1:] != slice_sorted[:-1]))
        ends = np.append(starts[1:], order.size)
        slices: dict[tuple, dict[str, tuple[int, int]]] = defaultdict(dict)
        heads = items.select(keys).take(pa.array(order[starts], pa.int64())).to_pylist()
        for head, begin, end in zip(heads, starts.tolist(), ends.tolist()):
            slices[tuple(head[k] for k in _SLICE)][head["subtask"]] = (begin, end)
        ids = id_values[id_rank[order]]
        # clusters: the group's name, or "_item_<id>" for an item without one; coded in the names' order
        grouped = np.asarray(pc.is_valid(items["group_id"]).to_numpy(zero_copy_only=False), dtype=bool)[order]
        group_rank, group_values = _ranked(pc.fill_null(items["group_id"], ""))
        alone = np.char.add("_item_", id_values)
        names = np.unique(np.concatenate([group_values, alone]))
        clusters = np.where(grouped, np.searchsorted(names, group_values)[group_rank[order]],
                            np.searchsorted(names, alone)[id_rank[order]])

        def floats(name: str) -> np.ndarray:
            return np.asarray(pc.fill_null(pc.cast(items[name], pa.float64()), float("nan")).to_numpy(
                zero_copy_only=False), dtype=np.float64)[order]

        return cls(dict(slices), ids, clusters.astype(np.int64), grouped,
                   {"correct": floats("correct"), "value": floats("value"),
                    "margin": floats("score_good") - floats("score_bad")}, order)

    def subtask_items(self, key: tuple, subtask: str, metric: str) -> tuple[np.ndarray, np.ndarray,
                                                                              np.ndarray | None] | None:
        """One subtask of one slice: (ids ascending, each item's value under ``metric``, cluster codes or None when
        no item names a cluster); None when the slice lacks the subtask."""
        found = self.slices.get(key, {}).get(subtask)
        if found is None:
            return None
        return self._items(np.arange(*found), metric)

    def any_checkpoint_items(self, key: tuple, subtask: str, metric: str) -> tuple[np.ndarray, np.ndarray,
                                                                                     np.ndarray | None] | None:
        """As :meth:`subtask_items` for a score row without a checkpoint: the items of every checkpoint of
        (run, phase, scoring, task), the last record of an item winning."""
        run_id, _, phase, scoring, task = key
        rows = [np.arange(*found[subtask]) for (r, _, p, s, t), found in self.slices.items()
                if (r, p, s, t) == (run_id, phase, scoring, task) and subtask in found]
        if not rows:
            return None
        rows_all = np.concatenate(rows)
        rows_all = rows_all[np.lexsort((self.position[rows_all], self.ids[rows_all]))]
        ids = self.ids[rows_all]
        return self._items(rows_all[np.append(ids[1:] != ids[:-1], True)], metric)

    def _items(self, rows: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        column = metric_kind(metric).item_value
        if column is None:
            raise ValueError(f"metric {metric!r} has no per-item value")
        clusters = self.clusters[rows] if self.grouped[rows].any() else None
        return self.ids[rows], self.values[column][rows], clusters


def _ranked(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's rank among the column's distinct values (ascending as strings, as numpy orders them), and those
    values in that order: sorting the few distinct values, not every row."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    values = np.asarray(encoded.dictionary.to_numpy(zero_copy_only=False)).astype(str)
    order = np.argsort(values, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank[np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)], values[order]


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
    index = results.reader.read(source).items
    if index is None:
        return None
    key = (run_id, meta["checkpoint"], meta["phase_index"], scoring, task)
    by_subtask: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}
    for subtask in subtasks:
        found = (index.subtask_items(key, subtask, metric) if meta["checkpoint"]
                 else index.any_checkpoint_items(key, subtask, metric))
        if found is None or np.isnan(found[1]).any():
            return None
        by_subtask[subtask] = found
    return by_subtask
