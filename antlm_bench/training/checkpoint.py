"""Writing and reading full training checkpoints.

A checkpoint is a Hugging Face model folder (``model.safetensors``, ``config.json``, the tokenizer files; for a
backend whose classes are not in transformers, such as LTG-BERT, also its modeling code and an ``auto_map``) plus
``antlm_state.json`` (the record every reader uses: schedule, phase, epoch, step, tokens seen, seeds, hashes,
version, and the weights digest of ``runs.identity``, computed from the weights files just written). A resumable checkpoint also holds ``trainer_state.pt``: optimizer and scheduler state, the RNG states
of every process, and the loop's counters.

Every folder is written under a temporary name next to its destination and renamed into place, so a reader (or a
run resumed after ``kill -9``) never sees half a checkpoint:

- named checkpoints (``checkpoints/phase-2-MLM``): staging folder, then rename; an existing folder of that name is
  moved aside first and removed after.
- the resume point ``last``: a symbolic link to ``.resume/step-<N>``; the step folder is complete before the link
  is swapped with one atomic ``rename``, and older step folders are removed only after that.

Files are written 0666 and folders 0777 less the user's umask (0644 / 0755 under the usual 022), whatever mode
the library that wrote them chose: safetensors and ``mkdtemp`` make theirs private.

``resume_points`` lists where a run could continue: ``last`` first, then the other ``.resume/step-<N>`` folders,
newest first. The trainer checks each against its schedule and takes the first that holds up; nothing here
deletes a checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
import shutil
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from antlm_bench.data.files import temporary_tag
from antlm_bench.errors import EnvironmentFailure, UserError, one_line
from antlm_bench.progress import library_bars_off
from antlm_bench.runs.identity import weights_digest
from antlm_bench.runs.layout import LAST, RESUME_DIR
from antlm_bench.runs.record import STATE_FILE, CheckpointRecord, read_record

TRAINER_STATE_FILE = "trainer_state.pt"
WEIGHTS_FILE = "model.safetensors"
_STEP_FOLDER = re.compile(r"step-(\d+)")


def _write_folder(folder: Path, model: torch.nn.Module, tokenizer: Any, record: CheckpointRecord,
                  trainer_state: dict[str, Any] | None) -> None:
    from antlm_bench.data.tokenizer import save_tokenizer

    with library_bars_off():  # a "Writing model shards" bar at every save would bury the training log
        model.save_pretrained(str(folder))
    save_model_code(folder, model)
    if tokenizer is not None:
        save_tokenizer(tokenizer, folder)
    # the network's identity, from the files just written (what any reader of the folder can recompute)
    record = dataclasses.replace(record, weights_digest=weights_digest(folder))
    (folder / STATE_FILE).write_bytes(record.to_bytes())
    if trainer_state is not None:
        torch.save(trainer_state, folder / TRAINER_STATE_FILE)
    _make_readable(folder)
    _fsync_tree(folder)


def save_model_code(folder: Path, model: torch.nn.Module) -> None:
    """A non-stock backend's modeling code and ``auto_map`` next to the weights, so that transformers loads the
    folder with ``trust_remote_code=True`` where antlm-bench is not installed (models/remote_code.py)."""
    from antlm_bench.models.remote_code import write_model_code

    config = getattr(model, "config", None)
    if config is not None:
        write_model_code(folder, config)


def _umask() -> int:
    umask = os.umask(0)  # the only way to read it; set straight back
    os.umask(umask)
    return umask


def _make_readable(folder: Path) -> None:
    """Files as ``open()`` and folders as ``mkdir`` would make them under the umask (0644 / 0755 under 022):
    safetensors writes its file 0600 and ``mkdtemp`` its folder 0700, half a checkpoint the group cannot read."""
    umask = _umask()
    file_mode, dir_mode = 0o666 & ~umask, 0o777 & ~umask
    folder.chmod(dir_mode)
    for path in folder.rglob("*"):
        if not path.is_symlink():
            path.chmod(dir_mode if path.is_dir() else file_mode)


def _fsync_tree(folder: Path) -> None:
    """Flush the files to disk before the rename that publishes them (a power cut must not publish zeros)."""
    for path in folder.iterdir():
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


def write_checkpoint(destination: str | Path, model: torch.nn.Module, tokenizer: Any, record: CheckpointRecord,
                     trainer_state: dict[str, Any] | None = None) -> Path:
    """Write a complete checkpoint folder at ``destination``, atomically replacing any folder there."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.tmp-{temporary_tag()}-"))
    try:
        try:
            _write_folder(staging, model, tokenizer, record, trainer_state)
        except (OSError, SafetensorError) as err:  # safetensors reports a full disk as its own error type
            reason = one_line(err)
            raise EnvironmentFailure(f"{destination}: the checkpoint could not be written ({reason}); nothing of the "
                                     "run was replaced (the last resume point is kept): free space, then --resume"
                                     ) from None
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


def write_resume_point(run_dir: str | Path, model: torch.nn.Module, tokenizer: Any, record: CheckpointRecord,
                       trainer_state: dict[str, Any]) -> Path:
    """Write ``.resume/step-<N>`` and point ``last`` at it (one atomic rename of a link)."""
    run_dir = Path(run_dir)
    root = run_dir / RESUME_DIR
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{record.step:09d}"
    target = write_checkpoint(root / name, model, tokenizer, record, trainer_state)
    link_tmp = run_dir / f".{LAST}.link-{os.getpid()}"
    if link_tmp.is_symlink() or link_tmp.exists():
        link_tmp.unlink()
    os.symlink(Path(RESUME_DIR) / name, link_tmp)
    last = run_dir / LAST
    if last.is_dir() and not last.is_symlink():  # a plain folder (copied runs): move it out of the way
        shutil.rmtree(last)
    os.replace(link_tmp, last)
    for old in root.iterdir():  # only after the link moved: a kill before here leaves an extra folder, no harm
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
    return target


def resume_points(run_dir: str | Path) -> list[Path]:
    """Folders a run could continue from, best first: the one ``last`` points at, then the other
    ``.resume/step-<N>`` folders, newest first. Only names are looked at; ``check_resume_point`` and the trainer
    check the contents."""
    run_dir = Path(run_dir)
    last = run_dir / LAST
    points = [last] if last.is_dir() else []  # is_dir follows the link: a dangling one is no point
    current = last.resolve() if points else None
    root = run_dir / RESUME_DIR
    steps: list[tuple[int, Path]] = []
    if root.is_dir():
        for path in root.iterdir():
            match = _STEP_FOLDER.fullmatch(path.name)
            if match and path.is_dir() and not path.is_symlink():
                steps.append((int(match.group(1)), path))
    points += [path for _, path in sorted(steps, reverse=True) if path.resolve() != current]
    return points


def describe_last(run_dir: str | Path) -> str:
    """What is wrong with ``last`` when it offers no folder (for the one line that says why)."""
    last = Path(run_dir) / LAST
    if last.is_symlink() and not last.exists():
        return f"{last} points to {os.readlink(last)}, which does not exist"
    if last.exists() and not last.is_dir():
        return f"{last} is not a folder"
    return f"{last} does not exist"


def read_trainer_state(checkpoint: str | Path) -> tuple[CheckpointRecord, dict[str, Any]]:
    """(antlm_state.json record, trainer_state.pt) of a resumable checkpoint; a ``UserError`` naming the file
    for anything missing, unreadable or of the wrong shape."""
    checkpoint = Path(checkpoint)
    record = read_record(checkpoint)
    if record is None:
        raise UserError(f"{checkpoint}: no {STATE_FILE}; not an antlm-bench checkpoint")
    path = checkpoint / TRAINER_STATE_FILE
    if not path.is_file():
        raise UserError(f"{path}: missing; the checkpoint is not a resume point")
    try:
        with warnings.catch_warnings():  # torch warns about odd pickles on stderr: a second line beside our error
            warnings.simplefilter("ignore")
            trainer_state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        raise UserError(f"{path}: unreadable ({type(err).__name__}); resume from another checkpoint") from None
    for key, kind in (("step", int), ("tokens_seen", int), ("optimizer", dict)):
        value = trainer_state.get(key) if isinstance(trainer_state, dict) else None
        if not isinstance(value, kind) or isinstance(value, bool):
            raise UserError(f"{path}: field {key} missing or not {'an integer' if kind is int else 'a mapping'}; "
                            "resume from another checkpoint")
    return record, trainer_state


def load_weights(checkpoint: str | Path, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """The checkpoint's ``model.safetensors``; a ``UserError`` naming it when it is missing, cut short or corrupt."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(checkpoint) / WEIGHTS_FILE
    if not path.is_file():
        raise UserError(f"{path}: missing; the checkpoint is incomplete")
    try:
        return load_file(str(path), device=str(device))
    except (SafetensorError, OSError, ValueError) as err:
        reason = one_line(err)
        raise UserError(f"{path}: truncated or corrupt ({reason}); resume from another checkpoint") from None
