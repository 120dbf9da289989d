"""Where a sweep's cells run: local worker processes, or a SLURM job array through submitit.

Every cell runs as its own ``python -m antlm_bench run --config <cell file>`` process (``SweepFolder.cell_command``)
in its own process group, its output appended to ``<output>/sweep/logs/<cell>.log``: a crash, a leaked thread or a signal in one cell never
reaches another, and the parent can stop a whole cell (its data workers included) by its group. A real SLURM task's
cell stays in the task's group instead: the scheduler signals and stops every process of the task itself
(``run_cell``).

Local workers run ahead: with ``--until-decided``, a worker the round leaves idle (its last cells are fewer than the
workers) starts a cell of the next round, which that round takes over if the sweep goes on and which is stopped at
its resume point if the sweep stops. A look never reads it: it reads only the seeds of its rounds.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from antlm_bench.data.files import open_append
from antlm_bench.errors import UserError, one_line
from antlm_bench.pipeline import run_threads
from antlm_bench.recipes import load_recipe
from antlm_bench.sweep.grid import Grid, GridCell
from antlm_bench.sweep.progress import Progress
from antlm_bench.sweep.record import DONE, FAILED, INTERRUPTED, RUNNING, SweepFolder, SweepRecord

if TYPE_CHECKING:
    from antlm_bench.config import RunConfig
    from antlm_bench.sweep.settings import SweepSettings

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SweepInterrupted(Exception):
    """SIGINT or SIGTERM stopped the sweep: every running cell was stopped (keeping its resume point)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


def _log_header(log: Any, argv: Sequence[str], where: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    log.write(f"\n# antlm-bench sweep, {stamp}, {where}: {shlex.join(argv)}\n".encode())
    log.flush()


class Executor(ABC):
    """Runs cells and reports each one's status into the sweep record."""

    @property
    @abstractmethod
    def parallel(self) -> int:
        """How many cells run at once (the ETA's divisor)."""

    @abstractmethod
    def describe(self) -> str:
        """One line: where and how the cells run."""

    @abstractmethod
    def check_ready(self) -> None:
        """Refuse in one line, before anything is written, a sweep that cannot run here (no cluster, no submitit)."""

    @abstractmethod
    def run(self, cells: Sequence[GridCell], record: SweepRecord, progress: Progress,
            ahead: Sequence[GridCell] = ()) -> None:
        """Run ``cells`` to the end (each DONE, FAILED or INTERRUPTED in ``record``); raise SweepInterrupted when
        a stop signal ended the sweep early. ``ahead``: cells the next round would run (not yet finished), which
        an executor may start on workers this round leaves idle and leave running when it returns."""

    @contextmanager
    def session(self, record: SweepRecord) -> Iterator[None]:
        """The whole sweep's span: what an executor started ahead and no round took is stopped when it ends."""
        yield


# ----------------------------------------------------------------------------------------------------------
# local worker processes


@dataclass(frozen=True)
class Slot:
    """One worker: its label (``cpu 2``, ``cuda:1``) and what it adds to a cell's environment."""

    label: str
    env: dict[str, str] = field(default_factory=dict)


def local_slots(jobs: int | None, cores: int, threads_per_run: int, gpus: Sequence[str], per_device: int) -> \
        tuple[list[Slot], str]:
    """The worker slots and why so many. CUDA: ``per_device`` runs on each visible GPU (``gpus``: their ids as
    CUDA_VISIBLE_DEVICES names them), pinned by CUDA_VISIBLE_DEVICES. CPU: ``cores // threads_per_run`` workers
    unless ``--jobs`` says, each with at most its share of the cores as OMP_NUM_THREADS (torch's thread choice
    reads it), so that workers never oversubscribe the cores."""
    if per_device < 1:
        raise UserError(f"--per-device {per_device}: must be at least 1")
    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs {jobs}: must be at least 1")
    if gpus:
        n = jobs if jobs is not None else len(gpus) * per_device
        slots = [Slot(f"cuda:{gpus[i % len(gpus)]}", {"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]}) for i in range(n)]
        why = "--jobs" if jobs is not None else f"{len(gpus)} GPU(s) x --per-device {per_device}"
        return slots, why
    n = jobs if jobs is not None else max(1, cores // max(1, threads_per_run))
    threads = max(1, min(threads_per_run, cores // n))
    why = ("--jobs" if jobs is not None else f"{cores} cores / {threads_per_run} thread(s) per run")
    return [Slot(f"cpu {i + 1}", {"OMP_NUM_THREADS": str(threads)}) for i in range(n)], f"{why}, {threads} thread(s) each"


def visible_gpus(device: str) -> list[str]:
    """The GPUs cells are spread over: with --device auto or cuda and CUDA present, each visible one (as
    CUDA_VISIBLE_DEVICES names it); none otherwise (--device cuda:N pins every cell to that one)."""
    import torch

    if device not in ("auto", "cuda") or not torch.cuda.is_available():
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [v.strip() for v in visible.split(",") if v.strip()][:torch.cuda.device_count()]
    return [str(i) for i in range(torch.cuda.device_count())]


class LocalExecutor(Executor):
    """``--jobs N`` worker processes on this machine.

    SIGINT (Ctrl-C) or SIGTERM, at any time in the sweep's :meth:`session`: no new cell starts; the signal is passed
    to every running cell's process group (the trainer finishes its step and writes a resume point, an evaluation
    stops before its commit), the sweep waits up to ``grace_s`` for them, records them INTERRUPTED and raises
    SweepInterrupted. A second signal kills the cells at once (SIGKILL): the resume point of the last finished step
    is kept either way. Cells started ahead (:meth:`run`'s ``ahead``) outlive the call that started them; the next
    call takes over those of its round, and the session's end stops the rest the same way (INTERRUPTED, resumable).
    """

    def __init__(self, python: str, output: Path, folder: SweepFolder, slots: Sequence[Slot], why: str = "",
                 grace_s: float = 600.0, poll_s: float = 0.5) -> None:
        if not slots:
            raise UserError("the local executor needs at least one worker slot")
        self.python, self.output, self.folder, self.slots, self.why = python, output, folder, list(slots), why
        self.grace_s, self.poll_s = grace_s, poll_s
        self._running: dict[subprocess.Popen[bytes], tuple[GridCell, Slot]] = {}  # every live cell, ahead ones too
        self._stops: list[int] = []
        self._told: set[int] = set()  # the cells (by pid) the first stop signal was passed to
        self._in_session = False

    @property
    def parallel(self) -> int:
        return len(self.slots)

    def describe(self) -> str:
        labels = ", ".join(slot.label for slot in self.slots)
        return f"local: {len(self.slots)} worker(s) ({labels}" + (f"; {self.why})" if self.why else ")")

    def check_ready(self) -> None:
        """Worker processes need nothing but this machine."""

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._stops.append(signum)
        if len(self._stops) > 1:  # the second signal: stop now
            for proc in self._running:
                _signal_group(proc, signal.SIGKILL)

    @contextmanager
    def session(self, record: SweepRecord) -> Iterator[None]:
        """The stop signals are this executor's for the whole sweep (between rounds too, while cells run ahead);
        at the end, whatever still runs (cells run ahead that no round took, or every cell after an error of our
        own) is stopped at its resume point and recorded INTERRUPTED."""
        if self._in_session:
            yield
            return
        previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        self._in_session = True
        try:
            yield
        finally:
            try:
                self._stop_all(record, signal.SIGTERM)
            finally:
                self._in_session = False
                for s, handler in previous.items():
                    signal.signal(s, handler)

    def _stop_all(self, record: SweepRecord, signum: int) -> None:
        for proc in self._running:
            _signal_group(proc, signum)
        deadline = time.monotonic() + self.grace_s
        for proc, (cell, _) in list(self._running.items()):
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
            del self._running[proc]
            record.set(cell, DONE if proc.returncode == 0 else INTERRUPTED, returncode=proc.returncode)

    def run(self, cells: Sequence[GridCell], record: SweepRecord, progress: Progress,
            ahead: Sequence[GridCell] = ()) -> None:
        if not self._in_session:  # a call on its own: a session of its own
            with self.session(record):
                self.run(cells, record, progress, ahead)
            return
        wanted = {cell.name for cell in cells}
        started = {cell.name for cell, _ in self._running.values()}  # cells run ahead by the last call: taken over
        queue = deque(cell for cell in cells if cell.name not in started)
        spare = deque(cell for cell in ahead if cell.name not in started and cell.name not in wanted)
        stop_started: float | None = None
        while True:
            busy = {id(slot) for _, slot in self._running.values()}
            free = [slot for slot in self.slots if id(slot) not in busy]
            while not self._stops and free and (queue or spare):
                cell = queue.popleft() if queue else spare.popleft()
                if cell.name not in wanted:  # the next round's, run ahead on a worker this round leaves idle
                    record.add([cell])
                slot = free.pop(0)
                self._running[self._start(cell, slot)] = (cell, slot)
                record.set(cell, RUNNING, where=slot.label, returncode=None)
                progress.show()
            if self._stops:
                # passed on here, not in the handler: a cell started while the signal arrived gets it too
                for proc in self._running:
                    if proc.pid not in self._told:
                        _signal_group(proc, self._stops[0])
                        self._told.add(proc.pid)
                stop_started = stop_started if stop_started is not None else time.monotonic()
                if time.monotonic() - stop_started > self.grace_s:
                    for proc in self._running:
                        _signal_group(proc, signal.SIGKILL)
            time.sleep(self.poll_s)
            for proc in [p for p in self._running if p.poll() is not None]:
                cell, _ = self._running.pop(proc)
                status = DONE if proc.returncode == 0 else INTERRUPTED if self._stops else FAILED
                record.set(cell, status, returncode=proc.returncode)
                progress.show()
            if self._stops and not self._running:
                raise SweepInterrupted(self._stops[0])
            if not self._stops and not queue and not any(c.name in wanted for c, _ in self._running.values()):
                return  # the round is done; cells run ahead go on
            progress.show()

    def _start(self, cell: GridCell, slot: Slot) -> subprocess.Popen[bytes]:
        argv = [self.python, *self.folder.cell_command(cell)]
        with self.folder.open_log(cell) as log:
            _log_header(log, argv, slot.label)
            # its own session (and so process group): the terminal's Ctrl-C reaches the sweep alone, which passes
            # it on; the child's workers are stopped with it by the group
            return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **slot.env}, start_new_session=True)


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


# ----------------------------------------------------------------------------------------------------------
# SLURM through submitit


@dataclass(frozen=True)
class SlurmResources:
    """Each array task's resources (sbatch's names); ``extra``: any other sbatch option, passed as given."""

    partition: str | None = None
    time_min: int = 60
    cpus_per_task: int = 1
    gpus_per_task: int = 0
    mem_gb: float | None = None
    array_parallelism: int | None = None
    job_name: str = "antlm-sweep"
    extra: dict[str, str] = field(default_factory=dict)

    def sbatch_parameters(self) -> dict[str, Any]:
        """Parameters of submitit's SlurmExecutor (``update_parameters``), which writes the sbatch file."""
        params: dict[str, Any] = {"job_name": self.job_name, "time": self.time_min, "cpus_per_task": self.cpus_per_task}
        if self.partition:
            params["partition"] = self.partition
        if self.gpus_per_task:
            params["gpus_per_task"] = self.gpus_per_task
        if self.mem_gb is not None:
            params["mem"] = f"{int(self.mem_gb * 1024)}MB"
        if self.array_parallelism is not None:
            params["array_parallelism"] = self.array_parallelism
        if self.extra:
            params["additional_parameters"] = dict(self.extra)
        return params


def run_cell(python: str, argv: Sequence[str], log_path: str, where: str, scheduled: bool = False) -> int:
    """One array task: the cell's ``run`` process, its output appended to its log, stopped at a resume point by
    exactly one SIGTERM (the trainer takes a second one as "stop now", keeping only its last resume point). Returns
    the cell's exit status.

    ``scheduled`` (a real SLURM task): the scheduler itself signals every process of the task, the cell's too,
    whatever the proctrack plugin (the cell stays in the task's process group, so ``proctrack/pgid`` finds it as
    well): scancel and pre-emption send SIGTERM, which the cell gets once from SLURM and is not passed on again.
    The time-limit notice (SIGUSR2, submitit's ``--signal=USR2@90``) also reaches every process, and would kill
    the cell (its default action): the cell ignores it (an ignored signal stays ignored across exec) and this task
    passes it on as SIGTERM, once. Otherwise (submitit's local executor) the cell has a session of its own, which
    nothing signals but this task: each stop signal here is passed to its group as SIGTERM."""
    previous_usr2 = signal.signal(signal.SIGUSR2, signal.SIG_IGN) if scheduled else None
    try:
        with open_append(Path(log_path)) as log:
            command = [python, *argv]
            _log_header(log, command, where)
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=not scheduled)
    finally:
        if previous_usr2 is not None:
            signal.signal(signal.SIGUSR2, previous_usr2)
    told: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        if not scheduled:
            _signal_group(proc, signal.SIGTERM)
        elif signum == signal.SIGUSR2 and not told:  # SIGTERM and SIGINT: SLURM sent the cell its own
            told.append(signum)
            proc.send_signal(signal.SIGTERM)

    for s in (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT):
        signal.signal(s, forward)
    return proc.wait()


class SlurmExecutor(Executor):
    """A SLURM job array through submitit, one task per cell (``--executor slurm``); the sweep waits for the array
    and records each task's exit status. Submitit's own task runner runs on this interpreter; ``python`` runs the
    cells. ``cluster="local"`` runs the same submission with submitit's local
    executor (no cluster needed: the tests)."""

    def __init__(self, python: str, output: Path, folder: SweepFolder, resources: SlurmResources,
                 cluster: str = "slurm", poll_s: float = 5.0) -> None:
        if cluster not in ("slurm", "local"):
            raise UserError(f"submitit cluster {cluster!r}: slurm or local")
        self.python, self.output, self.folder, self.resources = python, output, folder, resources
        self.cluster, self.poll_s = cluster, poll_s

    @property
    def jobs_folder(self) -> Path:
        return self.folder.folder / "slurm"

    @property
    def parallel(self) -> int:
        return self.resources.array_parallelism or 256

    def describe(self) -> str:
        r = self.resources
        return (f"slurm ({self.cluster}): a job array, one task per cell, partition {r.partition or '(default)'}, "
                f"time {r.time_min} min, {r.cpus_per_task} CPU(s), {r.gpus_per_task} GPU(s) per task")

    def sbatch_script(self, n_tasks: int) -> str:
        """The sbatch file submitit writes for an array of ``n_tasks`` (``--dry-run`` prints it)."""
        try:
            from submitit.slurm.slurm import _make_sbatch_string
        except ImportError:
            raise UserError("--executor slurm --dry-run prints submitit's sbatch file, so it needs submitit too: "
                            "pip install 'antlm-bench[slurm]'") from None

        command = " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit",
                            shlex.quote(str(self.jobs_folder / "%j"))])
        return _make_sbatch_string(command=command, folder=self.jobs_folder / "%j", map_count=n_tasks,
                                   **self.resources.sbatch_parameters())

    def _submitit_executor(self) -> Any:
        try:
            import submitit
        except ImportError:
            raise UserError("--executor slurm needs submitit: pip install 'antlm-bench[slurm]'") from None
        if self.cluster == "slurm":
            try:
                executor = submitit.SlurmExecutor(folder=self.jobs_folder / "%j")
            except RuntimeError as err:  # no srun on this machine
                raise UserError(f"--executor slurm: {err} (use --dry-run to see the job array without a cluster)") \
                    from None
            executor.update_parameters(**self.resources.sbatch_parameters())
            return executor
        executor = submitit.LocalExecutor(folder=self.jobs_folder / "%j")
        executor.update_parameters(timeout_min=self.resources.time_min)
        return executor

    def check_ready(self) -> None:
        """submitit and srun here; with a real cluster, its controller answers and has the partition asked for."""
        self._submitit_executor()
        if self.cluster != "slurm":
            return
        try:
            answer = subprocess.run(["sinfo", "--noheader", "--format=%R"], capture_output=True, text=True,
                                    timeout=120)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise UserError(f"--executor slurm: sinfo did not answer ({type(err).__name__}); is the cluster up?") \
                from None
        if answer.returncode != 0:
            why = (answer.stderr.strip().splitlines() or [f"exit status {answer.returncode}"])[-1]
            raise UserError(f"--executor slurm: the cluster does not answer (sinfo: {why}); check SLURM_CONF or "
                            "the controller (on one machine: ci/slurm/cluster.sh up, then eval "
                            "\"$(ci/slurm/cluster.sh env)\")")
        partitions = sorted({line.strip() for line in answer.stdout.splitlines() if line.strip()})
        partition = self.resources.partition
        if partition and partition not in partitions:
            raise UserError(f"--partition {partition}: not a partition of this cluster ({', '.join(partitions)})")

    def run(self, cells: Sequence[GridCell], record: SweepRecord, progress: Progress,
            ahead: Sequence[GridCell] = ()) -> None:
        """A job array of ``cells``; an array task waits in the cluster's queue, not on an idle worker of ours, so
        nothing is run ahead."""
        if not cells:
            return
        import submitit

        executor = self._submitit_executor()
        logs = [str(self.folder.log_of(cell)) for cell in cells]
        argvs = [self.folder.cell_command(cell) for cell in cells]
        for cell in cells:  # made here (no link followed) so that the task only appends
            self.folder.open_log(cell).close()
        try:
            jobs = executor.map_array(run_cell, [self.python] * len(cells), argvs, logs,
                                      [f"{self.cluster} array task {i}" for i in range(len(cells))],
                                      [self.cluster == "slurm"] * len(cells))
        except submitit.core.utils.FailedJobError as err:  # sbatch refused the array (its message)
            raise UserError(f"--executor slurm: sbatch refused the job array of {len(cells)} task(s): "
                            f"{one_line(err, 300)}") from None
        if self.cluster == "slurm":
            from antlm_bench.sweep.squeue import SqueueWatcher

            watcher = SqueueWatcher()  # squeue, not sacct: a cluster without accounting has no sacct to ask
            for job in jobs:
                job.watcher = watcher
        pending = dict(zip(cells, jobs))
        for cell, job in pending.items():
            record.set(cell, RUNNING, where=f"job {job.job_id}", returncode=None)
        progress.show()
        stops: list[int] = []

        def on_signal(signum: int, _frame: Any) -> None:
            stops.append(signum)
            for job in pending.values():
                job.cancel(check=False)

        previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
        try:
            while pending:
                time.sleep(self.poll_s)
                for cell, job in [(c, j) for c, j in pending.items() if j.done()]:
                    del pending[cell]
                    try:
                        returncode = int(job.result())
                    except Exception as err:  # noqa: BLE001  (the task died: cancelled, timed out, node lost)
                        record.set(cell, INTERRUPTED if stops else FAILED, returncode=None,
                                   where=f"job {job.job_id}: {one_line(err, 200, typed=True)}")
                    else:
                        record.set(cell, DONE if returncode == 0 else INTERRUPTED if stops else FAILED,
                                   returncode=returncode)
                    progress.show()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        if stops:
            raise SweepInterrupted(stops[0])


def choose_executor(settings: SweepSettings, grid: Grid, output: Path, folder: SweepFolder, first: RunConfig,
                    python: str) -> Executor:
    """The settings' executor: a SLURM array with their resources, or local workers, as many as the GPUs (x
    --per-device) or the cores over the most threads a cell of the grid takes (``first``, the first cell's
    RunConfig, holds the --device and --threads every cell shares)."""
    if settings.executor == "slurm":
        s = settings.slurm
        resources = SlurmResources(s.partition, s.time_min, s.cpus_per_task, s.gpus_per_task, s.mem_gb,
                                   s.array_parallelism, extra=s.extra)
        return SlurmExecutor(python, output, folder, resources, cluster=s.cluster)
    threads_per_run = max(run_threads(first, load_recipe(recipe).resolve(preset))[0]
                          for recipe in grid.recipes for preset in grid.presets)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    slots, why = local_slots(settings.jobs, cores, threads_per_run, visible_gpus(first.machine.device), settings.per_device)
    return LocalExecutor(python, output, folder, slots, why=why)


__all__ = ["Executor", "LocalExecutor", "SlurmExecutor", "SlurmResources", "Slot", "SweepInterrupted",
           "choose_executor", "local_slots", "run_cell", "visible_gpus"]
