"""A real sweep, small: two tiny cells trained by two local workers, read by the leaderboard, then the same sweep
again, which trains nothing (docs/sweep.md; the statistics and executors without training:
tests/sweep/test_sweep.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SWEEP = ["sweep", "--model", "antlm-babyllama", "--schedule", "0.2_CLM, 0.1_CLM+0.1_MLM", "--seeds", "1",
         "--preset", "tiny", "--max-words", "5000", "--tasks", "blimp_supplement", "--limit", "10", "--jobs", "2"]


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "antlm_bench", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200", "ANTLM_BENCH_DATA": str(data)}, timeout=900)


def test_a_sweep_trains_each_cell_once_and_reads_like_runs(real_data_dir, tmp_path):
    out = tmp_path / "sweep"
    first = _cli(real_data_dir, *SWEEP, "--output", str(out))
    assert first.returncode == 0, first.stdout + first.stderr
    names = ["antlm-babyllama-tiny-0.2_CLM-seed1", "antlm-babyllama-tiny-0.1_CLM_0.1_MLM-seed1"]
    for name in names:
        assert json.loads((out / name / "run.json").read_text())["status"] == "finished"
        assert (out / "sweep" / "logs" / f"{name}.log").stat().st_size > 0
    record = json.loads((out / "sweep" / "sweep.json").read_text())
    assert record["counts"]["done"] == 2 and record["counts"]["failed"] == 0

    board = _cli(real_data_dir, "leaderboard", str(out))
    assert board.returncode == 0, board.stderr
    assert "0.2_CLM" in board.stdout and "0.1_CLM+0.1_MLM" in board.stdout

    started = time.monotonic()
    again = _cli(real_data_dir, *SWEEP, "--output", str(out))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 cell(s) run, 2 reused" in again.stdout
    assert time.monotonic() - started < 120  # no training: the check alone (seconds on an idle machine)
    assert json.loads((out / "sweep" / "sweep.json").read_text())["counts"]["reused"] == 2


def test_pending_seeds_agrees_with_what_run_would_do(real_data_dir, tmp_path):
    """The sweep skips a cell when pipeline.pending_seeds says run has nothing left: it must say so exactly when
    run_benchmark would reuse everything, and not when an evaluation setting changed."""
    from antlm_bench.config import run_config
    from antlm_bench.pipeline import pending_seeds, run_benchmark

    config = run_config({"model": {"name": "antlm-babyllama", "preset": "tiny", "schedule": "0.1_CLM"},
                         "evaluation": {"tasks": "blimp_supplement", "limit": 4}, "seeds": [3],
                         "output": {"folder": tmp_path, "quiet": True},
                         "data": {"data_dir": real_data_dir, "cache_dir": tmp_path / "cache", "max_words": 3000},
                         "training": {"eval_limit": 2}})
    assert pending_seeds(config) == [3]
    run_benchmark(config)
    assert pending_seeds(config) == []
    (again,) = run_benchmark(config).runs
    assert again.trained == "reused" and again.evaluated == []
    other_limit = config.with_flags({"--limit": 5})
    assert pending_seeds(other_limit) == [3]
    assert pending_seeds(config.with_flags({"--seeds": [3, 4]})) == [4]
    (redone,) = run_benchmark(other_limit).runs
    assert redone.trained == "reused" and redone.evaluated == ["blimp_supplement"]
