"""Result tables: schema, atomic writes, the append-only index."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from antlm_bench.results.store import commit_results, read_scores
from antlm_bench.results.tables import (
    SCORE_SCHEMA,
    CheckpointInfo,
    RunInfo,
    ScoreRow,
    append_index,
    score_table,
    write_table_atomic,
)


def _table(run_id="r1", value=0.75):
    rows = [ScoreRow(task="blimp", subtask="adjunct_island", metric="accuracy", value=value, n=4, scoring="clm",
                     n_ties=1, ci_low=0.5, ci_high=1.0)]
    return score_table(RunInfo(run_id=run_id, schedule="4_CLM+16_MLM+4_CLM", seed=1),
                       CheckpointInfo(checkpoint="c", phase_index=2, phase_objective="CLM"), rows)


def test_rows_carry_run_checkpoint_and_row_fields(tmp_path):
    write_table_atomic(_table(), tmp_path / "scores.parquet")
    table = pq.read_table(tmp_path / "scores.parquet")
    assert table.schema.equals(SCORE_SCHEMA)
    row = table.to_pylist()[0]
    assert row["schedule"] == "4_CLM+16_MLM+4_CLM" and row["phase_index"] == 2 and row["n_ties"] == 1
    assert row["created_at"] is not None and row["package_version"]


def test_failed_write_leaves_neither_file_nor_temp(tmp_path, monkeypatch):
    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", explode)
    with pytest.raises(OSError):
        write_table_atomic(_table(), tmp_path / "scores.parquet")
    assert list(tmp_path.iterdir()) == []


def test_commits_keep_earlier_rows_the_latest_wins_and_read_scores_finds_runs(tmp_path):
    commit_results(tmp_path / "a", _table(value=0.5))
    other = score_table(RunInfo(run_id="r1", schedule="4_CLM+16_MLM+4_CLM", seed=1),
                        CheckpointInfo(checkpoint="c", phase_index=2, phase_objective="CLM"),
                        [ScoreRow(task="blimp", subtask="island", metric="accuracy", value=0.25, n=4, scoring="clm")])
    commit_results(tmp_path / "a", other)
    commit_results(tmp_path / "a", _table(value=0.75))  # re-scores the first key: replaces it, keeps the other
    commit_results(tmp_path / "b", _table(run_id="r2"))
    table = read_scores([tmp_path])
    assert sorted(table.column("value").to_pylist()) == [0.25, 0.75, 0.75]
    assert set(table.column("run_id").to_pylist()) == {"r1", "r2"}


def test_index_is_append_only_json_lines(tmp_path):
    append_index(tmp_path, {"run_id": "r1"})
    append_index(tmp_path, {"run_id": "r2"})
    lines = (tmp_path / "index.jsonl").read_text().splitlines()
    assert [json.loads(line)["run_id"] for line in lines] == ["r1", "r2"]


def test_written_tables_are_readable_by_others(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        write_table_atomic(_table(), tmp_path / "scores.parquet")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "scores.parquet").stat().st_mode) == 0o644


def test_a_row_seed_overrides_the_run_seed_only_when_set():
    rows = [ScoreRow(task="glue", subtask="rte", metric="accuracy", value=0.5, n=2, scoring="finetune", seed=43),
            ScoreRow(task="glue", subtask="", metric="score", value=0.5, n=2, scoring="finetune")]
    table = score_table(RunInfo(run_id="r", seed=7), CheckpointInfo(), rows)
    assert table.column("seed").to_pylist() == [43, 7]
