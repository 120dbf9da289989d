"""The sweep folder: ``<output>/sweep/`` holds the sweep record, the decision of ``--until-decided`` and one log per
cell, beside the run folders it sweeps.

    <output>/sweep/sweep.json       what was asked and each cell's status (rewritten atomically at every change);
                                    a later sweep into the folder keeps what the earlier ones recorded: a reused
                                    cell keeps the wall time, slot and start of the sweep that ran it, and each
                                    earlier sweep's span and counts stay under "history"
    <output>/sweep/decision.json    --until-decided: the rule, the seeds used and each comparison's decision
    <output>/sweep/logs/<cell>.log  each cell's output (the cell's run folder name), appended to by every attempt
    <output>/sweep/cells/<cell>.json each cell's configuration (an antlm_bench.config.RunConfig), written before the
                                    cell starts; the cell runs `antlm-bench run --config` on it, and so can anyone

A second sweep into the same output is refused while the first holds the folder's lock. Nothing is written through
a symbolic link planted in the sweep folder: the folders must be real folders, logs are opened without following
links, and the JSON files are replaced by rename.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from antlm_bench.clock import utc_stamp
from antlm_bench.data import atomic_write_bytes
from antlm_bench.data.files import open_append
from antlm_bench.data.readers import read_json_model
from antlm_bench.errors import UserError
from antlm_bench.sweep.grid import GridCell

SWEEP_DIR = "sweep"
RECORD_FILE = "sweep.json"
DECISION_FILE = "decision.json"
LOGS_DIR = "logs"
CELLS_DIR = "cells"
SCHEMA_VERSION = 1

WAITING, RUNNING, DONE, REUSED, FAILED, INTERRUPTED = "waiting", "running", "done", "reused", "failed", "interrupted"
FINISHED = (DONE, REUSED)
Status = Literal["waiting", "running", "done", "reused", "failed", "interrupted"]


class CellRecord(BaseModel):
    """One cell as sweep.json stores it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    recipe: str
    preset: str
    schedule: str
    seed: int
    status: Status
    returncode: int | None = None
    seconds: float | None = Field(None, ge=0)  # wall time of the last attempt
    where: str = ""
    ran_in: str | None = None
    log: str | None = None  # absent from an exported study (run_study.sh)


class SweepSpan(BaseModel):
    """An earlier sweep into the folder: its start, last update and counts."""

    model_config = ConfigDict(extra="forbid")

    started_at: str | None = None
    updated_at: str | None = None
    counts: dict[Status, int] | None = None


class SweepFile(BaseModel):
    """``<output>/sweep/sweep.json``, typed: written by ``SweepRecord.save`` only, read by ``SweepRecord.continuing``
    only (every field checked: one line naming the file and the field otherwise)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    asked: dict[str, Any]
    started_at: str
    updated_at: str
    rounds: list[list[int]]
    history: list[SweepSpan]
    counts: dict[Status, int]
    cells: list[CellRecord]


def _real_folder(path: Path) -> Path:
    """Make ``path`` (and its parents) as folders; refuse a symbolic link or a file in its place."""
    if path.is_symlink():
        raise UserError(f"{path}: a symbolic link where the sweep keeps its files; remove it or choose another "
                        "--output")
    if path.exists() and not path.is_dir():
        raise UserError(f"{path}: not a folder; remove it or choose another --output")
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class SweepFolder:
    """The paths of ``<output>/sweep/`` (made on first use, refusing planted links)."""

    output: Path

    @property
    def folder(self) -> Path:
        return self.output / SWEEP_DIR

    @property
    def record_file(self) -> Path:
        return self.folder / RECORD_FILE

    @property
    def decision_file(self) -> Path:
        return self.folder / DECISION_FILE

    @property
    def logs(self) -> Path:
        return self.folder / LOGS_DIR

    def log_of(self, cell: GridCell) -> Path:
        return self.logs / f"{cell.name}.log"

    def config_file_of(self, cell: GridCell) -> Path:
        return self.folder / CELLS_DIR / f"{cell.name}.json"

    def cell_command(self, cell: GridCell) -> list[str]:
        """The words after the interpreter that run ``cell``: ``-m antlm_bench run --config <its file>``, the file
        (its typed configuration) written here first, atomically and never through a planted link."""
        path = self.config_file_of(cell)
        _real_folder(path.parent)
        atomic_write_bytes(path, (cell.config(self.output).model_dump_json(indent=1) + "\n").encode())
        return ["-m", "antlm_bench", "run", "--config", str(path)]

    def make(self) -> None:
        _real_folder(self.output)
        _real_folder(self.folder)
        _real_folder(self.logs)

    def open_log(self, cell: GridCell) -> IO[bytes]:
        """The cell's log, opened for appending without following a link planted at its name."""
        return open_append(self.log_of(cell))

    def write_json(self, path: Path, payload: dict[str, Any]) -> None:
        _real_folder(path.parent)
        atomic_write_bytes(path, (json.dumps(payload, indent=1, default=str) + "\n").encode())


@dataclass
class CellState:
    cell: GridCell
    status: str = WAITING
    returncode: int | None = None
    started: float | None = None
    seconds: float | None = None  # wall time of the last attempt
    where: str = ""  # the worker slot or array task that ran it
    ran_in: str | None = None  # started_at of the sweep that ran it (an earlier one's, for a reused cell)

    def as_record(self, log: Path) -> CellRecord:
        return CellRecord(name=self.cell.name, recipe=self.cell.recipe, preset=self.cell.preset,
                          schedule=self.cell.schedule, seed=self.cell.seed, status=self.status,  # type: ignore[arg-type]
                          returncode=self.returncode,
                          seconds=None if self.seconds is None else round(self.seconds, 1), where=self.where,
                          ran_in=self.ran_in, log=str(log))


@dataclass
class SweepRecord:
    """What was asked and every cell's status; :meth:`save` rewrites ``sweep.json`` atomically."""

    folder: SweepFolder
    asked: dict[str, Any]
    states: dict[str, CellState] = field(default_factory=dict)
    started_at: str = field(default_factory=utc_stamp)
    rounds: list[list[int]] = field(default_factory=list)  # the seeds of each round (--until-decided)
    history: list[SweepSpan] = field(default_factory=list)  # earlier sweeps into the folder, oldest first
    earlier: dict[str, CellRecord] = field(default_factory=dict)  # cell name -> its finished state then

    @classmethod
    def continuing(cls, folder: SweepFolder, asked: dict[str, Any]) -> SweepRecord:
        """A new sweep's record that keeps what an earlier sweep into the folder recorded (see the module's
        docstring); a record this version cannot read is refused in one line, never overwritten."""
        record = cls(folder, asked)
        path = folder.record_file
        if not path.exists():
            return record
        previous = read_json_model(path, SweepFile, "not a sweep record this version reads",
                                   "move it away to start a new record")
        record.history = [*previous.history, SweepSpan(started_at=previous.started_at,
                                                       updated_at=previous.updated_at, counts=previous.counts)]
        record.earlier = {c.name: c for c in previous.cells if c.status in FINISHED and c.seconds is not None}
        return record

    def add(self, cells: list[GridCell]) -> None:
        for cell in cells:
            if cell.name not in self.states:
                then = self.earlier.get(cell.name)
                if then is None:
                    self.states[cell.name] = CellState(cell)
                    continue
                self.states[cell.name] = CellState(cell, seconds=then.seconds, where=then.where,
                                                   ran_in=then.ran_in or self.history[-1].started_at)

    def set(self, cell: GridCell, status: str, **fields: Any) -> None:
        state = self.states[cell.name]
        state.status = status
        for key, value in fields.items():
            setattr(state, key, value)
        if status == RUNNING:
            state.started, state.ran_in = time.monotonic(), self.started_at
        elif state.started is not None and status in (DONE, FAILED, INTERRUPTED):
            state.seconds = time.monotonic() - state.started
        self.save()

    def count(self, *statuses: str) -> int:
        return sum(state.status in statuses for state in self.states.values())

    def unfinished(self) -> list[CellState]:
        return [state for state in self.states.values() if state.status not in FINISHED]

    def save(self) -> None:
        document = SweepFile(
            schema_version=SCHEMA_VERSION, asked=self.asked, started_at=self.started_at, updated_at=utc_stamp(),
            rounds=self.rounds, history=self.history,
            counts={status: self.count(status) for status in (WAITING, RUNNING, DONE, REUSED, FAILED, INTERRUPTED)},
            cells=[state.as_record(self.folder.log_of(state.cell)) for state in self.states.values()])
        self.folder.write_json(self.folder.record_file, document.model_dump(mode="json"))


__all__ = ["DECISION_FILE", "DONE", "FAILED", "FINISHED", "INTERRUPTED", "RECORD_FILE", "REUSED", "RUNNING",
           "SWEEP_DIR", "WAITING", "CellRecord", "CellState", "SweepFile", "SweepFolder", "SweepRecord"]
