"""Export a trained model as the BabyLM 2025 evaluation pipeline takes it (``antlm-bench export --format babylm``).

The pipeline loads a submission with ``AutoModelFor{CausalLM,MaskedLM,SequenceClassification}.from_pretrained(
repo, revision=..., trust_remote_code=True)``: the main revision is the final model, and the intermediate
checkpoints are branches named ``chck_<N>M`` (N million words seen). So the export is

    OUT/                 the final model: config.json (with auto_map where the code is ours), weights, tokenizer,
                         modeling code for a backend that is not in transformers, antlm_state.json (provenance)
    OUT/chck_<N>M/       each words-seen checkpoint of the run, the same kind of folder

Optimizer state (``trainer_state.pt``) stays behind: a submission is weights, not a resume point. Words-seen
checkpoints are the run's ``checkpoints/chck_<N>M`` folders, if the run has any. docs/backends.md gives the
huggingface_hub commands that push OUT to the hub, one branch per ``chck_<N>M`` folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from antlm_bench.errors import UserError

FORMATS = ("babylm",)
WORDS_CHECKPOINT = re.compile(r"chck_(\d+)M")
# what a model folder holds that a submission does not need
_LEFT_OUT = {"trainer_state.pt"}


@dataclass
class Export:
    output: Path
    source: Path  # the checkpoint the main revision came from
    branches: list[str] = field(default_factory=list)  # chck_<N>M folders, fewest words first


def _step(folder: Path) -> int:
    try:
        return int(json.loads((folder / "antlm_state.json").read_text(encoding="utf-8")).get("step", -1))
    except (OSError, ValueError, AttributeError):
        return -1


def final_checkpoint(path: Path) -> tuple[Path, list[Path]]:
    """(the model folder to export, the words-seen checkpoints beside it) for a checkpoint or a run folder."""
    if (path / "config.json").is_file():
        run = path.parent.parent if path.parent.name == "checkpoints" else None
        folder = path
    elif (path / "checkpoints").is_dir():
        run = path
        phases = [p for p in (path / "checkpoints").iterdir()
                  if p.is_dir() and (p / "config.json").is_file() and not WORDS_CHECKPOINT.fullmatch(p.name)]
        if not phases:
            raise UserError(f"{path}/checkpoints: no finished checkpoint to export; train the run to a phase end")
        folder = max(phases, key=_step)
    else:
        raise UserError(f"{path}: neither a model folder (config.json) nor a training run (checkpoints/); pass one")
    words: list[Path] = []
    if run is not None and (run / "checkpoints").is_dir():
        words = [p for p in (run / "checkpoints").iterdir() if p.is_dir() and WORDS_CHECKPOINT.fullmatch(p.name)]
        words.sort(key=lambda p: int(WORDS_CHECKPOINT.fullmatch(p.name).group(1)))  # type: ignore[union-attr]
    return folder, words


def _copy_model(source: Path, destination: Path) -> None:
    """The model folder's files (not its subfolders, not the optimizer state), with the modeling code a
    transformers-only reader needs: the checkpoint's own, else generated from this package now."""
    from antlm_bench.models import load_config
    from antlm_bench.models.remote_code import write_model_code

    config = load_config(source)  # one line naming config.json if it is broken
    destination.mkdir(parents=True)
    for item in source.iterdir():
        if item.is_file() and item.name not in _LEFT_OUT:
            shutil.copy2(item, destination / item.name)
    if not any(destination.glob("*.safetensors")) and not any(destination.glob("*.bin")):
        raise UserError(f"{source}: no weights file (model.safetensors); not a complete checkpoint")
    if not (destination / "tokenizer_config.json").is_file():
        raise UserError(f"{source}: no tokenizer files; the BabyLM pipeline loads the tokenizer from the model folder")
    has_code = "auto_map" in json.loads((destination / "config.json").read_text(encoding="utf-8"))
    if not has_code:
        write_model_code(destination, config)


def export_babylm(checkpoint: str | Path, output: str | Path, overwrite: bool = False) -> Export:
    """Write ``checkpoint`` (a model folder or a training run) to ``output`` in the BabyLM 2025 layout; the
    folder appears whole or not at all (staged next to it, then renamed)."""
    source, words = final_checkpoint(Path(checkpoint))
    output = Path(output)
    empty_folder = output.is_dir() and not any(output.iterdir())
    if output.exists() and not empty_folder and not overwrite:
        raise UserError(f"{output} already exists; pass --overwrite or choose another folder")
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}.tmp-"))
    try:
        _copy_model(source, staging / "model")
        for folder in words:
            _copy_model(folder, staging / "model" / folder.name)
        if output.exists():
            shutil.rmtree(output) if output.is_dir() else output.unlink()
        os.replace(staging / "model", output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Export(output=output, source=source, branches=[folder.name for folder in words])


__all__ = ["FORMATS", "Export", "export_babylm", "final_checkpoint"]
