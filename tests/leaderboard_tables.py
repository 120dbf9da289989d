"""Hand-made result tables for the leaderboard and check tests: a run folder with scores (and items) written
through antlm_bench.results.tables, exactly as the evaluator writes them, from per-item correctness arrays."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from antlm_bench.results.stats import bootstrap_macro
from antlm_bench.results.store import commit_results
from antlm_bench.results.tables import CheckpointInfo, RunInfo, ScoreRow, item_table, score_table

TASK_METRIC = {"glue": "score"}


def correctness(rng: np.random.Generator, n: int, p: float) -> np.ndarray:
    return (rng.random(n) < p).astype(np.float64)


def write_run(
    root: Path,
    run_id: str,
    checkpoints: list[dict],
    recipe: str = "antlm-babyllama",
    preset: str = "tiny",
    schedule: str = "1_CLM",
    seed: int = 0,
    items: bool = True,
    shuffle_items: bool = False,
    limit: int | None = None,
    weights_digest: str | None = None,
    config_fingerprint: str | None = None,
    label: str | None = None,
) -> Path:
    """``checkpoints``: [{phase_index, objective, epoch, tokens, words, name, scoring, tasks: {task: {subtask:
    correct[]}}}] (``name``: the checkpoint folder, default ``ckpt<phase_index>``).

    A checkpoint's ``scoring`` is one method, or a dict task -> method (``probe`` for GLUE probes).
    Task rows get the mean over subtasks and the stratified bootstrap interval, as the evaluator computes them.
    The fingerprints (None: not recorded) are the run record's: equal training fingerprints mean the same network.
    """
    folder = root / run_id
    run = RunInfo(run_id=run_id, recipe=recipe, architecture="babyllama", preset=preset, schedule=schedule,
                  seed=seed, git_commit="test", weights_digest=weights_digest,
                  config_fingerprint=config_fingerprint, label=label)
    tables, item_records = [], []
    rng = np.random.default_rng(zlib.crc32(run_id.encode()))
    for spec in checkpoints:
        name = spec.get("name", f"ckpt{spec['phase_index']}")
        ckpt = CheckpointInfo(checkpoint=f"{run_id}/{name}", phase_index=spec["phase_index"],
                              phase_objective=spec.get("objective", "CLM"), epoch=spec.get("epoch"),
                              tokens_seen=spec.get("tokens"), words_seen=spec.get("words"))
        rows = []
        scoring_spec = spec.get("scoring", "clm")
        for task, subtasks in spec["tasks"].items():
            scoring = scoring_spec if isinstance(scoring_spec, str) else scoring_spec.get(task, "clm")
            subtask_metric = "accuracy"
            for name, values in subtasks.items():
                values = np.asarray(values, dtype=np.float64)
                rows.append(ScoreRow(task, name, subtask_metric, float(values.mean()), values.size, scoring,
                                     limit=limit))
                ids = [f"{name}-{i}" for i in range(values.size)]
                order = rng.permutation(values.size) if shuffle_items else range(values.size)
                for i in order:
                    item_records.append({
                        "run_id": run_id, "checkpoint": ckpt.checkpoint, "phase_index": ckpt.phase_index,
                        "scoring": scoring, "task": task, "subtask": name, "item_id": ids[i],
                        "correct": float(values[i]),
                    })
            interval = bootstrap_macro({k: np.asarray(v, float) for k, v in subtasks.items()})
            rows.append(ScoreRow(task, "", TASK_METRIC.get(task, "accuracy"), interval.value,
                                 sum(len(v) for v in subtasks.values()), scoring, ci_low=interval.low,
                                 ci_high=interval.high, limit=limit))
        tables.append(score_table(run, ckpt, rows))
    commit_results(folder, pa.concat_tables(tables), item_table(item_records) if items else None)
    return folder


def write_loss_run(root: Path, run_id: str, schedule: str, seed: int, losses: dict[str, np.ndarray],
                   recipe: str = "antlm-babyllama") -> Path:
    """A run scored on a held-out loss task: per-sequence mean losses as items (the ``value`` column)."""
    run = RunInfo(run_id=run_id, recipe=recipe, architecture=recipe.removeprefix("antlm-"), preset="tiny",
                  schedule=schedule, seed=seed, git_commit="test")
    ckpt = CheckpointInfo(checkpoint=f"{run_id}/final", phase_index=0, phase_objective="CLM", epoch=1.0)
    rows = [ScoreRow("heldout", "", "loss", float(np.mean([v.mean() for v in losses.values()])),
                     sum(v.size for v in losses.values()), "clm")]
    rows += [ScoreRow("heldout", name, "loss", float(v.mean()), v.size, "clm") for name, v in losses.items()]
    items = [{"run_id": run_id, "checkpoint": ckpt.checkpoint, "phase_index": 0, "scoring": "clm", "task": "heldout",
              "subtask": name, "item_id": str(i), "value": float(x)} for name, v in losses.items()
             for i, x in enumerate(v)]
    commit_results(root / run_id, score_table(run, ckpt, rows), item_table(items))
    return root / run_id


def four_tasks(rng: np.random.Generator, p: dict[str, float], n: int = 200) -> dict:
    """The four macro tasks with a few subtasks each, item correctness drawn with probability p[task]."""
    return {
        "blimp": {f"paradigm_{k}": correctness(rng, n, p["blimp"]) for k in range(3)},
        "blimp_supplement": {f"supp_{k}": correctness(rng, n, p["blimp_supplement"]) for k in range(2)},
        "ewok": {f"domain_{k}": correctness(rng, n, p["ewok"]) for k in range(2)},
        "glue": {"rte": correctness(rng, n, p["glue"]), "boolq": correctness(rng, n, p["glue"])},
    }


def rewrite_event_file(path: Path, table: pa.Table) -> None:
    """Write ``table`` over a committed event's data file and record its new digest in the event's record, as a
    writer that had written it so would have (a test of what the reader does with such a table, not of the digest
    check, which refuses any data file edited after its commit)."""
    from antlm_bench.results.store.write import record_data_digests

    pq.write_table(table, path)
    record_data_digests(path.parent)
