"""Sweeps on a real SLURM cluster: the single-node one that ``ci/slurm/cluster.sh up`` brings up (docs/sweep.md,
"SLURM on one machine"). Marked ``slurm`` and left out of the default suite; ``.ci/run`` brings the cluster up,
runs ``pytest -m slurm`` and takes it down. Without a cluster that answers they FAIL under CI and skip elsewhere.

- a sweep through SLURM: every cell done, one array task at a time under ``--array-parallelism 1`` (the scheduler's
  own start and end times), no accounting warning in the progress, and a second sweep reuses every cell;
- a task stopped in the middle of training, by ``scancel`` (a pre-emption's SIGTERM) or by the time-limit notice
  (``scancel --signal=USR2``): recorded failed (exit status 143), and the next sweep resumes it from the resume
  point the cell wrote where it stopped (not from step 0), each step trained once, no evaluation lost;
- ``--until-decided`` over two rounds, each round one job array.

Tiny models on a few thousand words: a few minutes in all on two cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

PARTITION = "debug"
TINY = ["--model", "antlm-babyllama", "--preset", "tiny", "--tasks", "blimp_supplement", "--limit", "10",
        "--executor", "slurm", "--partition", PARTITION]
# what submitit's sacct watcher printed at every poll on a cluster without accounting
ACCOUNTING_NOISE = ("sacct", "accounting storage is disabled", "WARNING")


@pytest.fixture(scope="module")
def cluster() -> str:
    """The partition of a SLURM cluster that answers; none FAILS under CI (CI=true) and skips elsewhere."""
    why = ""
    if shutil.which("sinfo") is None or shutil.which("srun") is None:
        why = "no sinfo/srun on PATH"
    else:
        answer = subprocess.run(["sinfo", "--noheader", "--format=%R %t"], capture_output=True, text=True,
                                timeout=120)
        states = dict(line.split() for line in answer.stdout.splitlines() if len(line.split()) == 2)
        if answer.returncode != 0:
            why = f"sinfo: {answer.stderr.strip() or answer.returncode}"
        elif states.get(PARTITION) not in ("idle", "mix", "alloc"):
            why = f"partition {PARTITION} is {states.get(PARTITION, 'missing')}"
    if why:
        message = (f"no SLURM cluster to test on ({why}); as root: ci/slurm/cluster.sh up && "
                   'eval "$(ci/slurm/cluster.sh env)"')
        if os.environ.get("CI"):
            pytest.fail(message + "; .ci/run brings it up before `pytest -m slurm`")
        pytest.skip(message)
    return PARTITION


def _env(data: Path) -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "ANTLM_BENCH_DATA": str(data), "OMP_NUM_THREADS": "1"}


def _sweep(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "antlm_bench", "sweep", *args], capture_output=True, text=True,
                          env=_env(data), timeout=900)


def _cells(out: Path) -> dict[str, dict]:
    return {cell["name"]: cell for cell in json.loads((out / "sweep" / "sweep.json").read_text())["cells"]}


def _job_of(cell: dict) -> str:
    """The array task that ran a cell, as the record says: ``job 12_0`` (or ``job 12`` for a single task)."""
    match = re.fullmatch(r"job (\d+(?:_\d+)?)", cell["where"])
    assert match, cell
    return match.group(1)


def _tasks_of(array_id: str) -> list[dict[str, str]]:
    """Each task of an array as the controller knows it (scontrol: ended jobs too, until MinJobAge)."""
    shown = subprocess.run(["scontrol", "--oneliner", "show", "job", array_id], capture_output=True, text=True,
                           check=True, timeout=120).stdout
    return [dict(field.split("=", 1) for field in line.split() if "=" in field) for line in shown.splitlines()
            if line.strip()]


def _no_accounting_noise(result: subprocess.CompletedProcess[str]) -> None:
    text = result.stdout + result.stderr
    for needle in ACCOUNTING_NOISE:
        assert needle not in text, text


def test_a_sweep_runs_each_cell_as_an_array_task_one_at_a_time_and_again_reuses_them(cluster, real_data_dir,
                                                                                       tmp_path):
    out = tmp_path / "sweep"
    args = [*TINY, "--schedule", "0.4_CLM,0.2_CLM", "--seeds", "1", "--max-words", "5000",
            "--array-parallelism", "1", "--output", str(out)]
    first = _sweep(real_data_dir, *args)
    assert first.returncode == 0, first.stdout + first.stderr
    _no_accounting_noise(first)
    cells = _cells(out)
    assert sorted(cells) == ["antlm-babyllama-tiny-0.2_CLM-seed1", "antlm-babyllama-tiny-0.4_CLM-seed1"]
    for name, cell in cells.items():
        assert cell["status"] == "done" and cell["returncode"] == 0, cell
        assert json.loads((out / name / "run.json").read_text())["status"] == "finished"
        assert "slurm array task" in (out / "sweep" / "logs" / f"{name}.log").read_text()

    # one array, its tasks run one after the other (the scheduler's times, to the second)
    arrays = {_job_of(cell).split("_")[0] for cell in cells.values()}
    assert len(arrays) == 1, cells
    tasks = _tasks_of(arrays.pop())
    assert len(tasks) == 2 and all(t["JobState"] == "COMPLETED" and t["ArrayTaskThrottle"] == "1" for t in tasks)
    spans = sorted((datetime.fromisoformat(t["StartTime"]), datetime.fromisoformat(t["EndTime"])) for t in tasks)
    assert spans[1][0] >= spans[0][1], spans

    again = _sweep(real_data_dir, *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 cell(s) run, 2 reused" in again.stdout
    assert {name: cell["status"] for name, cell in _cells(out).items()} == dict.fromkeys(cells, "reused")


def _steps_logged(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip().endswith("}")]


def _events(run: Path) -> list[dict]:
    path = run / "index.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.mark.parametrize("notice", [
    [],  # scancel: SIGTERM to every process of the task (what a pre-emption does), SIGKILL after KillWait
    ["--signal=USR2"],  # the time-limit notice submitit asks for (--signal=USR2@90), to every process too
], ids=["preempted", "time-limit-notice"])
def test_a_task_cancelled_mid_training_resumes_from_its_resume_point(cluster, real_data_dir, tmp_path, notice):
    """The task stopped in phase 1, after phase 0 was scored: the cell writes a resume point at the step it was
    on and exits 143; the next sweep goes on from there."""
    out = tmp_path / "sweep"
    # 26 steps an epoch: phase 0 ends at step 26 (scored), phase 1 runs to step 338
    args = [*TINY, "--schedule", "1_CLM+12_MLM", "--seeds", "1", "--max-words", "30000", "--output", str(out)]
    run = out / "antlm-babyllama-tiny-1_CLM_12_MLM-seed1"
    total, phase_end, cancel_after = 338, 26, 40
    sweep = subprocess.Popen([sys.executable, "-m", "antlm_bench", "sweep", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=_env(real_data_dir))
    try:
        deadline = time.monotonic() + 600
        while len(_steps_logged(run)) < cancel_after:
            assert sweep.poll() is None, "the sweep ended before phase 1 was under way:\n" + sweep.stdout.read()
            assert time.monotonic() < deadline, "phase 1 did not start within 600 s"
            time.sleep(0.2)
        (job,) = [_job_of(cell) for cell in _cells(out).values()]
        subprocess.run(["scancel", *notice, job], check=True, timeout=120)
        printed, _ = sweep.communicate(timeout=600)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 1, printed
    (cell,) = _cells(out).values()
    assert cell["status"] == "failed" and cell["returncode"] == 143, cell
    assert "exit status 143" in printed
    resume_point = os.readlink(run / "last")
    stopped_at = int(resume_point.rsplit("-", 1)[1])
    assert cancel_after <= stopped_at < total, resume_point  # written by SIGTERM in phase 1, not a phase end
    assert _steps_logged(run) == list(range(1, stopped_at + 1))
    (scored,) = _events(run)  # phase 0's evaluation, before the cancel
    assert scored["step"] == phase_end and scored["checkpoint"] == "checkpoints/phase-0-CLM"

    again = _sweep(real_data_dir, *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 cell(s) run, 0 reused, 0 failed" in again.stdout
    log = (out / "sweep" / "logs" / f"{run.name}.log").read_text()
    assert f"resumed from {run / resume_point} at step {stopped_at}" in log
    assert _steps_logged(run) == list(range(1, total + 1))  # each step trained once: nothing from step 0 again
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "finished" and record["step"] == total
    events = _events(run)
    assert events[0] == scored  # kept as it was, not scored again
    assert [(e.get("checkpoint"), e.get("step"), bool(e.get("final"))) for e in events[1:]] == [
        ("checkpoints/phase-1-MLM", total, False), ("checkpoints/phase-1-MLM", None, True)]


def test_until_decided_runs_each_round_as_one_array(cluster, real_data_dir, tmp_path):
    """Two rounds: the anytime-valid interval bounds nothing below 3 seeds, so seeds 1-2 cannot decide and the
    sweep adds seed 3, the cap."""
    out = tmp_path / "sweep"
    result = _sweep(real_data_dir, *TINY, "--schedule", "0.4_CLM,0.2_CLM", "--seeds", "1-2", "--max-words", "5000",
                    "--final-scoring", "clm", "--until-decided", "--baseline", "0.4_CLM", "--max-seeds", "3",
                    "--primary", "blimp_supplement", "--output", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    _no_accounting_noise(result)
    assert "adding seeds 3" in result.stdout
    decision = json.loads((out / "sweep" / "decision.json").read_text())
    assert decision["rounds"] == [[1, 2], [3]] and decision["seeds"] == [1, 2, 3]
    assert decision["status"] in ("decided", "max seeds reached")
    cells = _cells(out)
    assert len(cells) == 6 and all(cell["status"] == "done" for cell in cells.values()), cells
    arrays = {seed: {_job_of(c).split("_")[0] for c in cells.values() if c["seed"] == seed} for seed in (1, 2, 3)}
    assert len(arrays[1]) == 1 and arrays[1] == arrays[2]  # round 1: one array of four tasks
    assert len(arrays[3]) == 1 and arrays[3] != arrays[1]  # round 2: another array, submitted after the look
