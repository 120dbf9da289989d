"""A run's final evaluations as records: what each one is keyed by, and how it is committed.

A task's final evaluation is named by a content hash of (the checkpoint's weights, the task spec, the evaluation
settings, the members): its marker ``evals/<task>-<key>.json`` says it was done, and its scores and items are one
event of the run folder's store, which records the same settings and the spec's digest, so that a run whose
checkpoints are gone can still be matched to a request (``pipeline.reuse.kept_final_evaluations``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from antlm_bench.adapters.glue.options import GlueOptions
from antlm_bench.config import EvaluationConfig, RunConfig, flag_of
from antlm_bench.data import atomic_write_bytes, hash_files
from antlm_bench.locking import fault_point
from antlm_bench.options import resolve_device
from antlm_bench.recipes import ResolvedPreset
from antlm_bench.results.store import commit_results
from antlm_bench.results.tables import append_index
from antlm_bench.runs.identity import RunIdentity
from antlm_bench.runs.layout import RunLayout
from antlm_bench.runs.record import CheckpointRecord
from antlm_bench.runs.schedule import parse_schedule

# GlueOptions' fields -> the run options (EvaluationConfig's fields) that set them; a rejected value names their flag
GLUE_FIELDS = {"epochs": "glue_epochs", "max_train_examples": "glue_max_train_examples", "probe": "probe",
               "protocol": "glue_protocol"}


def glue_options(config: RunConfig) -> GlueOptions:
    """GLUE's typed options of a run's flags (a bad one is one line naming its flag): ``run`` and each sweep cell
    refuse a bad one alike, before anything trains."""
    values = {name: getattr(config.evaluation, field) for name, field in GLUE_FIELDS.items()}
    values["probe"] = values["probe"] or None  # off: the spec's own choice, not an option given
    precision = config.machine.precision
    values["precision"] = precision if precision != "auto" else None  # GLUE fine-tunes by the rule training follows
    flags = {name: flag_of(EvaluationConfig.model_fields[field]) for name, field in GLUE_FIELDS.items()}
    return GlueOptions.of_flags(values, flags=flags)


def task_options(config: RunConfig, preset: ResolvedPreset) -> GlueOptions:
    """The run's task options over its preset's budget (``glue_budget``): what every evaluation of the run takes."""
    return glue_options(config).under(preset.spec.glue_budget, f"{preset.where}: glue_budget")


def _sha256_text(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def checkpoint_hash(folder: Path) -> str:
    """Content hash of a checkpoint's weights and record (cheap: weights are hashed once per evaluation)."""
    files = sorted(p for p in folder.iterdir() if p.suffix in {".safetensors", ".json"} and p.is_file())
    return hash_files(files)


def final_method(schedule: str, final_scoring: str) -> str:
    """The method a run's final minimal-pair evaluation uses: ``--final-scoring``'s, or under ``auto`` the last
    phase's (``runs.record``'s rule, as ``evaluate`` applies it to the checkpoint's record)."""
    from antlm_bench.runs.record import scoring_method_of_phase

    if final_scoring != "auto":
        return final_scoring
    return scoring_method_of_phase(parse_schedule(schedule).phases[-1])


def _final_scoring_arg(config: RunConfig, schedule: str, request: Any) -> str:
    """The final evaluation's ``--scoring`` for one task: ``auto`` where --final-scoring names the method auto
    would pick anyway, or the task scores no minimal pairs (GLUE fine-tunes), so that the evaluation, its marker and
    its rows are those of a run without the option."""
    final_scoring = config.evaluation.final_scoring
    if final_scoring == "auto" or not request.adapter().needs_scoring_model:
        return "auto"
    return "auto" if final_method(schedule, "auto") == final_scoring else final_scoring


def eval_settings(config: RunConfig, request: Any, options: GlueOptions, seed: int, schedule: str) -> dict[str, Any]:
    """What a final evaluation's marker hashes besides weights and task (the key ``glue`` holds the options of a
    task that takes them, under that name so that markers written before keep their hash)."""
    takes_options = request.adapter().takes_options
    return {"scoring": _final_scoring_arg(config, schedule, request), "limit": config.evaluation.limit,
            "batch_tokens": config.evaluation.batch_tokens, "glue": options.given() if takes_options else None,
            "seed": seed, "convention": config.evaluation.convention}


def _spec_text(request: Any) -> str:
    return request.spec.source.read_text(encoding="utf-8") if request.spec.source else request.name


def spec_digest(request: Any) -> str:
    """sha256 of the task spec a final evaluation ran under: its event records it, so that a run whose checkpoint
    is gone (its marker key cannot be recomputed without the weights) still tells an edited spec apart."""
    return hashlib.sha256(_spec_text(request).encode()).hexdigest()


def task_arg(request: Any) -> str:
    """The task as a final evaluation names it (``glue:rte,mrpc`` for a few members): evaluate's --tasks, and the
    ``task`` of its event and marker."""
    return request.name + (":" + ",".join(request.members) if request.members else "")


def eval_key(weights: str, request: Any, settings: dict[str, Any]) -> str:
    """The content hash a final evaluation's marker is named by: weights, task spec, settings, members."""
    return _sha256_text(weights, _spec_text(request), json.dumps(settings, sort_keys=True, default=str),
                        ",".join(request.members or []))


def eval_marker(layout: RunLayout, task: str, key: str) -> Path:
    return layout.evals_dir / f"{task}-{key[:16]}.json"


def evaluate_final(layout: RunLayout, final: Path, record: CheckpointRecord, request: Any, key: str,
                   settings: dict[str, Any], config: RunConfig, options: GlueOptions, identity: RunIdentity) -> None:
    """Score the final checkpoint on one task and commit it: its scores and items one event of the run folder's
    store, then its marker, then its line in the run's index. The marker comes after the commit, so a kill in
    between re-evaluates next time and the newer event replaces this one's rows (no duplicates)."""
    from antlm_bench.evaluate import EvalConfig, checkpoint_info_from_record, evaluate, run_info_from_record

    folder = layout.folder
    task = task_arg(request)
    out = evaluate(final, EvalConfig(
        tasks=task, scoring=settings["scoring"], limit=config.evaluation.limit, log_samples=True,
        batch_tokens=config.evaluation.batch_tokens,
        device="cuda" if resolve_device(config.machine.device).startswith("cuda") else "cpu",
        data_dir=config.data.data_dir,
        # the run's identity and the checkpoint's name as the trainer's per-phase rows give them, so the final rows
        # join the run and replace the last phase's quick look
        run_info=replace(run_info_from_record(record, final), run_id=identity.folder_name),
        checkpoint_info=checkpoint_info_from_record(record, final.relative_to(folder)),
        options=options, progress=not config.output.quiet, seeds=[identity.seed], work_dir=layout.work_dir,
        convention=config.evaluation.convention, threads=config.machine.threads,
    ))
    event = commit_results(folder, out.scores, out.items, {"kind": "final-eval", "task": task, "key": key,
                                                           "settings": settings, "spec": spec_digest(request)})
    fault_point("run.marker")
    atomic_write_bytes(eval_marker(layout, request.name, key),
                       json.dumps({"task": task, "key": key, "settings": settings, "event": event}, default=str,
                                  indent=1).encode())
    append_index(folder, {"checkpoint": str(final.relative_to(folder)), "scores": layout.scores.name,
                          "event": event, "tasks": task, "final": True})
