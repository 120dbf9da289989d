"""Job states from ``squeue`` for the sweep's SLURM jobs, on clusters with or without accounting.

submitit's own watcher asks ``sacct``, which reads the accounting database: on a cluster that keeps none
(``AccountingStorageType=accounting_storage/none``, as a small or single-node cluster often does, and the one
``ci/slurm/cluster.sh`` brings up) every poll printed two warnings, and a task that died without writing its result
(killed after ``KillWait``, its node lost) was never seen to end, so the sweep waited for it forever. ``squeue
--states=all`` asks the controller, which knows every job, pending, running or ended, until ``MinJobAge`` after its
end (300 s by default) with accounting or without; a job it no longer knows has ended (:data:`GONE`). A task that
finished normally is seen by its result file first (submitit's ``Job.done``), so squeue only decides for tasks that
died. ``SlurmExecutor`` gives each job of its array one shared watcher (submitit builds an array's jobs itself, so a
job class of our own would not reach them); imported only there (submitit is an optional dependency).
"""

from __future__ import annotations

import subprocess
import time

from submitit.core import logger
from submitit.slurm.slurm import SlurmInfoWatcher, read_job_id

from antlm_bench.errors import one_line

# the state of a job the controller no longer knows: it ended more than MinJobAge ago (submitit counts every state
# but READY, PENDING, RUNNING, UNKNOWN, REQUEUED, COMPLETING and PREEMPTED as ended)
GONE = "GONE"
# squeue's message when none of the asked job ids is known any more (some known: exit status 0, the rest left out)
UNKNOWN_IDS = "Invalid job id specified"
SQUEUE_TIMEOUT_S = 120


class SqueueWatcher(SlurmInfoWatcher):
    """submitit's watcher (one ``squeue`` for every job still running, at most every ``delay_s`` seconds, more often
    just after a submission), asking ``squeue`` instead of ``sacct``."""

    def __init__(self, delay_s: int = 60) -> None:
        super().__init__(delay_s=delay_s)
        self._failing = False  # the last squeue failed: said once, not at every poll

    def _make_command(self) -> list[str] | None:
        to_check = sorted({x.split("_")[0] for x in self._registered - self._finished})
        if not to_check:
            return None
        return ["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T|%N", f"--jobs={','.join(to_check)}"]

    def read_info(self, string: bytes | str) -> dict[str, dict[str, str]]:
        """``JOBID|STATE|NODELIST`` lines (one per array task with ``--array``) as submitit's info dicts."""
        text = string.decode() if isinstance(string, bytes) else string
        info: dict[str, dict[str, str]] = {}
        for line in text.splitlines():
            fields = line.strip().split("|")
            if len(fields) != 3 or not fields[0]:
                continue
            stats = {"JobID": fields[0], "State": fields[1].strip(), "NodeList": fields[2].strip()}
            for parts in read_job_id(fields[0]):
                info["_".join(parts[:2])] = stats
                if len(parts) >= 3:  # a range of pending tasks on one line
                    for index in range(int(parts[1]), int(parts[2]) + 1):
                        info[f"{parts[0]}_{index}"] = stats
        return info

    def update(self) -> None:
        command = self._make_command()
        if command is None:
            return
        self._num_calls += 1
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as err:
            self._say_failure(one_line(err, typed=True))
            return
        if proc.returncode == 0:
            info = self.read_info(proc.stdout)
        elif UNKNOWN_IDS in proc.stderr:
            info = {}
        else:  # the controller did not answer: the states stay as they were, the next poll asks again
            self._say_failure(one_line(proc.stderr, 300) or f"exit status {proc.returncode}")
            return
        if self._failing:
            logger.get_logger().warning("squeue answers again")
            self._failing = False
        for job_id in self._registered - self._finished:
            info.setdefault(job_id, {"JobID": job_id, "State": GONE, "NodeList": ""})
        self._info_dict.update(info)
        self._output = proc.stdout.encode()
        self._mark_finished()

    def _mark_finished(self) -> None:
        self._last_status_check = time.time()
        for job_id in self._registered - self._finished:
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)

    def _say_failure(self, why: str) -> None:
        self._last_status_check = time.time()
        if not self._failing:
            logger.get_logger().warning(f"squeue failed ({why}); the job states are those of the last answer until "
                                        "it answers again")
            self._failing = True


__all__ = ["GONE", "SqueueWatcher"]
