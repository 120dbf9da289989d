"""Export a trained model as the BabyLM 2025 evaluation pipeline takes it (``antlm-bench export --format babylm``).

The pipeline loads a submission with ``AutoModelFor{CausalLM,MaskedLM,SequenceClassification}.from_pretrained(
repo, revision=..., trust_remote_code=True)``: the main revision is the final model, and the intermediate
checkpoints are branches named ``chck_<N>M`` (N million words seen). So the export is

    OUT/                 the final model: config.json (with auto_map where the code is ours), weights, tokenizer,
                         modeling code for a backend that is not in transformers, antlm_state.json (provenance),
                         antlm_export.json (what was exported from where: marks OUT as an export)
    OUT/chck_<N>M/       each words-seen checkpoint of the run, the same kind of folder

Everything in OUT is written by this module, never copied: the model is loaded with the loader ``eval`` uses (a
truncated, half-written or incomplete weights file is refused the same way; non-finite weights too) and saved
again, the tokenizer likewise, and the modeling code is generated from this package
(``models/remote_code.py``). A folder's own ``.py`` files are never passed on, and an ``auto_map`` that names code
we do not generate (a stock transformers model with an ``auto_map``, any ``auto_map`` in tokenizer_config.json)
is refused: whoever loads the export with ``trust_remote_code=True`` runs only antlm-bench's code.

OUT may not be, contain or lie inside the checkpoint or the run it comes from, and ``--overwrite`` replaces only
an earlier export (one with ``antlm_export.json``), never a symbolic link: a slip of the arguments cannot delete
a run. Optimizer state (``trainer_state.pt``) stays behind: a submission is weights, not a resume point.
docs/backends.md gives the huggingface_hub commands that push OUT to the hub, one branch per ``chck_<N>M`` folder.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import antlm_bench
from antlm_bench.data.readers import read_json
from antlm_bench.errors import UserError
from antlm_bench.locking import fault_point
from antlm_bench.runs.layout import RunLayout, model_folder
from antlm_bench.runs.record import STATE_FILE

FORMATS = ("babylm",)
EXPORT_MARKER = "antlm_export.json"  # in every export's top folder: what --overwrite may replace


@dataclass
class Export:
    output: Path
    source: Path  # the checkpoint the main revision came from
    why: str  # which checkpoint that is and why it was taken (for a run folder: final, else last)
    branches: list[str] = field(default_factory=list)  # chck_<N>M folders, fewest words first


def _run_of(path: Path) -> RunLayout | None:
    """The run a checkpoint folder belongs to (``RUN/checkpoints/X``, ``RUN/last``, ``RUN/.resume/step-N``)."""
    for candidate in (path.parent, path.parent.parent, path.resolve().parent, path.resolve().parent.parent):
        layout = RunLayout(candidate)
        if layout.has_run():
            return layout
    return None


def export_sources(path: Path) -> tuple[Path, str, list[Path], list[Path]]:
    """(the model folder to export, why that one, the words-seen checkpoints beside it, the folders an export must
    stay out of) for a checkpoint folder or a run folder."""
    folder, why = model_folder(path)
    if why is not None:
        run: RunLayout | None = RunLayout(path)
    elif (path / "config.json").is_file():
        why, run = f"{path} (a checkpoint folder)", _run_of(path)
    else:
        raise UserError(f"{path}: neither a model folder (config.json) nor a training run (run.json, checkpoints/); "
                        "pass one")
    words = [checkpoint for _, checkpoint in run.words_checkpoints()] if run is not None else []
    protected = [folder, *words] + ([run.folder] if run is not None else [])
    return folder, why, words, protected


def _check_output(output: Path, protected: list[Path], overwrite: bool) -> None:
    """Refuse, before anything is read or written, an OUT that would overwrite the source or anything that is not
    an earlier export."""
    if output.is_symlink():
        raise UserError(f"{output}: a symbolic link; export writes a folder of its own and does not replace or "
                        "follow links: give another OUT")
    real = output.resolve()
    for kept in protected:
        kept_real = kept.resolve()
        if real == kept_real or kept_real in real.parents or real in kept_real.parents:
            raise UserError(f"{output}: is, contains or lies inside {kept}, which is being exported; give an OUT "
                            "outside the run and its checkpoints")
    if not output.exists() or (output.is_dir() and not any(output.iterdir())):
        return
    if not overwrite:
        raise UserError(f"{output} already exists; pass --overwrite to replace an earlier export, or choose "
                        "another folder")
    marker = output / EXPORT_MARKER
    if not output.is_dir() or marker.is_symlink() or not marker.is_file():
        raise UserError(f"{output}: not an earlier antlm-bench export (no {EXPORT_MARKER}); --overwrite replaces "
                        "only those: remove it yourself or choose another folder")


def _refuse_foreign_code(source: Path) -> None:
    """An ``auto_map`` we would not write ourselves: transformers would run the code it names."""
    from antlm_bench.models.backend import backend_of

    config = read_json(source / "config.json", "corrupt config", "re-save the checkpoint")
    chosen = backend_of(config) if isinstance(config, dict) else None
    ours = chosen is not None and chosen.remote_code(config) is not None
    if isinstance(config, dict) and "auto_map" in config and not ours:
        raise UserError(f"{source / 'config.json'}: auto_map names code antlm-bench did not generate "
                        f"({_code_files(config['auto_map'])}); export passes on only its own modeling code: "
                        "remove auto_map if the model is a transformers class")
    tokenizer_config = source / "tokenizer_config.json"
    if tokenizer_config.is_file():
        settings = read_json(tokenizer_config, "corrupt tokenizer config", "re-save the checkpoint")
        if isinstance(settings, dict) and "auto_map" in settings:
            raise UserError(f"{tokenizer_config}: auto_map names tokenizer code "
                            f"({_code_files(settings['auto_map'])}); export passes on no tokenizer code: remove it")


def _code_files(auto_map: Any) -> str:
    names = auto_map.values() if isinstance(auto_map, dict) else [auto_map]
    flat = [str(n) for name in names for n in (name if isinstance(name, list) else [name]) if n]
    return ", ".join(sorted({name.rsplit(".", 1)[0] + ".py" for name in flat})) or repr(auto_map)


def _write_model(source: Path, destination: Path) -> None:
    """Load ``source`` as ``eval`` does and write it anew: weights, config, tokenizer, our code, the record."""
    from antlm_bench.data.tokenizer import load_tokenizer
    from antlm_bench.models import load_config, load_model
    from antlm_bench.models.remote_code import write_model_code

    _refuse_foreign_code(source)
    if not (source / "tokenizer.json").is_file() and not (source / "tokenizer_config.json").is_file():
        raise UserError(f"{source}: no tokenizer files; the BabyLM pipeline loads the tokenizer from the model folder")
    config = load_config(source)  # one line naming config.json if it is broken
    import torch

    dtype = getattr(config, "torch_dtype", None)
    model = load_model(source, dtype=dtype if isinstance(dtype, torch.dtype) else torch.float32)
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise UserError(f"{source}: weight {name} holds NaN or infinite values; the checkpoint is damaged "
                            "(export an earlier one)")
    tokenizer = load_tokenizer(source)
    destination.mkdir(parents=True)
    model.save_pretrained(str(destination))
    tokenizer.save_pretrained(str(destination))
    write_model_code(destination, model.config)  # generated now, replacing any auto_map the loaded config carried
    if (source / STATE_FILE).is_file():
        record = read_json(source / STATE_FILE, "corrupt checkpoint record", "re-save the checkpoint")
        (destination / STATE_FILE).write_text(json.dumps(record, indent=2, default=_finite) + "\n", encoding="utf-8")


def _finite(value: Any) -> Any:
    return value if not isinstance(value, float) or math.isfinite(value) else None


def export_babylm(checkpoint: str | Path, output: str | Path, overwrite: bool = False) -> Export:
    """Write ``checkpoint`` (a model folder or a training run) to ``output`` in the BabyLM 2025 layout; the
    folder appears whole or not at all (staged next to it, then renamed)."""
    from transformers.utils import logging as hf_logging

    source, why, words, protected = export_sources(Path(checkpoint))
    output = Path(output)
    _check_output(output, protected, overwrite)
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}.tmp-"))
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a bar per load and save: the refusal or the summary is the output
    try:
        built = staging / "model"
        _write_model(source, built)
        for folder in words:
            _write_model(folder, built / folder.name)
        manifest = {"format": "babylm", "source": str(source), "branches": [folder.name for folder in words],
                    "antlm_bench": antlm_bench.__version__}
        (built / EXPORT_MARKER).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        fault_point("export.staged")
        if os.path.lexists(output):  # an earlier export or an empty folder (_check_output): swap, then remove it
            aside = staging / "replaced"
            os.rename(output, aside)
            try:
                os.rename(built, output)
            except BaseException:
                os.rename(aside, output)
                raise
        else:
            os.rename(built, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if bars:
            hf_logging.enable_progress_bar()
    return Export(output=output, source=source, why=why, branches=[folder.name for folder in words])


__all__ = ["EXPORT_MARKER", "FORMATS", "Export", "export_babylm", "export_sources"]
