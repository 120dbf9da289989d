"""Fault injection on the results store: concurrent writers, a kill at every commit point, a full disk.

Writers run in child processes. A kill is ``ANTLM_BENCH_FAULT=<point>``: ``fault_point`` ends the process there
with ``os._exit`` (no cleanup, like ``kill -9``). After each fault the folder must read as the old state or the new
one, never a mix, and doing the write again must give no duplicates. The real ``eval`` and ``train`` kills are
``slow``; the store-level ones use hand-made tables and run in the default suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from leaderboard_tables import write_run

from antlm_bench.locking import FAULT_ENV, FAULT_EXIT_CODE
from antlm_bench.results.store import SCORE_KEY, STAGING_PREFIX, read_results_folder, tidy_results

REPO = Path(__file__).resolve().parents[2]

# a child that commits events: argv = folder, run_id, number of events, "items"/"none"
WRITER = textwrap.dedent("""
    import sys
    from antlm_bench.results.store import commit_results
    from antlm_bench.results.tables import CheckpointInfo, RunInfo, ScoreRow, item_table, score_table

    folder, run_id, count, with_items = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "items"
    for k in range(count):
        rows = [ScoreRow("blimp", f"s{k}", "accuracy", 0.5, 4, "clm"),
                ScoreRow("blimp", "shared", "accuracy", float(k), 4, "clm")]
        table = score_table(RunInfo(run_id=run_id, git_commit="t"), CheckpointInfo(checkpoint="c", phase_index=0),
                            rows)
        items = item_table([{"run_id": run_id, "checkpoint": "c", "phase_index": 0, "scoring": "clm",
                             "task": "blimp", "subtask": name, "item_id": str(i), "correct": 1.0}
                            for name in (f"s{k}", "shared") for i in range(3)]) if with_items else None
        commit_results(folder, table, items, {"kind": "test", "k": k})
""")


def child(*args: str, fault: str | None = None, fsize: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    code = WRITER
    if fsize is not None:  # a full disk: writes beyond fsize bytes fail with EFBIG (SIGXFSZ ignored)
        code = ("import resource, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
                f"resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, {fsize}))\n") + WRITER
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def keys(table) -> list[tuple]:
    return [tuple(r[c] for c in SCORE_KEY) for r in table.to_pylist()]


def leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.name.startswith(STAGING_PREFIX) or p.name.endswith(".tmp"))


@pytest.mark.parametrize("writers", [2, 4])
def test_concurrent_writers_lose_nothing_and_duplicate_nothing(tmp_path, writers):
    folder = write_run(tmp_path, "old", [{"phase_index": 0, "tasks": {"blimp": {"x": np.ones(3)}}}])  # one event
    events = 6
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(folder), f"w{i}", str(events), "items"], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
                              stderr=subprocess.PIPE, text=True) for i in range(writers)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    read = read_results_folder(folder / "scores.parquet")
    assert len(read.events) == writers * events + 1  # + the first one
    # per writer: one row per event's own subtask, the shared key once (its latest value), and the old rows
    assert read.scores.num_rows == writers * (events + 1) + 2
    assert len(set(keys(read.scores))) == read.scores.num_rows
    shared = {r["run_id"]: r["value"] for r in read.scores.to_pylist() if r["subtask"] == "shared"}
    assert shared == {f"w{i}": float(events - 1) for i in range(writers)}
    assert read.items.num_rows == writers * (events + 1) * 3 + 3
    assert pq.read_table(folder / "scores.parquet").num_rows == writers * events * 2 + 2  # the plain dataset view
    assert leftovers(folder) == []


POINTS = ["store.commit", "store.committed", "store.link"]


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_each_commit_point_leaves_old_or_new_and_the_rerun_no_duplicates(tmp_path, point):
    folder = tmp_path / "out"
    assert child(str(folder), "r", "1", "items").returncode == 0
    old = read_results_folder(folder / "scores.parquet")
    killed = child(str(folder), "r2", "1", "items", fault=point)
    assert killed.returncode == FAULT_EXIT_CODE, killed.stderr
    after = read_results_folder(folder / "scores.parquet")
    new_state = point != "store.commit"
    assert {r["run_id"] for r in after.scores.to_pylist()} == ({"r", "r2"} if new_state else {"r"})
    # items always match their scores: both of the event or neither
    assert {r["run_id"] for r in after.items.to_pylist()} == {r["run_id"] for r in after.scores.to_pylist()}
    if not new_state:
        assert keys(after.scores) == keys(old.scores)
    tidy_results(folder)  # what the next command into the folder does first
    assert leftovers(folder) == []
    assert child(str(folder), "r2", "1", "items").returncode == 0  # the rerun
    final = read_results_folder(folder / "scores.parquet")
    assert len(set(keys(final.scores))) == final.scores.num_rows == 4
    assert final.items.num_rows == 12
    assert pq.read_table(folder / "items.parquet").num_rows == (18 if new_state else 12)  # every committed event


def test_a_full_disk_commits_nothing_leaves_no_partial_file_and_says_one_line(tmp_path):
    folder = tmp_path / "out"
    assert child(str(folder), "r", "1", "items").returncode == 0
    before = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    full = child(str(folder), "r2", "1", "items", fsize=1500)
    assert full.returncode != 0
    last = full.stderr.strip().splitlines()[-1]
    assert "File too large" in last and str(folder) in last
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == before
    assert {r["run_id"] for r in read_results_folder(folder / "scores.parquet").scores.to_pylist()} == {"r"}


# -- the real commands (slow: a model is loaded or trained in each child) -----------------------------------------


def cli(args: list[str], fault: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run([sys.executable, "-m", "antlm_bench", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_a_killed_eval_leaves_old_or_new_and_the_rerun_no_duplicates(llama_dir, real_data_dir, tmp_path, point):
    out = tmp_path / "out"
    base = ["eval", "--model", str(llama_dir), "--limit", "2", "--output", str(out), "--log-samples",
            "--no-progress", "--data-dir", str(real_data_dir)]
    assert cli([*base, "--tasks", "blimp_supplement"]).returncode == 0
    killed = cli([*base, "--tasks", "blimp"], fault=point)
    assert killed.returncode == FAULT_EXIT_CODE, killed.stderr
    read = read_results_folder(out / "scores.parquet")
    tasks = {r["task"] for r in read.scores.to_pylist()}
    assert tasks == ({"blimp_supplement"} if point == "store.commit" else {"blimp_supplement", "blimp"})
    assert {r["task"] for r in read.items.to_pylist()} == tasks
    again = cli([*base, "--tasks", "blimp"])
    assert again.returncode == 0, again.stderr
    assert leftovers(out) == [] and not (out / ".antlm-bench.lock").exists()
    final = read_results_folder(out / "scores.parquet")
    assert len(set(keys(final.scores))) == final.scores.num_rows
    assert {r["task"] for r in final.scores.to_pylist()} == {"blimp_supplement", "blimp"}
    ids = [(r["task"], r["subtask"], r["item_id"]) for r in final.items.to_pylist()]
    assert len(ids) == len(set(ids))
    assert json.loads((out / "eval.json").read_text())["config"]["tasks"] == ["blimp"]


@pytest.mark.slow
@pytest.mark.parametrize("point", ["store.commit", "store.committed", "train.index"])
def test_a_kill_in_per_phase_scoring_then_resume_gives_no_duplicates(real_data_dir, tmp_path, point):
    from trainer_support import cli_args, tiny_config

    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM+0.25_MLM", eval_every="phase",
                         eval_tasks="blimp", eval_limit=1, data_dir=real_data_dir)
    args = [*cli_args(config), "--eval-every", "phase", "--eval-tasks", "blimp", "--eval-limit", "1",
            "--data-dir", str(real_data_dir), "--device", "cpu"]
    killed = cli(args, fault=point)
    assert killed.returncode == FAULT_EXIT_CODE, killed.stderr
    first = read_results_folder(tmp_path / "run" / "scores.parquet") if (tmp_path / "run" / "scores.parquet").is_dir() \
        else None
    if first is not None:  # the first phase's rows: all of them or none
        assert {r["checkpoint"] for r in first.scores.to_pylist()} <= {"checkpoints/phase-0-CLM"}
    resumed = cli([*args, "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    final = read_results_folder(tmp_path / "run" / "scores.parquet")
    assert len(set(keys(final.scores))) == final.scores.num_rows
    assert {r["checkpoint"] for r in final.scores.to_pylist()} == {"checkpoints/phase-0-CLM",
                                                                   "checkpoints/phase-1-MLM"}
    assert leftovers(tmp_path / "run") == []
