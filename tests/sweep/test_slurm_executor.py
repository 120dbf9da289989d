"""The SLURM executor without a cluster (tests/sweep/test_slurm.py runs the real one): its job states from squeue
(antlm_bench/sweep/squeue.py) and its check of the cluster, against a stand-in ``squeue`` / ``sinfo`` on PATH; and
the signals an array task passes to its cell (``run_cell``)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("submitit")

from antlm_bench.errors import UserError  # noqa: E402
from antlm_bench.sweep.executors import SlurmExecutor, SlurmResources  # noqa: E402
from antlm_bench.sweep.record import SweepFolder  # noqa: E402
from antlm_bench.sweep.squeue import GONE, SqueueWatcher  # noqa: E402

# prints $dir/<command>.out and $dir/<command>.err, exits with $dir/<command>.rc; logs its arguments
STAND_IN = """#!/bin/sh
here="$(dirname "$0")"
name="$(basename "$0")"
echo "$@" >> "$here/$name.calls"
cat "$here/$name.out" 2>/dev/null
cat "$here/$name.err" >&2 2>/dev/null
exit "$(cat "$here/$name.rc" 2>/dev/null || echo 0)"
"""


class StandIn:
    def __init__(self, folder: Path, name: str) -> None:
        self.folder, self.name = folder, name
        path = folder / name
        path.write_text(STAND_IN)
        path.chmod(0o755)

    def answer(self, out: str = "", err: str = "", rc: int = 0) -> None:
        for suffix, text in (("out", out), ("err", err), ("rc", str(rc))):
            (self.folder / f"{self.name}.{suffix}").write_text(text)

    def calls(self) -> list[str]:
        path = self.folder / f"{self.name}.calls"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return folder


def _watcher(*job_ids: str) -> SqueueWatcher:
    watcher = SqueueWatcher(delay_s=0)
    for job_id in job_ids:
        watcher.register_job(job_id)
    return watcher


def test_array_tasks_are_read_one_line_each_and_a_pending_range_for_each_of_its_tasks(bin_dir):
    squeue = StandIn(bin_dir, "squeue")
    squeue.answer("12_0|COMPLETED|node1\n12_1|RUNNING|node1\n12_[2-3%1]|PENDING|\n")
    watcher = _watcher("12_0", "12_1", "12_2", "12_3")
    watcher.update()
    assert {j: watcher.get_state(j, mode="cache") for j in ("12_0", "12_1", "12_2", "12_3")} == {
        "12_0": "COMPLETED", "12_1": "RUNNING", "12_2": "PENDING", "12_3": "PENDING"}
    assert watcher.is_done("12_0", mode="cache") and not watcher.is_done("12_2", mode="cache")
    (call,) = squeue.calls()
    assert "--states=all" in call and "--jobs=12" in call  # every state, ended jobs too; one call for the array

    watcher.update()  # 12_0 ended: no longer asked about, the array still is
    assert len(squeue.calls()) == 2 and "--jobs=12" in squeue.calls()[1]


def test_a_job_the_controller_no_longer_knows_has_ended(bin_dir):
    """Past MinJobAge the controller forgets an ended job: squeue leaves it out (or refuses when it knows none of
    them); without this, a task that died without its result file was waited for forever."""
    squeue = StandIn(bin_dir, "squeue")
    squeue.answer("7_1|RUNNING|node1\n")
    watcher = _watcher("7_0", "7_1")
    watcher.update()
    assert watcher.get_state("7_0", mode="cache") == GONE and watcher.is_done("7_0", mode="cache")
    assert not watcher.is_done("7_1", mode="cache")

    squeue.answer(err="slurm_load_jobs error: Invalid job id specified\n", rc=1)
    watcher.update()
    assert watcher.is_done("7_1", mode="cache")
    calls = len(squeue.calls())
    watcher.update()  # nothing left to ask about
    assert len(squeue.calls()) == calls


def test_a_controller_that_does_not_answer_keeps_the_states_and_is_said_once(bin_dir, caplog):
    squeue = StandIn(bin_dir, "squeue")
    squeue.answer("3_0|RUNNING|node1\n")
    watcher = _watcher("3_0")
    watcher.update()
    squeue.answer(err="squeue: error: Unable to contact slurm controller (connect failure)\n", rc=1)
    with caplog.at_level(logging.WARNING, logger="submitit"):
        for _ in range(3):
            watcher.update()
    assert watcher.get_state("3_0", mode="cache") == "RUNNING"  # not taken for ended
    failures = [r.getMessage() for r in caplog.records if "squeue failed" in r.getMessage()]
    assert len(failures) == 1 and "Unable to contact slurm controller" in failures[0]
    squeue.answer("3_0|COMPLETED|node1\n")
    with caplog.at_level(logging.WARNING, logger="submitit"):
        watcher.update()
    assert watcher.is_done("3_0", mode="cache")
    assert any("squeue answers again" in r.getMessage() for r in caplog.records)


def _executor(tmp_path: Path, partition: str | None) -> SlurmExecutor:
    folder = SweepFolder(tmp_path / "out")
    return SlurmExecutor("python3", folder.output, folder, SlurmResources(partition=partition, time_min=5))


def test_a_cluster_that_does_not_answer_or_lacks_the_partition_is_one_line(bin_dir, tmp_path):
    StandIn(bin_dir, "srun")
    sinfo = StandIn(bin_dir, "sinfo")
    sinfo.answer(err="sinfo: error: Unable to contact slurm controller (connect failure)\n", rc=1)
    with pytest.raises(UserError, match=r"does not answer \(sinfo: sinfo: error: Unable to contact") as refused:
        _executor(tmp_path, "debug").check_ready()
    assert "\n" not in str(refused.value) and "ci/slurm/cluster.sh up" in str(refused.value)

    sinfo.answer("debug\ngpu\n")
    with pytest.raises(UserError, match=r"--partition gpus: not a partition of this cluster \(debug, gpu\)"):
        _executor(tmp_path, "gpus").check_ready()
    _executor(tmp_path, "gpu").check_ready()
    _executor(tmp_path, None).check_ready()  # the cluster's default partition


# a cell that counts the SIGTERMs it gets (for 2 s after the first), says whether it ignores SIGUSR2, exits 143
SIGNAL_COUNTING_CELL = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
terms = []
def on_term(*_):
    terms.append(time.monotonic())
    (out / "seen").write_text(str(len(terms)))
signal.signal(signal.SIGTERM, on_term)
usr2 = "ignored" if signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN else "default"
(out / "ready").write_text(usr2)
while not terms or time.monotonic() - terms[0] < 2.0:
    time.sleep(0.01)
(out / "terms").write_text(str(len(terms)))
sys.exit(143)
"""

TASK = """
import sys
from antlm_bench.sweep.executors import run_cell
out = sys.argv[1]
sys.exit(run_cell(sys.executable, [out + "/cell.py", out], out + "/cell.log", "test task", scheduled=sys.argv[2] == "1"))
"""


def _task_and_cell(tmp_path: Path, scheduled: bool) -> tuple[subprocess.Popen[bytes], int]:
    """run_cell in a process of its own (the array task) running the signal-counting cell; the cell's pid."""
    (tmp_path / "cell.py").write_text(SIGNAL_COUNTING_CELL)
    task = subprocess.Popen([sys.executable, "-c", TASK, str(tmp_path), "1" if scheduled else "0"])
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists():
        assert task.poll() is None and time.monotonic() < deadline, "the cell did not start"
        time.sleep(0.02)
    (child,) = [int(pid) for pid in Path(f"/proc/{task.pid}/task/{task.pid}/children").read_text().split()]
    return task, child


@pytest.mark.parametrize(("scheduled", "to_the_cell_too", "signum"), [
    (True, True, signal.SIGTERM),  # scancel / pre-emption on SLURM: every process of the task gets it
    (True, True, signal.SIGUSR2),  # the time-limit notice on SLURM: every process too
    (False, False, signal.SIGTERM),  # submitit's local executor: only the task gets it
    (False, False, signal.SIGUSR2),
], ids=["slurm-sigterm", "slurm-usr2", "local-sigterm", "local-usr2"])
def test_the_cell_gets_exactly_one_sigterm_however_the_task_is_stopped(tmp_path, scheduled, to_the_cell_too, signum):
    """The trainer takes a second SIGTERM as "stop now", without a resume point where it stood; and SIGUSR2's
    default action would kill the cell outright."""
    task, cell = _task_and_cell(tmp_path, scheduled)
    try:
        assert (tmp_path / "ready").read_text() == ("ignored" if scheduled else "default")
        if to_the_cell_too:  # first, so that a copy from the task cannot merge with it into one pending signal
            os.kill(cell, signum)
            deadline = time.monotonic() + 60
            while signum == signal.SIGTERM and not (tmp_path / "seen").exists():
                assert time.monotonic() < deadline, "the cell did not see its SIGTERM"
                time.sleep(0.01)
        os.kill(task.pid, signum)
        assert task.wait(timeout=60) == 143
    finally:
        if task.poll() is None:
            task.kill()
            task.wait()
    assert (tmp_path / "terms").read_text() == "1"
