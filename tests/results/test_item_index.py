"""The one-pass item lookup (``results.leaderboard.results.ItemIndex``, built once per store and command) gives
exactly what a plain reference gives: for every cell, the items a run scored, the last record of an item winning,
ids ascending, each metric's values, the clusters in the order of their names; and the board's per-seed item
matrices hold exactly the items every seed shares. Random stores: several runs and events, re-evaluations that
replace items, ties, items a seed lacks, missing subtasks and tasks, one-seed rows, clusters and none, ids of
every length."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest

from antlm_bench.results.leaderboard import build_leaderboard, read_results
from antlm_bench.results.leaderboard.definition import LeaderboardDefinition
from antlm_bench.results.leaderboard.results import run_items
from antlm_bench.results.store import commit_results, read_results_folder
from antlm_bench.results.tables import CheckpointInfo, RunInfo, ScoreRow, item_table, score_table

TASKS = {"blimp": ["anaphor", "island", "npi"], "ewok": ["agent", "social"]}


def _random_store(root, rng: np.random.Generator) -> None:
    seeds = int(rng.integers(1, 4))
    for schedule in ("1_CLM", "1_MLM"):
        for seed in range(1, seeds + 1 + int(rng.integers(0, 2))):  # rows of one seed or more
            run_id = f"{schedule}-s{seed}"
            run = RunInfo(run_id=run_id, recipe="r", architecture="babyllama", preset="tiny", schedule=schedule,
                          seed=seed, git_commit="t")
            ckpt = CheckpointInfo(checkpoint=f"{run_id}/final", phase_index=0, phase_objective="CLM")
            for _event in range(int(rng.integers(1, 4))):  # re-evaluations: the later event's items stand
                rows, records = [], []
                for task, subtasks in TASKS.items():
                    if rng.random() < 0.15:
                        continue  # a task this event did not score
                    grouped = task == "ewok" and rng.random() < 0.7
                    for subtask in subtasks:
                        if rng.random() < 0.1:
                            continue  # a subtask missing: the cell has no items of this run
                        n = int(rng.integers(3, 12))
                        ids = sorted({f"{subtask[:int(rng.integers(1, 6))]}{int(rng.integers(0, 40))}"
                                      for _ in range(n)})
                        kept = [i for i in ids if rng.random() < 0.9]  # items a seed lacks
                        correct = rng.choice([0.0, 0.5, 1.0], size=len(kept), p=[0.35, 0.1, 0.55])
                        for item, value in zip(kept, correct):
                            for _copy in range(1 + int(rng.random() < 0.2)):  # an item recorded twice
                                records.append({"run_id": run_id, "checkpoint": ckpt.checkpoint, "phase_index": 0,
                                                "scoring": "clm", "task": task, "subtask": subtask, "item_id": item,
                                                "group_id": (f"g{item[-1]}" if grouped and rng.random() < 0.8
                                                             else None),
                                                "correct": float(value), "score_good": float(rng.normal()),
                                                "score_bad": float(rng.normal())})
                        rows.append(ScoreRow(task, subtask, "accuracy", float(np.mean(correct)) if len(kept)
                                             else 0.5, max(1, len(kept)), "clm"))
                    rows.append(ScoreRow(task, "", "accuracy", float(rng.random()), 10, "clm"))
                if rows:
                    commit_results(root / run_id, score_table(run, ckpt, rows),
                                   item_table(records) if records and rng.random() < 0.9 else None)


def _reference(items: pa.Table, run_id: str, checkpoint: str, task: str, subtask: str, metric: str):
    """The plain computation: the run's items of the cell in record order, the last record of an item winning."""
    last: dict[str, dict] = {}
    for row in items.to_pylist():
        if (row["run_id"], row["checkpoint"], row["phase_index"], row["scoring"], row["task"], row["subtask"]) == \
                (run_id, checkpoint, 0, "clm", task, subtask):
            last[row["item_id"]] = row
    if not last:
        return None
    ids = sorted(last)
    value = {"accuracy": lambda r: r["correct"], "margin": lambda r: r["score_good"] - r["score_bad"]}[metric]
    values = [value(last[i]) for i in ids]
    groups = [last[i]["group_id"] for i in ids]
    names = None if all(g is None for g in groups) else [g if g is not None else f"_item_{i}"
                                                          for g, i in zip(groups, ids)]
    return ids, values, names


@pytest.mark.parametrize("case", range(12))
def test_the_one_pass_lookup_equals_the_plain_reference(case, tmp_path):
    rng = np.random.default_rng(1000 + case)
    _random_store(tmp_path, rng)
    results = read_results([tmp_path])
    checked = 0
    for source in results.files:
        stored = read_results_folder(source)
        for run_id in sorted({r["run_id"] for r in stored.scores.to_pylist()}):
            if stored.items is None:
                continue
            for task, subtasks in TASKS.items():
                for subtask in subtasks:
                    for metric in ("accuracy", "margin"):
                        meta = {"checkpoint": f"{run_id}/final", "phase_index": 0}
                        got = run_items(results, run_id, meta, task, "clm", [subtask], metric)
                        want = _reference(stored.items, run_id, meta["checkpoint"], task, subtask, metric)
                        if want is None:
                            assert got is None
                            continue
                        ids, values, names = want
                        assert got is not None
                        got_ids, got_values, got_groups = got[subtask]
                        assert got_ids.tolist() == ids
                        assert got_values.tolist() == pytest.approx(values, rel=0, abs=0)
                        if names is None:
                            assert got_groups is None
                        else:  # the same clusters, in the order of their names
                            assert got_groups is not None
                            assert (np.unique(got_groups, return_inverse=True)[1].tolist()
                                    == np.unique(np.asarray(names), return_inverse=True)[1].tolist())
                        checked += 1
    assert checked > 0


@pytest.mark.parametrize("case", range(12))
def test_the_board_pools_exactly_the_items_every_seed_shares(case, tmp_path):
    rng = np.random.default_rng(2000 + case)
    _random_store(tmp_path, rng)
    results = read_results([tmp_path])
    board = build_leaderboard(results, LeaderboardDefinition(name="t", tasks=list(TASKS), macro_tasks=[]),
                              family="none")
    standing = defaultdict(dict)  # run -> (task, subtask) -> {item: correct}
    for source in results.files:
        stored = read_results_folder(source)
        for row in (stored.items.to_pylist() if stored.items is not None else []):
            standing[row["run_id"]].setdefault((row["task"], row["subtask"]), {})[row["item_id"]] = row["correct"]
    for row in board.rows:
        for column, cell in row.cells.items():
            if cell.items is None:
                continue
            for subtask, matrix in cell.items.items():
                per_run = [standing[run].get((column, subtask), {}) for run in cell.seed_runs]
                shared = sorted(set.intersection(*(set(items) for items in per_run)))
                assert matrix.ids.tolist() == shared
                assert matrix.correct.tolist() == [[items[i] for i in shared] for items in per_run]
                assert all(math.isfinite(v) for v in matrix.correct.ravel())
