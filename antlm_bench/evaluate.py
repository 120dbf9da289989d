"""The in-process evaluation entry point: ``antlm-bench eval``, the trainer's ``--eval-every`` and ``run`` call it.

    out = evaluate("runs/x/phase-2", "blimp,ewok", output_dir="results/x")
    out.scores      # Arrow table, SCORE_SCHEMA: one row per task/subtask/metric
    out.items       # Arrow table, ITEM_SCHEMA (log_samples=True), else None

``evaluate`` resolves the task names, loads the model once (if any task scores minimal pairs), picks the scoring
method (``auto``: the checkpoint's last phase, or clm / pll for a plain causal / masked LM), runs every task's
adapter, and builds the tables. With ``output_dir`` it holds that folder's lock and commits the scores, the items
(with ``log_samples``) and the record (configuration, versions, data hashes, timings) as ONE event of the folder's
results store (``antlm_bench.store``: a kill leaves all of it or none); ``run.json`` is a copy of the latest
evaluation's record, naming its event.

The ``data_hash`` column is the run's training-data hash (from ``run_info`` or the checkpoint's record; empty for
a plain Hugging Face folder). The sha256 of the evaluation files each task read is kept in ``run.json`` under
``data`` (an adapter exposes it as ``data_hash`` / ``data_files``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import platform
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from antlm_bench import __version__
from antlm_bench.adapters.base import EvalContext
from antlm_bench.data import atomic_write_bytes, resolve_data_dir
from antlm_bench.errors import UserError
from antlm_bench.locking import output_folder
from antlm_bench.results.store import commit_results
from antlm_bench.results.tables import (
    SCORE_SCHEMA,
    CheckpointInfo,
    RunInfo,
    item_table,
    now_utc,
    score_table,
)
from antlm_bench.scoring import METHODS, ScoringModel, load_scoring_model, resolve_device_dtype, wrap_model
from antlm_bench.tasks import resolve_tasks
from antlm_bench.training.checkpoint_state import auto_scoring_method, read_state

RUN_FILE = "run.json"
DEFAULT_BATCH_TOKENS = 4096


@dataclass
class EvalOutput:
    scores: pa.Table
    items: pa.Table | None
    run: dict[str, Any]  # what run.json holds
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


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


SMALL_MODEL_PARAMETERS = 10_000_000  # below this, one CPU thread: more threads mostly wait for each other


def _model_parameters(module: Any, path: Path | None) -> int | None:
    """The parameter count of a loaded module, else estimated from a folder's weight files (float32 bytes / 4)."""
    if module is not None and hasattr(module, "parameters"):
        return sum(p.numel() for p in module.parameters())
    if path is not None and path.is_dir():
        size = sum(f.stat().st_size for f in path.glob("*.safetensors")) or sum(
            f.stat().st_size for f in path.glob("pytorch_model*.bin"))
        return size // 4 if size else None
    return None


def choose_threads(threads: int | None, n_parameters: int | None, device: str) -> tuple[int, str]:
    """(CPU threads for torch, why): ``--threads`` wins, then $OMP_NUM_THREADS, then the model's size (small
    models get 1: on a shared CPU a 2-thread PLL pass of a tiny model was 2.5x slower than 1 thread), else
    torch's default."""
    import torch

    if threads is not None:
        if threads < 1:
            raise UserError(f"--threads {threads}: must be at least 1")
        return threads, "--threads"
    if os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():
        return torch.get_num_threads(), "$OMP_NUM_THREADS"
    if not str(device).startswith("cpu"):
        return torch.get_num_threads(), f"torch default (model on {device})"
    if n_parameters is not None and n_parameters < SMALL_MODEL_PARAMETERS:
        return 1, f"model size ({n_parameters / 1e6:.2f}M parameters < {SMALL_MODEL_PARAMETERS / 1e6:g}M: 1 thread)"
    return torch.get_num_threads(), "torch default" + (
        f" ({n_parameters / 1e6:.1f}M parameters)" if n_parameters is not None else "")


def run_info_from_state(state: dict[str, Any] | None, model_path: Path | None) -> RunInfo:
    if state is None:
        return RunInfo(run_id=model_path.name if model_path is not None else "in-memory")
    parts = [str(state.get(k, "")) for k in ("recipe", "preset", "schedule")] + [f"seed{state.get('seed', '')}"]
    run_id = re.sub(r"[^A-Za-z0-9_.+:()-]+", "_", "-".join(p for p in parts if p))
    return RunInfo(
        run_id=run_id, recipe=str(state.get("recipe", "")), architecture=str(state.get("architecture", "")),
        preset=str(state.get("preset", "")), schedule=str(state.get("schedule", "")), seed=state.get("seed"),
        data_hash=str(state.get("data_hash", "")),
    )


def checkpoint_info_from_state(state: dict[str, Any] | None, model_path: Path | None) -> CheckpointInfo:
    where = str(model_path) if model_path is not None else ""
    if state is None:
        return CheckpointInfo(checkpoint=where)
    return CheckpointInfo(
        checkpoint=where, phase_index=state.get("phase_index"), phase_objective=str(state.get("phase_objective", "")),
        epoch=state.get("epoch"), tokens_seen=state.get("tokens_seen"),
    )


def _split_model(model: Any, tokenizer: Any) -> tuple[Path | None, Any, Any]:
    """(path, loaded model or None, tokenizer) from what the caller passed."""
    if isinstance(model, (str, Path)):
        return Path(model).expanduser(), None, tokenizer
    if isinstance(model, ScoringModel):
        return None, model, model.tokenizer
    if isinstance(model, tuple) and len(model) == 2:
        return None, model[0], model[1]
    if tokenizer is None:
        raise UserError("evaluate(): an in-memory model needs its tokenizer (tokenizer=...)")
    return None, model, tokenizer


def _progress_bar(progress: Any) -> Any:
    if progress is True:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class PairsPerSecond(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                return Text("" if speed is None else f"{speed:,.0f} pairs/s")

        return Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
            PairsPerSecond(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=Console(stderr=True), transient=False,
        )
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


def _holding_output_folder(function: Callable[..., EvalOutput]) -> Callable[..., EvalOutput]:
    """With ``output_dir``, run ``function`` holding that folder's lock (a second ``eval --output`` into it is
    refused, naming this pid), tidy what killed writers left there first, and remove the folder again when this
    call made it and fails leaving it empty."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> EvalOutput:
        output_dir = signature.bind(*args, **kwargs).arguments.get("output_dir")
        if output_dir is None or _launch_rank() != 0:  # under torchrun only rank 0 writes (and locks)
            return function(*args, **kwargs)
        with output_folder(output_dir, "eval"):
            return function(*args, **kwargs)

    return wrapper


@_holding_output_folder
def evaluate(
    model: Any,
    tasks: str | list[str],
    scoring: str = "auto",
    output_dir: str | Path | None = None,
    limit: int | None = None,
    log_samples: bool = False,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    device: str = "cpu",
    dtype: str = "float32",
    data_dir: str | Path | None = None,
    run_info: RunInfo | None = None,
    checkpoint_info: CheckpointInfo | None = None,
    leading_space: bool = False,
    convention: str | None = None,
    options: dict[str, Any] | None = None,
    progress: Any = True,
    tokenizer: Any = None,
    model_path: str | Path | None = None,
    seeds: list[int] | None = None,
    work_dir: str | Path | None = None,
    threads: int | None = None,
    fast: bool = False,
) -> EvalOutput:
    """Evaluate a model on tasks. ``model``: a checkpoint folder, a ScoringModel, (model, tokenizer), or a model
    with ``tokenizer=``. ``model_path`` names the checkpoint folder of an in-memory model (its record and the
    fine-tuning tasks read it). ``progress``: True for a progress bar on stderr, a rich Progress, or False.
    ``fast``: the official BabyLM 2025 fast subsets (tasks without one, GLUE, are left out with a note); rows
    record ``eval_set`` = "fast" (else "full"), and no leaderboard or check mixes the two. ``convention``: the
    scoring convention (``antlm_bench.conventions``: babylm-2025, the default, or babylm-2024 = leading space;
    ``leading_space=True`` alone means babylm-2024), recorded in every row."""
    from antlm_bench.conventions import resolve_convention

    convention, leading_space = resolve_convention(convention, leading_space)
    if scoring != "auto" and scoring not in METHODS:
        raise UserError(f"--scoring {scoring}: unknown; use auto, {', '.join(METHODS)}")
    if limit is not None and limit < 1:
        raise UserError(f"--limit {limit}: must be at least 1")
    if batch_tokens < 1:
        raise UserError(f"--batch-tokens {batch_tokens}: must be a positive number of tokens")
    path, loaded, tokenizer = _split_model(model, tokenizer)
    if model_path is not None:
        path = Path(model_path).expanduser()
    if loaded is None:
        resolve_device_dtype(device, dtype)  # refuse bf16 on CPU etc. before anything slow happens
        if not path.is_dir():
            raise UserError(f"--model {path}: not a folder; give a Hugging Face model folder (config.json + weights)")
    requests = resolve_tasks(tasks)
    adapters = [request.adapter() for request in requests]
    device = _join_launched_group(device)
    if _launch_rank() != 0:  # one progress bar and one set of tables: rank 0's
        progress, output_dir = False, None
    eval_set = "fast" if fast else "full"
    fast_notes: list[str] = []
    if fast:
        kept = [(r, a) for r, a in zip(requests, adapters) if hasattr(a, "eval_set")]
        for request in requests:
            if all(request is not r for r, _ in kept):
                fast_notes.append(f"--fast: {request.name} has no fast subset in the BabyLM 2025 pipeline; left out")
        if not kept:
            raise UserError(f"--fast: none of {', '.join(r.name for r in requests)} has a fast subset; "
                            "drop --fast or name a zero-shot task")
        requests, adapters = [r for r, _ in kept], [a for _, a in kept]
        for adapter in adapters:
            adapter.eval_set = "fast"
    folder = resolve_data_dir(data_dir)
    for adapter in adapters:  # missing data fails here, before a model is loaded
        if hasattr(adapter, "check_data"):
            adapter.check_data(folder)
    state = read_state(path) if path is not None and path.is_dir() else None

    notes: list[str] = list(fast_notes)
    sm: ScoringModel | None = None
    if any(getattr(adapter, "needs_scoring_model", False) for adapter in adapters):
        if loaded is None:
            sm = load_scoring_model(path, device, dtype)
        else:
            sm = loaded if isinstance(loaded, ScoringModel) else wrap_model(loaded, tokenizer)
        notes.extend(sm.notes)
        tokenizer = sm.tokenizer

    method, why = scoring, "chosen with --scoring"
    if scoring == "auto":
        record = state
        if checkpoint_info is not None and checkpoint_info.phase_objective:
            record = {"phase_objective": checkpoint_info.phase_objective, "phase_index": checkpoint_info.phase_index}
        if sm is not None:  # only minimal-pair scoring has a method to choose; GLUE fine-tunes
            method, why = auto_scoring_method(record, sm.is_masked_lm)
            notes.append(f"--scoring auto: {why}")

    if sm is not None and method in METHODS:
        sm.check_mode("causal" if method == "clm" else "bidirectional", method)  # fail before reading any data
    if loaded is not None and sm is not None:  # record where the given model really lives
        parameter = next(sm.module.parameters())
        device, dtype = str(parameter.device), str(parameter.dtype).removeprefix("torch.")

    import torch

    threads_before = torch.get_num_threads()
    n_threads, threads_why = choose_threads(threads, _model_parameters(sm.module if sm is not None else loaded, path),
                                            device)
    torch.set_num_threads(n_threads)  # restored when the evaluation ends
    run = run_info or run_info_from_state(state, path)
    checkpoint = checkpoint_info or checkpoint_info_from_state(state, path)
    ctx = EvalContext(
        model_path=path, data_dir=folder, model=sm.module if sm is not None else loaded, tokenizer=tokenizer,
        scoring=method, limit=limit, log_samples=log_samples, batch_tokens=batch_tokens, device=device, dtype=dtype,
        leading_space=leading_space, seeds=list(seeds or [42]), options=dict(options or {}),
        work_dir=Path(work_dir) if work_dir is not None else None, progress=_progress_bar(progress),
        eval_set=eval_set,
    )

    tables, item_records, data, timing = [], [], {}, {}
    started = now_utc()
    bar = ctx.progress
    if bar is not None and hasattr(bar, "start") and progress is True:
        bar.start()
    try:
        for adapter, request in zip(adapters, requests):
            clock = time.perf_counter()
            result = adapter.run(ctx)
            seconds = time.perf_counter() - clock
            data[request.name] = {"sha256": getattr(adapter, "data_hash", ""),
                                  "files": list(getattr(adapter, "data_files", []))}
            tables.append(score_table(run, checkpoint, result.rows, eval_set, convention))
            n_items = max((row.n for row in result.rows if row.subtask == ""), default=0)
            timing[request.name] = {"seconds": round(seconds, 3),
                                    "items_per_s": round(n_items / seconds, 1) if seconds > 0 else None}
            notes.extend(result.notes)
            for record in result.items:
                item_records.append({
                    "run_id": run.run_id, "checkpoint": checkpoint.checkpoint, "phase_index": checkpoint.phase_index,
                    "scoring": method, **record,
                })
    finally:
        torch.set_num_threads(threads_before)
        if bar is not None and hasattr(bar, "stop") and progress is True:
            bar.stop()

    scores = pa.concat_tables(tables) if tables else SCORE_SCHEMA.empty_table()
    items = item_table(item_records) if log_samples else None
    run_record = {
        "run": dataclasses.asdict(run),
        "checkpoint": dataclasses.asdict(checkpoint),
        "config": {
            "model": str(path) if path is not None else type(loaded).__name__,
            "tasks": [r.name for r in requests], "task_members": {r.name: r.members for r in requests if r.members},
            "scoring_requested": scoring, "scoring": method, "scoring_reason": why, "limit": limit,
            "eval_set": eval_set, "convention": convention,
            "log_samples": log_samples, "batch_tokens": batch_tokens, "device": device, "dtype": dtype,
            "leading_space": leading_space, "reduction": "sum", "seeds": ctx.seeds, "options": ctx.options,
            "data_dir": str(folder), "torch_threads": n_threads, "torch_threads_reason": threads_why,
        },
        "versions": _versions(),
        "data": data,
        "state": state,
        "timing": timing,
        "notes": notes,
        "started_at": started.isoformat(),
        "finished_at": now_utc().isoformat(),
    }
    out_dir = Path(output_dir).expanduser() if output_dir is not None else None
    if out_dir is not None:
        # scores, items and this record are committed together, as one event of the folder's store; rows of
        # earlier evaluations stay unless these re-score them (the latest event wins, key by key)
        run_record["event"] = commit_results(out_dir, scores, items, {"kind": "eval", "record": run_record})
        payload = json.dumps(run_record, indent=2, sort_keys=False, default=str).encode()
        atomic_write_bytes(out_dir / RUN_FILE, payload + b"\n")  # the latest evaluation's record, for people
    return EvalOutput(scores, items, run_record, method, notes, out_dir)
