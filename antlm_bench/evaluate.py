"""The in-process evaluation entry point: ``antlm-bench eval``, the trainer's ``--eval-every`` and ``run`` call it.

    out = evaluate("runs/x/phase-2", "blimp,ewok", output_dir="results/x")   # keyword fields -> an EvalConfig
    out = evaluate(model, EvalConfig(tasks="blimp", limit=2), tokenizer=tokenizer)
    out.scores      # Arrow table, SCORE_SCHEMA: one row per task/subtask/metric
    out.items       # Arrow table, ITEM_SCHEMA (log_samples=True), else None

What to evaluate is one validated ``EvalConfig`` (a bad field is one line naming it); the model (a folder or an
object in memory) and its tokenizer are arguments of their own. ``evaluate`` resolves the task names, loads the
model once (if any task scores minimal pairs), picks the scoring method (``auto``: the checkpoint's last phase, or
clm / pll for a plain causal / masked LM), runs every task's adapter, and builds the tables. With ``output_dir`` it holds that folder's lock and commits the scores, the items
(with ``log_samples``) and the record (configuration, versions, data hashes, timings) as ONE event of the folder's
results store (``antlm_bench.results.store``: a kill leaves all of it or none); ``eval.json`` is a copy of the latest
evaluation's record, naming its event.

The ``data_hash`` column is the run's training-data hash (from ``run_info`` or the checkpoint's record; empty for
a plain Hugging Face folder). The sha256 of the evaluation files each task read is kept in ``eval.json`` under
``data`` (an adapter exposes it as ``data_hash`` / ``data_files``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, InstanceOf, ValidationError, model_validator

from antlm_bench import __version__
from antlm_bench.adapters.base import EvalContext
from antlm_bench.adapters.glue.options import GlueOptions
from antlm_bench.clock import utc_now
from antlm_bench.config import DataDir, Threads
from antlm_bench.conventions import DEFAULT_CONVENTION, resolve_convention
from antlm_bench.data import atomic_write_bytes, resolve_data_dir
from antlm_bench.errors import UserError, validation_line
from antlm_bench.models.threads import choose_threads
from antlm_bench.progress import ELAPSED, REMAINING, Bar, Rate, progress_bar
from antlm_bench.results.store import commit_results, output_folder
from antlm_bench.results.tables import SCORE_SCHEMA, CheckpointInfo, RunInfo, item_table, score_table
from antlm_bench.runs.export_record import EXPORT_FILE, export_of, verify_export
from antlm_bench.runs.identity import RunIdentity, weight_files, weights_digest
from antlm_bench.runs.layout import RunLayout, run_folder_of
from antlm_bench.runs.record import STATE_FILE, CheckpointRecord, read_record, scoring_method
from antlm_bench.scoring import METHODS, ScoringModel, load_scoring_model, resolve_device_dtype, wrap_model
from antlm_bench.tasks import resolve_tasks

DEFAULT_BATCH_TOKENS = 4096


class EvalConfig(BaseModel):
    """What an evaluation takes besides the model and its tokenizer (validated here, at the edge)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=())

    tasks: str | list[str]  # names or groups, "blimp,ewok" or a list; "glue:rte,mrpc" for some members
    scoring: str = "auto"  # auto | clm | pll | pll-word-l2r | mntp (auto: the checkpoint's last phase's method)
    output_dir: Path | None = None  # commit scores (+ items) and eval.json here, holding the folder's lock
    limit: int | None = None  # the first N items of each subtask
    log_samples: bool = False  # also the item table
    batch_tokens: int = DEFAULT_BATCH_TOKENS  # token budget per forward pass
    device: str = "cpu"
    dtype: str = "float32"
    data_dir: DataDir  # antlm_bench.config's, as run's and train's
    run_info: InstanceOf[RunInfo] | None = None  # the rows' run columns (default: from the checkpoint's record)
    checkpoint_info: InstanceOf[CheckpointInfo] | None = None  # the rows' checkpoint columns (likewise)
    convention: str = DEFAULT_CONVENTION  # antlm_bench.conventions: babylm-2025 or babylm-2024 (leading space)
    options: GlueOptions | None = None  # GLUE's settings (a dict of its fields is validated into them)
    progress: Any = True  # True: a progress bar on stderr; a rich Progress; False
    model_path: Path | None = None  # the checkpoint folder of an in-memory model (its record; GLUE reads it)
    seeds: list[int] | None = None  # GLUE fine-tuning seeds (default [42])
    work_dir: Path | None = None  # scratch space
    threads: Threads  # CPU threads for torch (see choose_threads), as run's and train's
    fast: bool = False  # the official BabyLM 2025 fast subsets
    # an export's folder (antlm_export.json) is scored only after its weights are verified against the record;
    # True skips that, and the notes say so
    skip_export_check: bool = False

    @model_validator(mode="after")
    def _checked(self) -> EvalConfig:
        if self.scoring != "auto" and self.scoring not in METHODS:
            raise ValueError(f"--scoring {self.scoring}: unknown; use auto, {', '.join(METHODS)}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit {self.limit}: must be at least 1")
        if self.batch_tokens < 1:
            raise ValueError(f"--batch-tokens {self.batch_tokens}: must be a positive number of tokens")
        return self


def eval_config(config: EvalConfig | str | list[str] | None = None, **fields: Any) -> EvalConfig:
    """An ``EvalConfig`` from a config, the task names (``evaluate(model, "blimp", limit=2)``) and/or keyword
    fields (which override the config's); a bad or unknown field is one line naming it."""
    if isinstance(config, (str, list)):  # the task names; tasks= as well is Python's "multiple values" mistake
        if "tasks" in fields:
            raise TypeError("evaluate() got multiple values for argument 'tasks'")
        config, fields = None, {"tasks": config, **fields}
    try:
        if config is None:
            return EvalConfig(**fields)
        return EvalConfig.model_validate({**dict(config), **fields}) if fields else config
    except ValidationError as err:
        first = err.errors()[0]
        name = ".".join(str(part) for part in first["loc"]) or "config"
        if first["type"] == "value_error":  # our validators' messages name the option already
            raise UserError(str(first["ctx"]["error"])) from None
        fields_of = GlueOptions if first["loc"][:1] == ("options",) else EvalConfig
        problem = {"extra_forbidden": f"unknown field {name}; the fields are {', '.join(fields_of.model_fields)}",
                   "missing": f"field {name} is required"}.get(first["type"])
        problem = problem or validation_line(err)
        raise UserError(f"evaluate(): {problem}") from None


@dataclass
class EvalOutput:
    scores: pa.Table
    items: pa.Table | None
    run: dict[str, Any]  # what eval.json holds
    method: str  # the scoring method minimal pairs were scored with ("auto" if no task scored any)
    notes: list[str] = field(default_factory=list)
    output_dir: Path | None = None


def _versions() -> dict[str, str]:
    import numpy
    import tokenizers
    import torch
    import transformers

    return {
        "antlm_bench": __version__, "python": platform.python_version(), "torch": torch.__version__,
        "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
        "numpy": numpy.__version__, "pyarrow": pa.__version__, "platform": platform.platform(),
    }


def _model_parameters(module: Any, path: Path | None) -> int | None:
    """The parameter count of a loaded module, else estimated from a folder's weight files (float32 bytes / 4)."""
    if module is not None and hasattr(module, "parameters"):
        return sum(p.numel() for p in module.parameters())
    if path is not None and path.is_dir():
        size = sum(f.stat().st_size for f in path.glob("*.safetensors")) or sum(
            f.stat().st_size for f in path.glob("pytorch_model*.bin"))
        return size // 4 if size else None
    return None


def _export_check(path: Path, skip: bool) -> list[str]:
    """An export's revision is verified against its antlm_export.json (a mismatch refused in one line); skipped on
    request, which the notes say."""
    if export_of(path) is None:
        return []
    if skip:
        return [f"--skip-export-check: {path}'s weights were NOT verified against its {EXPORT_FILE}"]
    return [verify_export(path) or ""]


def scored_weights_digest(record: CheckpointRecord | None, model_path: Path | None,
                          check_record: bool = True) -> str | None:
    """The network a folder's rows score (``runs.identity.weights_digest``): computed from its weights files, and
    refused in one line when the checkpoint's record says other weights were written there (unless not
    ``check_record``: an export scored with --skip-export-check); the recorded digest where no file can be read
    (an in-memory model), None where neither is known."""
    recorded = record.weights_digest if record is not None else None
    if model_path is None or not model_path.is_dir() or not weight_files(model_path):
        return recorded
    found = weights_digest(model_path)
    if check_record and recorded is not None and recorded != found:
        raise UserError(f"{weight_files(model_path)[0]}: not the weights this checkpoint was saved with (weights "
                        f"digest {found[:12]}, its {STATE_FILE} records {recorded[:12]}); the files were changed "
                        "after training: score an unaltered checkpoint")
    return found


def run_info_from_record(record: CheckpointRecord | None, model_path: Path | None,
                         check_record: bool = True) -> RunInfo:
    """The rows' run columns: from the checkpoint's record, or the folder's name for a plain Hugging Face folder;
    the weights digest of what is scored either way (``scored_weights_digest``)."""
    digest = scored_weights_digest(record, model_path, check_record)
    if record is None:
        return RunInfo(run_id=model_path.name if model_path is not None else "in-memory", weights_digest=digest)
    return RunInfo(run_id=RunIdentity.of_record(record).eval_run_id, recipe=record.recipe,
                   architecture=record.architecture, preset=record.preset,
                   schedule=record.schedule, seed=record.seed, data_hash=record.data_hash,
                   weights_digest=digest, config_fingerprint=record.config_fingerprint, label=record.label)


def checkpoint_info_from_record(record: CheckpointRecord | None, checkpoint: str | Path | None) -> CheckpointInfo:
    """The rows' checkpoint columns: ``checkpoint`` names it (a path, or its name inside its run folder)."""
    where = str(checkpoint) if checkpoint is not None else ""
    if record is None:
        return CheckpointInfo(checkpoint=where)
    return CheckpointInfo(checkpoint=where, phase_index=record.phase_index, epoch=record.epoch,
                          phase_objective=record.phase_objective, tokens_seen=record.tokens_seen,
                          words_seen=record.words_seen)


def _model_source(model: Any, tokenizer: Any, config: EvalConfig) -> tuple[Path | None, Any, Any]:
    """(path, loaded model or None, tokenizer) from what the caller passed (``model_path``: an in-memory model's
    folder); a folder to load from must exist, and bf16 on CPU etc. is refused before anything slow happens."""
    if isinstance(model, (str, Path)):
        path, loaded = Path(model).expanduser(), None
    elif isinstance(model, ScoringModel):
        path, loaded, tokenizer = None, model, model.tokenizer
    elif isinstance(model, tuple) and len(model) == 2:
        path, (loaded, tokenizer) = None, model
    elif tokenizer is None:
        raise UserError("evaluate(): an in-memory model needs its tokenizer (tokenizer=...)")
    else:
        path, loaded = None, model
    if config.model_path is not None:
        path = config.model_path.expanduser()
    if loaded is None:
        resolve_device_dtype(config.device, config.dtype)
        if not path.is_dir():
            raise UserError(f"--model {path}: not a folder; give a Hugging Face model folder (config.json + weights)")
    return path, loaded, tokenizer


def _progress_bar(progress: Any) -> Any:
    """``progress`` True: the evaluation's bar (a line per task off a terminal); a bar the caller made; or None."""
    if progress is True:
        return progress_bar("{task.description}", Bar(), "{task.completed:,.0f}/{task.total:,.0f}", Rate("pairs/s"),
                            ELAPSED, "ETA", REMAINING)
    return progress or None


def _launch_rank() -> int:
    """This process's rank under torchrun (``RANK``), 0 otherwise."""
    return int(os.environ.get("RANK", "0") or 0)


def _join_launched_group(device: str) -> str:
    """Under ``torchrun --nproc-per-node K`` (WORLD_SIZE > 1): join the process group (gloo on CPU, nccl on
    CUDA, one GPU per local rank), so that scoring splits its batches over the ranks; returns the device."""
    import torch
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        return device
    cuda = device.startswith("cuda")
    if cuda and device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0') or 0)}"
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return device


def evaluate(model: Any, config: EvalConfig | str | list[str] | None = None, *, tokenizer: Any = None,
             **fields: Any) -> EvalOutput:
    """Evaluate a model on tasks (see the module docstring). ``model``: a checkpoint folder, a ScoringModel,
    (model, tokenizer), or a model with ``tokenizer=``. ``config``: an ``EvalConfig`` or the task names; keyword
    ``fields`` are EvalConfig's (they override ``config``'s). With ``output_dir``, other evaluations may append
    into it at the same time while ``train``/``run`` writing it are refused (a shared lock), and a folder this call
    made is removed again if it fails leaving it empty."""
    config = eval_config(config, **fields)
    if config.output_dir is None or _launch_rank() != 0:
        return _evaluate(model, tokenizer, config)
    check_output_dir(config.output_dir.expanduser())
    with output_folder(config.output_dir, "eval", shared=True):
        return _evaluate(model, tokenizer, config)


def check_output_dir(folder: Path) -> None:
    """Refuse, before the folder is made, locked, tidied or written, an output folder that holds what eval did not
    make at the names it writes (a results store that is a link to another folder, an eval.json that is a folder
    or a FIFO), or a run whose run.json does not read as one (eval adds to that run's rows)."""
    if not folder.is_dir():
        return
    layout = RunLayout(folder)
    layout.check_entries("remove it, or give eval another --output")
    layout.read_run_file()


def _select_tasks(config: EvalConfig) -> tuple[list[Any], list[Any], list[str]]:
    """(task requests, their adapters, notes); under ``fast`` only those with a fast subset (a note for the rest)."""
    requests = resolve_tasks(config.tasks)
    adapters = [request.adapter() for request in requests]
    if not config.fast:
        return requests, adapters, []
    kept = [(r, a) for r, a in zip(requests, adapters) if a.has_fast_subset]
    notes = [f"--fast: {request.name} has no fast subset in the BabyLM 2025 pipeline; left out"
             for request in requests if all(request is not r for r, _ in kept)]
    if not kept:
        raise UserError(f"--fast: none of {', '.join(r.name for r in requests)} has a fast subset; "
                        "drop --fast or name a zero-shot task")
    for _, adapter in kept:
        adapter.eval_set = "fast"
    return [r for r, _ in kept], [a for _, a in kept], notes


def _scoring_model(adapters: list[Any], loaded: Any, path: Path | None, tokenizer: Any, device: str,
                   dtype: str) -> ScoringModel | None:
    """The model loaded once for every task that scores minimal pairs (None when no task does)."""
    if not any(adapter.needs_scoring_model for adapter in adapters):
        return None
    if loaded is None:
        return load_scoring_model(path, device, dtype)
    return loaded if isinstance(loaded, ScoringModel) else wrap_model(loaded, tokenizer)


def _scoring_method(scoring: str, sm: ScoringModel | None, record: CheckpointRecord | None) -> tuple[str, str]:
    """(method, why): the one place ``--scoring auto`` is decided for an evaluation (the checkpoint's last phase's
    method, ``runs.record.scoring_method``); only minimal-pair scoring has a method to choose (GLUE fine-tunes)."""
    if scoring != "auto" or sm is None:
        return scoring, "chosen with --scoring"
    return scoring_method(record, sm.is_masked_lm)


def _evaluate(model: Any, tokenizer: Any, config: EvalConfig) -> EvalOutput:
    import torch

    convention = resolve_convention(config.convention)
    device, dtype, progress, output_dir = config.device, config.dtype, config.progress, config.output_dir
    path, loaded, tokenizer = _model_source(model, tokenizer, config)
    requests, adapters, notes = _select_tasks(config)
    device = _join_launched_group(device)
    if _launch_rank() != 0:  # one progress bar and one set of tables: rank 0's
        progress, output_dir = False, None
    folder = resolve_data_dir(config.data_dir)
    for adapter in adapters:  # missing data fails here, before a model is loaded
        adapter.check_data(folder)
    if path is not None and path.is_dir() and loaded is None:  # before anything is loaded or scored
        notes.extend(_export_check(path, config.skip_export_check))
    record = read_record(path) if path is not None and path.is_dir() else None
    sm = _scoring_model(adapters, loaded, path, tokenizer, device, dtype)
    if sm is not None:
        notes.extend(sm.notes)
        tokenizer = sm.tokenizer
    method, why = _scoring_method(config.scoring, sm, record)
    if config.scoring == "auto" and sm is not None:
        notes.append(f"--scoring auto: {why}")
    if sm is not None and method in METHODS:
        sm.check_mode("causal" if method == "clm" else "bidirectional", method)  # fail before reading any data
    if loaded is not None and sm is not None:  # record where the given model really lives
        parameter = next(sm.module.parameters())
        device, dtype = str(parameter.device), str(parameter.dtype).removeprefix("torch.")
    module = sm.module if sm is not None else loaded
    threads_before = torch.get_num_threads()
    n_threads, threads_why = choose_threads(config.threads, _model_parameters(module, path), device)
    torch.set_num_threads(n_threads)  # restored when the evaluation ends
    unchecked = config.skip_export_check and path is not None and export_of(path) is not None
    run = config.run_info or run_info_from_record(record, path, check_record=not unchecked)
    if config.run_info is None and path is not None and record is not None:
        # a checkpoint of a run folder: its rows belong to that run, under the id `run` gives them (the folder's
        # name), so that `eval --output RUN` adds to the run's seed instead of making a second one
        owner = run_folder_of(path)
        if owner is not None:
            RunLayout(owner).read_run_file()  # the run the rows are filed under is one (a damaged record refused)
            run = dataclasses.replace(run, run_id=owner.name)
    checkpoint = config.checkpoint_info or checkpoint_info_from_record(record, path)
    ctx = EvalContext(
        model_path=path, data_dir=folder, model=module, tokenizer=tokenizer,
        scoring=method, limit=config.limit, log_samples=config.log_samples, batch_tokens=config.batch_tokens,
        device=device, dtype=dtype, convention=convention, seeds=list(config.seeds or [42]),
        options=config.options, work_dir=config.work_dir, progress=_progress_bar(progress),
        eval_set="fast" if config.fast else "full",
    )
    started = utc_now()
    try:
        scores, items, data, timing = _run_tasks(ctx, requests, adapters, run, checkpoint, notes,
                                                 progress is True)
    finally:
        torch.set_num_threads(threads_before)
    record = {
        "run": dataclasses.asdict(run), "checkpoint": dataclasses.asdict(checkpoint),
        "config": {
            "model": str(path) if path is not None else type(loaded).__name__,
            "tasks": [r.name for r in requests], "task_members": {r.name: r.members for r in requests if r.members},
            "scoring_requested": config.scoring, "scoring": method, "scoring_reason": why, "limit": config.limit,
            "eval_set": ctx.eval_set, "convention": convention.name, "log_samples": config.log_samples,
            "batch_tokens": config.batch_tokens, "device": device, "dtype": dtype, "leading_space": convention.leading_space,
            "reduction": "sum", "seeds": ctx.seeds,
            "options": ctx.options.given() if ctx.options is not None else {}, "data_dir": str(folder),
            "torch_threads": n_threads, "torch_threads_reason": threads_why,
        },
        "versions": _versions(), "data": data, "state": record.to_json() if record is not None else None, "timing": timing, "notes": notes,
        "started_at": started.isoformat(), "finished_at": utc_now().isoformat(),
    }
    out_dir = output_dir.expanduser() if output_dir is not None else None
    if out_dir is not None:
        # scores, items and this record are committed together, as one event of the folder's store; rows of
        # earlier evaluations stay unless these re-score them (the latest event wins, key by key)
        record["event"] = commit_results(out_dir, scores, items, {"kind": "eval", "record": record})
        payload = json.dumps(record, indent=2, sort_keys=False, default=str).encode()
        atomic_write_bytes(RunLayout(out_dir).eval_file, payload + b"\n")  # the latest evaluation's record
    return EvalOutput(scores, items, record, method, notes, out_dir)


def _run_tasks(ctx: EvalContext, requests: list[Any], adapters: list[Any], run: RunInfo, checkpoint: CheckpointInfo,
               notes: list[str], own_bar: bool) -> tuple[pa.Table, pa.Table | None, dict, dict]:
    """Every task's adapter in turn: (scores, items or None, data hashes per task, timing per task)."""
    tables, item_records, data, timing = [], [], {}, {}
    bar = ctx.progress
    if bar is not None and hasattr(bar, "start") and own_bar:
        bar.start()
    try:
        for adapter, request in zip(adapters, requests):
            clock = time.perf_counter()
            result = adapter.run(ctx)
            seconds = time.perf_counter() - clock
            data[request.name] = {"sha256": adapter.data_hash, "files": list(adapter.data_files)}
            tables.append(score_table(run, checkpoint, result.rows, ctx.eval_set, ctx.convention.name))
            n_items = max((row.n for row in result.rows if row.subtask == ""), default=0)
            timing[request.name] = {"seconds": round(seconds, 3),
                                    "items_per_s": round(n_items / seconds, 1) if seconds > 0 else None}
            notes.extend(result.notes)
            item_records.extend({"run_id": run.run_id, "checkpoint": checkpoint.checkpoint,
                                 "phase_index": checkpoint.phase_index, "scoring": ctx.scoring, **record}
                                for record in result.items)
    finally:
        if bar is not None and hasattr(bar, "stop") and own_bar:
            bar.stop()
    scores = pa.concat_tables(tables) if tables else SCORE_SCHEMA.empty_table()
    return scores, item_table(item_records) if ctx.log_samples else None, data, timing
