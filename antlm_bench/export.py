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

The export is verified before it appears: ``antlm_export.json`` records every revision's weights hash, the sha256
of every file of its folder (config.json, the tokenizer's files, the code, the weights: an export is verified whole)
and its step and words; two revisions with identical weights, a branch identical to the final model, or branches whose steps do
not grow with their words counts are refused, naming them (a public model suite was once found serving final-era
weights under most of its early branches). A branch whose words count is not a whole million (``chck_500K``) is
exported under its own name with a note: the pipeline reads ``chck_<N>M`` only. Exporting an earlier checkpoint of a
run takes the branches saved before it.

``antlm_export.json`` is typed (``runs.export_record.ExportRecord``, with a schema version); ``eval`` verifies a
revision whole against it before scoring: every file as exported, none missing or added (``--skip-export-check``
skips that, and says so). OUT is locked while it is written (``locking.folder_lock``, like a train or eval folder):
a second export into it at the same time is refused, naming the first one's pid, instead of one export being lost.

OUT may not be, contain or lie inside the checkpoint or the run it comes from, and ``--overwrite`` replaces only
a folder that proves to be an earlier export: no run items, a complete ``antlm_export.json`` of this version,
every revision's weights as recorded, no other folder or link; never a symbolic link: a slip of the arguments
cannot delete a run. The staging folder ``.OUT.tmp-<pid>-*`` of a killed export is removed by the next export
to OUT, which says so. Optimizer state (``trainer_state.pt``) stays behind: a submission is weights, not a resume point.
docs/backends.md gives the huggingface_hub commands that push OUT to the hub, one branch per ``chck_<N>M`` folder.
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import antlm_bench
from antlm_bench.data.files import missing_folders, remove_empty_folders, remove_stale, removed_note, temporary_tag
from antlm_bench.data.readers import read_json
from antlm_bench.errors import UserError
from antlm_bench.locking import LOCK_FILE, fault_point, folder_lock
from antlm_bench.progress import library_bars_off
from antlm_bench.runs.export_record import (
    EXPORT_FILE,
    EXPORT_SCHEMA_VERSION,
    MAIN,
    ExportRecord,
    ExportRevision,
    read_export_record,
    revision_files,
    verify_revision,
)
from antlm_bench.runs.identity import weights_digest
from antlm_bench.runs.layout import LAST, RUN_ITEMS, RunLayout, model_folder, words_of_checkpoint
from antlm_bench.runs.record import STATE_FILE, read_record

FORMATS = ("babylm",)
EXPORT_MARKER = EXPORT_FILE  # in every export's top folder: what --overwrite may replace (runs.export_record)


@dataclass
class Export:
    output: Path
    source: Path  # the checkpoint the main revision came from
    what: str  # which checkpoint that is, as a noun phrase (for a run folder: its final one, else its resume point)
    branches: list[str] = field(default_factory=list)  # chck_<N>M folders, fewest words first
    notes: list[str] = field(default_factory=list)  # for the user: names the BabyLM pipeline will not read, ...


def _run_of(path: Path) -> RunLayout | None:
    """The run a checkpoint folder belongs to (``RUN/checkpoints/X``, ``RUN/last``, ``RUN/.resume/step-N``)."""
    for candidate in (path.parent, path.parent.parent, path.resolve().parent, path.resolve().parent.parent):
        layout = RunLayout(candidate)
        if layout.has_run():
            return layout
    return None


def export_sources(path: Path) -> tuple[Path, str, list[Path], list[Path]]:
    """(the model folder to export, which checkpoint that is as a noun phrase, the words-seen checkpoints beside it,
    the folders an export must stay out of) for a checkpoint folder or a run folder."""
    folder, chosen = model_folder(path)
    if chosen is not None:
        run: RunLayout | None = RunLayout(path)
        what = (f"the resume point {LAST} of the run {path}, which did not finish ({run.last.resolve().name})"
                if folder == run.last else f"the final checkpoint of the run {path} ({folder.relative_to(path)})")
    elif (path / "config.json").is_file():
        what, run = f"the checkpoint {path}", _run_of(path)
    else:
        raise UserError(f"{path}: neither a model folder (config.json) nor a training run (run.json, checkpoints/); "
                        "pass one")
    words = [checkpoint for _, checkpoint in run.words_checkpoints()] if run is not None else []
    protected = [folder, *words] + ([run.folder] if run is not None else [])
    return folder, what, words, protected


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
    if not output.exists() or (output.is_dir() and all(entry.name == LOCK_FILE for entry in output.iterdir())):
        return  # nothing there yet (but the lock a locked export holds)
    if not overwrite:
        marker = output / EXPORT_MARKER
        if not output.is_dir() or marker.is_symlink() or not marker.is_file():  # --overwrite would refuse it too
            raise UserError(f"{output}: already exists and is not an earlier antlm-bench export (no {EXPORT_MARKER}), "
                            "which is all --overwrite replaces: remove it yourself or choose another folder")
        raise UserError(f"{output}: already exists (an earlier export); pass --overwrite to replace it, or choose "
                        "another folder")
    _prove_earlier_export(output)


def _prove_earlier_export(output: Path) -> None:
    """--overwrite deletes ``output`` only when it proves to be this command's earlier output: not a run folder, a
    complete ``antlm_export.json`` of this version, every revision's weights as recorded, nothing else beside
    them that an export does not write. Anything short of that is refused in one line, and nothing is deleted."""
    fix = ("--overwrite replaces only an earlier antlm-bench export, whole and unchanged: remove the folder "
           "yourself or choose another")
    if not output.is_dir():
        raise UserError(f"{output}: not a folder, so not an earlier antlm-bench export; {fix}")
    found = [name for name in RUN_ITEMS if os.path.lexists(output / name)]
    if found:
        raise UserError(f"{output}: a training run folder (it holds {', '.join(found)}), not an earlier antlm-bench "
                        f"export; {fix}")
    marker = output / EXPORT_MARKER
    if marker.is_symlink() or not marker.is_file():
        raise UserError(f"{output}: not an earlier antlm-bench export (no {EXPORT_MARKER}); {fix}")
    record = read_export_record(output, fix)
    branches = {r.name for r in record.revisions if r.name != MAIN}
    for path in output.iterdir():
        if path.is_symlink() or (path.is_dir() and path.name not in branches):
            kind = "a symbolic link" if path.is_symlink() else "a folder"
            raise UserError(f"{path}: {kind} that the export's {EXPORT_MARKER} does not name; not an earlier "
                            f"antlm-bench export as it wrote it: {fix}")
    for revision in record.revisions:
        verify_revision(output, record, revision.name, fix)


def _refuse_foreign_code(source: Path) -> None:
    """An ``auto_map`` we would not write ourselves: transformers would run the code it names."""
    from antlm_bench.models.backend import backend_of

    config = read_json(source / "config.json", "corrupt config", "re-save the checkpoint", follow_links=True)
    chosen = backend_of(config) if isinstance(config, dict) else None
    ours = chosen is not None and chosen.remote_code(config) is not None
    if isinstance(config, dict) and "auto_map" in config and not ours:
        raise UserError(f"{source / 'config.json'}: auto_map names code antlm-bench did not generate "
                        f"({_code_files(config['auto_map'])}); export passes on only its own modeling code: "
                        "remove auto_map if the model is a transformers class")
    tokenizer_config = source / "tokenizer_config.json"
    if tokenizer_config.is_file():
        settings = read_json(tokenizer_config, "corrupt tokenizer config", "re-save the checkpoint",
                             follow_links=True)
        if isinstance(settings, dict) and "auto_map" in settings:
            raise UserError(f"{tokenizer_config}: auto_map names tokenizer code "
                            f"({_code_files(settings['auto_map'])}); export passes on no tokenizer code: remove it")


def _code_files(auto_map: Any) -> str:
    names = auto_map.values() if isinstance(auto_map, dict) else [auto_map]
    flat = [str(n) for name in names for n in (name if isinstance(name, list) else [name]) if n]
    return ", ".join(sorted({name.rsplit(".", 1)[0] + ".py" for name in flat})) or repr(auto_map)


def _write_model(source: Path, destination: Path) -> str:
    """Load ``source`` as ``eval`` does and write it anew: weights, config, tokenizer, our code, the record; returns
    the weights digest of the files written (``runs.identity.weights_digest``: every tensor's name, dtype, shape and
    bytes, in name order)."""
    from antlm_bench.data.tokenizer import load_tokenizer, save_tokenizer
    from antlm_bench.models import load_config, load_model
    from antlm_bench.models.remote_code import write_model_code

    _refuse_foreign_code(source)
    if not (source / "tokenizer.json").is_file() and not (source / "tokenizer_config.json").is_file():
        raise UserError(f"{source}: no tokenizer files; the BabyLM pipeline loads the tokenizer from the model folder")
    config = load_config(source)  # one line naming config.json if it is broken
    import torch

    # the dtype the config names: `dtype` since transformers 4.56 (`torch_dtype`, deprecated, only before)
    dtype = vars(config).get("dtype", vars(config).get("torch_dtype"))
    model = load_model(source, dtype=dtype if isinstance(dtype, torch.dtype) else torch.float32)
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise UserError(f"{source}: weight {name} holds NaN or infinite values; the checkpoint is damaged "
                            "(export an earlier one)")
    tokenizer = load_tokenizer(source)
    destination.mkdir(parents=True)
    model.save_pretrained(str(destination))
    save_tokenizer(tokenizer, destination)
    write_model_code(destination, model.config)  # generated now, replacing any auto_map the loaded config carried
    digest = weights_digest(destination)  # the network this folder holds (runs.identity), from the files written
    if (source / STATE_FILE).is_file():
        record = read_json(source / STATE_FILE, "corrupt checkpoint record", "re-save the checkpoint",
                           follow_links=True)
        if isinstance(record, dict) and record.get("weights_digest") not in (None, digest):
            # saved anew, the weights read otherwise (another dtype): the record names what this folder holds
            record["source_weights_digest"], record["weights_digest"] = record["weights_digest"], digest
        (destination / STATE_FILE).write_text(json.dumps(record, indent=2, default=_finite) + "\n", encoding="utf-8")
    return digest


@dataclass(frozen=True)
class Revision:
    """One revision of an export: ``main`` (the final model) or a ``chck_<N>`` branch."""

    name: str
    source: Path
    weights_sha256: str
    step: int | None  # from the checkpoint's record, where it has one
    words: int | None  # from the branch's name

    def describe(self) -> str:
        return f"{self.name} ({self.source})"


def verify_revisions(revisions: list[Revision]) -> None:
    """Refuse an export whose revisions cannot be what they claim: two with identical weights (a public suite once
    served final-era weights under early branches), a branch identical to the final model, or branches whose
    training steps do not grow with their words counts."""
    seen: dict[str, Revision] = {}
    for revision in revisions:
        twin = seen.get(revision.weights_sha256)
        if twin is not None:
            what = "the final model" if twin.name == "main" else "revision"
            raise UserError(f"export: {revision.describe()} has the same weights as {what} {twin.describe()}; a "
                            "words-seen checkpoint must be the model at that point of training: check the run's "
                            "checkpoints")
        seen[revision.weights_sha256] = revision
    ordered = [b for b in revisions[1:] if b.step is not None]
    for earlier, later in zip(ordered, ordered[1:]):
        if later.step <= earlier.step:  # type: ignore[operator]
            raise UserError(f"export: {later.describe()} was saved at step {later.step}, not after "
                            f"{earlier.describe()} at step {earlier.step}, though it names more words; the run's "
                            "words checkpoints are out of order: check their antlm_state.json records")


def _finite(value: Any) -> Any:
    return value if not isinstance(value, float) or math.isfinite(value) else None


def export_babylm(checkpoint: str | Path, output: str | Path, overwrite: bool = False) -> Export:
    """Write ``checkpoint`` (a model folder or a training run) to ``output`` in the BabyLM 2025 layout; the
    folder appears whole or not at all (staged next to it, then renamed)."""
    source, what, words, protected = export_sources(Path(checkpoint))
    output = Path(output)
    _check_output(output, protected, overwrite)
    # OUT is made (empty) and locked like a train or eval folder: a second export (or a train) into it is refused
    # at once, naming this one's pid, instead of both writing and one export being lost
    created = missing_folders(output)
    output.mkdir(parents=True, exist_ok=True)
    ok = False
    try:
        with folder_lock(output, "export"):
            _check_output(output, protected, overwrite)  # again, holding the lock: what another export left
            result = _export_locked(source, what, words, output)
            ok = True
            return result
    finally:
        if not ok:
            remove_empty_folders(created)


def _export_locked(source: Path, what: str, words: list[Path], output: Path) -> Export:
    """The export itself, OUT's lock held: staged beside OUT, verified, then swapped in by renames."""
    # an export killed before its rename left its staging folder: the next export into OUT removes it, and says so
    tidied = removed_note(remove_stale(output.parent, f".{glob.escape(output.name)}.tmp-*"))
    main_record = read_record(source)  # every record read (and a damaged one refused) before anything is made
    later = [f for f in words if main_record is not None and (r := read_record(f)) is not None
             and r.step > main_record.step]
    words = [f for f in words if f not in later]  # a checkpoint's export holds the branches saved before it
    notes = [f"{', '.join(f.name for f in later)}: saved after {source.name} (step {main_record.step}); left out"
             ] if later and main_record is not None else []
    notes += [tidied] if tidied else []
    notes += [f"{folder.name}: not a whole number of millions of words; exported under its own name, which the "
              "BabyLM pipeline does not read (it takes chck_<N>M branches)"
              for folder in words if not folder.name.endswith("M")]
    staging = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}.tmp-{temporary_tag()}-"))
    with library_bars_off():  # a bar per load and save: the refusal or the summary is the output
        try:
            built = staging / "model"
            revisions = [_revision(MAIN, source, _write_model(source, built))]
            for folder in words:
                revisions.append(_revision(folder.name, folder, _write_model(folder, built / folder.name)))
            verify_revisions(revisions)
            branches = {folder.name for folder in words}
            manifest = ExportRecord(
                schema_version=EXPORT_SCHEMA_VERSION, format="babylm", source=str(source),
                branches=[folder.name for folder in words], antlm_bench=antlm_bench.__version__,
                revisions=[ExportRevision(name=r.name, source=str(r.source), weights_sha256=r.weights_sha256,
                                          files=revision_files(built if r.name == MAIN else built / r.name,
                                                               branches if r.name == MAIN else set()),
                                          step=r.step, words=r.words) for r in revisions])
            (built / EXPORT_MARKER).write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
            _usual_modes(built)
            fault_point("export.staged")
            # OUT is the empty folder this export locked, or an earlier export (_check_output): swap, then remove it
            aside = staging / "replaced"
            os.rename(output, aside)
            try:
                os.rename(built, output)
            except BaseException:
                os.rename(aside, output)
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return Export(output=output, source=source, what=what, branches=[folder.name for folder in words], notes=notes)


def _usual_modes(folder: Path) -> None:
    """Every file of the export readable as the user's umask makes a new file (0644 under 022): a writer that goes
    through a private temporary file (the weights) leaves 0600, which a shared model folder cannot be read by."""
    mask = os.umask(0)
    os.umask(mask)
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(0o666 & ~mask)


def _revision(name: str, source: Path, weights_sha256: str) -> Revision:
    record = read_record(source)
    return Revision(name, source, weights_sha256, record.step if record is not None else None,
                    words_of_checkpoint(name))


__all__ = ["EXPORT_MARKER", "FORMATS", "Export", "export_babylm", "export_sources"]
