"""The sweep folder: ``<output>/sweep/`` holds the sweep record, the decision of ``--until-decided`` and one log per
cell, beside the run folders it sweeps.

    <output>/sweep/sweep.json       what was asked and each cell's status (rewritten atomically at every change);
                                    a later sweep into the folder keeps what the earlier ones recorded: a reused
                                    cell keeps the wall time, slot and start of the sweep that ran it, and each
                                    earlier sweep's span and counts stay under "history"
    <output>/sweep/decision.json    --until-decided: the rule, the seeds used and each comparison's decision
    <output>/sweep/logs/<cell>.log  each cell's output (the cell's run folder name), appended to by every attempt

A second sweep into the same output is refused while the first holds the folder's lock. Nothing is written through
a symbolic link planted in the sweep folder: the folders must be real folders, logs are opened without following
links, and the JSON files are replaced by rename.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from antlm_bench.data import atomic_write_bytes
from antlm_bench.errors import UserError
from antlm_bench.sweep.grid import Cell

SWEEP_DIR = "sweep"
RECORD_FILE = "sweep.json"
DECISION_FILE = "decision.json"
LOGS_DIR = "logs"
SCHEMA_VERSION = 1

WAITING, RUNNING, DONE, REUSED, FAILED, INTERRUPTED = "waiting", "running", "done", "reused", "failed", "interrupted"
FINISHED = (DONE, REUSED)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _real_folder(path: Path) -> Path:
    """Make ``path`` (and its parents) as folders; refuse a symbolic link or a file in its place."""
    if path.is_symlink():
        raise UserError(f"{path}: a symbolic link where the sweep keeps its files; remove it or choose another "
                        "--output")
    if path.exists() and not path.is_dir():
        raise UserError(f"{path}: not a folder; remove it or choose another --output")
    path.mkdir(parents=True, exist_ok=True)
    return path


def open_append_no_link(path: Path) -> IO[bytes]:
    """``path`` opened for appending (made if missing); a symbolic link planted at its name is refused in one line,
    never followed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UserError(f"{path}: a symbolic link where the sweep writes a log; remove it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"{path}: not a plain file where the sweep writes a log; remove it")
    return os.fdopen(fd, "ab")


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

    def log_of(self, cell: Cell) -> Path:
        return self.logs / f"{cell.name}.log"

    def make(self) -> None:
        _real_folder(self.output)
        _real_folder(self.folder)
        _real_folder(self.logs)

    def open_log(self, cell: Cell) -> IO[bytes]:
        """The cell's log, opened for appending without following a link planted at its name."""
        return open_append_no_link(self.log_of(cell))

    def write_json(self, path: Path, payload: dict[str, Any]) -> None:
        _real_folder(path.parent)
        atomic_write_bytes(path, (json.dumps(payload, indent=1, default=str) + "\n").encode())


@dataclass
class CellState:
    cell: Cell
    status: str = WAITING
    returncode: int | None = None
    started: float | None = None
    seconds: float | None = None  # wall time of the last attempt
    where: str = ""  # the worker slot or array task that ran it
    ran_in: str | None = None  # started_at of the sweep that ran it (an earlier one's, for a reused cell)

    def as_json(self, log: Path) -> dict[str, Any]:
        return {"name": self.cell.name, "recipe": self.cell.recipe, "preset": self.cell.preset,
                "schedule": self.cell.schedule, "seed": self.cell.seed, "status": self.status,
                "returncode": self.returncode, "seconds": None if self.seconds is None else round(self.seconds, 1),
                "where": self.where, "ran_in": self.ran_in, "log": str(log)}


def _check_shape(previous: Any) -> None:
    """The fields a continuing sweep reads back, of the types it writes (a string ``history`` would be split into
    characters, a text ``seconds`` added to a number): a ValueError naming the field otherwise."""
    if not isinstance(previous, dict):
        raise ValueError(f"a {type(previous).__name__}, not a mapping")
    history = previous.get("history", [])
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
        raise ValueError(f"history {history!r:.40}: not a list of mappings")
    cells = previous.get("cells")
    if not isinstance(cells, list):
        raise ValueError(f"cells {cells!r:.40}: not a list")
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("name"), str):
            raise ValueError(f"cells[{i}]: not a mapping with a name")
        seconds = cell.get("seconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
            raise ValueError(f"cells[{i}].seconds {seconds!r:.40}: not a number")
        for key in ("where", "ran_in"):
            if cell.get(key) is not None and not isinstance(cell[key], str):
                raise ValueError(f"cells[{i}].{key} {cell[key]!r:.40}: not a text")


@dataclass
class SweepRecord:
    """What was asked and every cell's status; :meth:`save` rewrites ``sweep.json`` atomically."""

    folder: SweepFolder
    asked: dict[str, Any]
    states: dict[str, CellState] = field(default_factory=dict)
    started_at: str = field(default_factory=_now)
    rounds: list[list[int]] = field(default_factory=list)  # the seeds of each round (--until-decided)
    history: list[dict[str, Any]] = field(default_factory=list)  # earlier sweeps into the folder, oldest first
    earlier: dict[str, dict[str, Any]] = field(default_factory=dict)  # cell name -> its finished state then

    @classmethod
    def continuing(cls, folder: SweepFolder, asked: dict[str, Any]) -> SweepRecord:
        """A new sweep's record that keeps what an earlier sweep into the folder recorded (see the module's
        docstring); a record this version cannot read is refused in one line, never overwritten."""
        record = cls(folder, asked)
        path = folder.record_file
        if not path.exists():
            return record
        try:
            previous = json.loads(path.read_text(encoding="utf-8"))
            if previous.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(f"schema_version {previous.get('schema_version')!r}")
            _check_shape(previous)
            record.history = [*previous.get("history", []),
                              {key: previous.get(key) for key in ("started_at", "updated_at", "counts")}]
            record.earlier = {c["name"]: c for c in previous["cells"]
                              if c.get("status") in FINISHED and c.get("seconds") is not None}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise UserError(f"{path}: not a sweep record this version reads ({err}); move it away to start a new "
                            "record") from None
        return record

    def add(self, cells: list[Cell]) -> None:
        for cell in cells:
            if cell.name not in self.states:
                then = self.earlier.get(cell.name, {})
                ran_in = (then.get("ran_in") or self.history[-1]["started_at"]) if then else None
                self.states[cell.name] = CellState(cell, seconds=then.get("seconds"), where=then.get("where", ""),
                                                   ran_in=ran_in)

    def set(self, cell: Cell, status: str, **fields: Any) -> None:
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
        self.folder.write_json(self.folder.record_file, {
            "schema_version": SCHEMA_VERSION, "asked": self.asked, "started_at": self.started_at,
            "updated_at": _now(), "rounds": self.rounds, "history": self.history,
            "counts": {status: self.count(status) for status in (WAITING, RUNNING, DONE, REUSED, FAILED,
                                                                  INTERRUPTED)},
            "cells": [state.as_json(self.folder.log_of(state.cell)) for state in self.states.values()],
        })


__all__ = ["open_append_no_link", "DECISION_FILE", "DONE", "FAILED", "FINISHED", "INTERRUPTED", "RECORD_FILE", "REUSED", "RUNNING",
           "SWEEP_DIR", "WAITING", "CellState", "SweepFolder", "SweepRecord"]
