"""Writing and reading full training checkpoints.

A checkpoint is a Hugging Face model folder (``model.safetensors``, ``config.json``, the tokenizer files) plus
``antlm_state.json`` (the record every reader uses: schedule, phase, epoch, step, tokens seen, seeds, hashes,
version). A resumable checkpoint also holds ``trainer_state.pt``: optimizer and scheduler state, the RNG states
of every process, and the loop's counters.

Every folder is written under a temporary name next to its destination and renamed into place, so a reader (or a
run resumed after ``kill -9``) never sees half a checkpoint:

- named checkpoints (``checkpoints/phase-2-MLM``): staging folder, then rename; an existing folder of that name is
  moved aside first and removed after.
- the resume point ``last``: a symbolic link to ``.resume/step-<N>``; the step folder is complete before the link
  is swapped with one atomic ``rename``, and older step folders are removed only after that.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from antlm_bench.checkpoint_state import STATE_FILE, read_state
from antlm_bench.data import atomic_write_bytes
from antlm_bench.errors import UserError

TRAINER_STATE_FILE = "trainer_state.pt"
LAST = "last"
RESUME_DIR = ".resume"


def _write_folder(folder: Path, model: torch.nn.Module, tokenizer: Any, state: dict[str, Any],
                  trainer_state: dict[str, Any] | None) -> None:
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a "Writing model shards" bar at every save would bury the training log
    try:
        model.save_pretrained(str(folder))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if tokenizer is not None:
        tokenizer.save_pretrained(str(folder))
    payload = json.dumps(state, indent=2, sort_keys=True, default=str).encode() + b"\n"
    (folder / STATE_FILE).write_bytes(payload)
    if trainer_state is not None:
        torch.save(trainer_state, folder / TRAINER_STATE_FILE)
    _fsync_tree(folder)


def _fsync_tree(folder: Path) -> None:
    """Flush the files to disk before the rename that publishes them (a power cut must not publish zeros)."""
    for path in folder.iterdir():
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


def write_checkpoint(destination: str | Path, model: torch.nn.Module, tokenizer: Any, state: dict[str, Any],
                     trainer_state: dict[str, Any] | None = None) -> Path:
    """Write a complete checkpoint folder at ``destination``, atomically replacing any folder there."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.tmp-"))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; a checkpoint is shared like any model folder
        _write_folder(staging, model, tokenizer, state, trainer_state)
        aside = None
        if destination.exists() or destination.is_symlink():
            aside = destination.parent / f".{destination.name}.old-{os.getpid()}"
            shutil.rmtree(aside, ignore_errors=True)
            os.replace(destination, aside)
        os.replace(staging, destination)
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return destination


def write_resume_point(run_dir: str | Path, model: torch.nn.Module, tokenizer: Any, state: dict[str, Any],
                       trainer_state: dict[str, Any]) -> Path:
    """Write ``.resume/step-<N>`` and point ``last`` at it (one atomic rename of a link)."""
    run_dir = Path(run_dir)
    root = run_dir / RESUME_DIR
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{int(state['step']):09d}"
    target = write_checkpoint(root / name, model, tokenizer, state, trainer_state)
    link_tmp = run_dir / f".{LAST}.link-{os.getpid()}"
    if link_tmp.is_symlink() or link_tmp.exists():
        link_tmp.unlink()
    os.symlink(Path(RESUME_DIR) / name, link_tmp)
    last = run_dir / LAST
    if last.exists() and not last.is_symlink():  # a plain folder (copied runs): move it out of the way
        shutil.rmtree(last)
    os.replace(link_tmp, last)
    for old in root.iterdir():  # only after the link moved: a kill before here leaves an extra folder, no harm
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
    return target


def last_checkpoint(run_dir: str | Path) -> Path | None:
    """The resume point of a run folder, if it has a complete one."""
    last = Path(run_dir) / LAST
    if not last.exists():
        return None
    if not (last / STATE_FILE).is_file() or not (last / TRAINER_STATE_FILE).is_file():
        raise UserError(f"{last}: incomplete resume checkpoint (no {STATE_FILE} or {TRAINER_STATE_FILE}); "
                        "remove it to resume from an earlier one, or start again with --overwrite")
    return last


def read_trainer_state(checkpoint: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(antlm_state.json record, trainer_state.pt) of a resumable checkpoint."""
    checkpoint = Path(checkpoint)
    state = read_state(checkpoint)
    if state is None:
        raise UserError(f"{checkpoint}: no {STATE_FILE}; not an antlm-bench checkpoint")
    path = checkpoint / TRAINER_STATE_FILE
    try:
        trainer_state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError) as err:
        raise UserError(f"{path}: unreadable ({type(err).__name__}); resume from another checkpoint") from None
    return state, trainer_state


def write_json_atomic(path: Path, record: dict[str, Any]) -> None:
    atomic_write_bytes(path, json.dumps(record, indent=2, sort_keys=True, default=str).encode() + b"\n")
    path.chmod(0o644)


__all__ = [
    "LAST", "RESUME_DIR", "STATE_FILE", "TRAINER_STATE_FILE", "last_checkpoint", "read_trainer_state",
    "write_checkpoint", "write_json_atomic", "write_resume_point",
]
