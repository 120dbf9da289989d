"""``antlm-bench run``'s driver: per seed, train (or reuse) the run, then evaluate its final checkpoint on every
asked task, and summarise; and the scorer the trainer calls at each phase end (:func:`score_checkpoint`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from antlm_bench.config import RunConfig, TrainConfig
from antlm_bench.errors import UserError
from antlm_bench.pipeline.evaluations import (
    checkpoint_hash,
    eval_key,
    eval_marker,
    evaluate_final,
)
from antlm_bench.pipeline.request import ResolvedRun, resolve_run, run_threads
from antlm_bench.pipeline.reuse import finished_training, kept_final_evaluations
from antlm_bench.progress import line_printer
from antlm_bench.results.store import output_folder
from antlm_bench.runs.identity import RunIdentity
from antlm_bench.runs.layout import RunLayout
from antlm_bench.runs.record import read_record

if TYPE_CHECKING:
    import pyarrow as pa

    from antlm_bench.training.reporting import ScoreRequest


@dataclass
class SeedRun:
    seed: int
    folder: Path
    trained: str  # "trained", "resumed", "reused"
    evaluated: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)


@dataclass
class RunSummary:
    recipe: str
    preset: str
    schedule: str
    runs: list[SeedRun]
    output: Path
    notes: list[str] = field(default_factory=list)


def run_benchmark(config: RunConfig, console: Any = None) -> RunSummary:
    """Train (or reuse) one run per seed, evaluate its final checkpoint on every task, summarise."""

    say = line_printer(console)
    run = resolve_run(config, say)
    for note in run.notes:
        say(note)
    # the recipe and the schedule it trains, its default said as such: the choice is plain before any training
    default = "" if config.model.schedule else " (the recipe's default)"
    final_scoring = config.evaluation.final_scoring
    recipe = run.preset.recipe
    say(f"{recipe.name} ({recipe.architecture}), preset {run.preset.name}, schedule {run.schedule}{default}, "
        f"seeds {', '.join(map(str, config.seeds))}, tasks {', '.join(r.name for r in run.requests)}"
        + (f", final minimal-pair scoring {final_scoring}" if final_scoring != "auto" else ""))
    # the same choice as eval's (evaluations below make it again for the model they load, with the same threads)
    threads = run_threads(config, run.preset)
    torch.set_num_threads(threads[0])
    say(f"torch threads: {threads[0]} ({threads[1]})")
    output = config.output.folder.expanduser()
    runs = []
    for identity in run.identities:
        layout = RunLayout(output / identity.folder_name)
        # one live `run` (or `train`) per run folder: a second one into it is refused, naming this pid
        with output_folder(layout.folder, "run"):
            runs.append(_run_seed(run, layout, identity, threads, say, console))
    return RunSummary(recipe.name, run.preset.name, run.schedule, runs, output, list(run.notes))


def _run_seed(run: ResolvedRun, layout: RunLayout, identity: RunIdentity, threads: tuple[int, str],
              say: Callable[[str], None], console: Any) -> SeedRun:
    """One seed: its training finished, reused or resumed, then every final evaluation its marker does not show."""
    folder, seed, settings_of = layout.folder, identity.seed, run.settings_of(identity)
    if finished_training(layout, identity, run.preset, run.config):
        status = "reused"
        if layout.final_checkpoint() is None:
            return _reuse_kept(layout, seed, run.requests, settings_of, say)
        say(f"seed {seed}: training already finished in {folder}; reusing it")
    else:
        status = "resumed" if layout.run_file.exists() else "trained"
        _train(run, layout, seed, status == "resumed", threads, console)
    final = _final_checkpoint(layout)
    record = read_record(final)
    seed_run = SeedRun(seed, folder, status)
    weights = checkpoint_hash(final)
    for request in run.requests:
        settings = settings_of(request)
        key = eval_key(weights, request, settings)
        if eval_marker(layout, request.name, key).exists():
            seed_run.reused.append(request.name)
            continue
        evaluate_final(layout, final, record, request, key, settings, run.config, run.options, identity)
        seed_run.evaluated.append(request.name)
    return seed_run


def _train(run: ResolvedRun, layout: RunLayout, seed: int, resume: bool, threads: tuple[int, str],
           console: Any) -> None:
    """Train (or resume) one seed's run into its folder, scoring each phase on the minimal-pair tasks asked."""
    from antlm_bench.training.trainer import train

    config = run.config
    minimal_pair_tasks = [r.name for r in run.requests if r.adapter().needs_scoring_model]
    train_config = TrainConfig(
        model=run.preset.recipe.name, preset=run.preset.name, output=layout.folder, schedule=run.schedule,
        data_dir=config.data.data_dir, corpus=config.data.corpus, cache_dir=config.data.cache_dir, seed=seed,
        label=config.label, max_words=config.data.max_words, resume=resume,
        eval_every=config.training.eval_every if minimal_pair_tasks else "none",
        eval_tasks=",".join(minimal_pair_tasks) or "blimp",
        eval_limit=config.training.eval_limit or run.preset.spec.eval_limit,
        device=config.machine.device, convention=config.evaluation.convention, progress=not config.output.quiet,
        save_at_words=config.training.save_at_words, save_every_minutes=config.training.save_every_minutes,
        torch_threads=threads[0], torch_threads_reason=threads[1], precision=config.machine.precision,
    )
    result = train(train_config, console=console, scorer=score_checkpoint)
    if result.final_checkpoint is None:
        raise UserError(f"{layout.folder}: training stopped before the last phase; run the same command again to "
                        "resume")


def score_checkpoint(request: ScoreRequest) -> pa.Table:
    """The trainer's ``--eval-every`` scorer (``training.reporting.PhaseScorer``; ``run`` and ``train`` pass it):
    ``evaluate`` on the in-memory model, ``--scoring auto`` (the checkpoint's record names its phase's method), rows
    named for the run and checkpoint, nothing written (the trainer commits the rows)."""
    from antlm_bench.evaluate import EvalConfig, checkpoint_info_from_record, evaluate, run_info_from_record

    run_info = replace(run_info_from_record(request.record, request.folder), run_id=request.run_id)
    config = EvalConfig(
        tasks=request.tasks, scoring="auto", limit=request.limit, device=request.device,
        data_dir=request.data_dir, run_info=run_info,
        checkpoint_info=checkpoint_info_from_record(request.record, request.name), progress=False,
        model_path=request.folder, seeds=[request.record.seed or 42], convention=request.convention,
        fast=request.fast,
    )
    return evaluate(request.model, config, tokenizer=request.tokenizer).scores


def _reuse_kept(layout: RunLayout, seed: int, requests: Sequence[Any],
                settings_of: Callable[[Any], dict[str, Any]], say: Callable[[str], None]) -> SeedRun:
    """A finished run without its final checkpoint: every asked evaluation reused from its store, or one line
    naming the first task that would need the weights."""
    folder = layout.folder
    record = layout.read_run_file()
    if record is None:  # it was there when training was found finished: removed since, by another process
        raise UserError(f"{folder}: its run.json is gone while the run was being reused; check what else writes "
                        "this --output, then run again")
    kept = kept_final_evaluations(layout, record, requests, settings_of)
    if kept.missing:
        task, why = next(iter(kept.missing.items()))
        raise UserError(f"{folder}: a finished run whose checkpoints are gone; scoring {task} needs its weights "
                        f"({why}): restore its checkpoints, or train it again into another --output")
    unverified = (f"; the spec of {', '.join(kept.unverified_specs)} was not recorded then (settings and weights "
                  "verified)" if kept.unverified_specs else "")
    say(f"seed {seed}: training finished in {folder}, its checkpoints are gone; reusing the final evaluations its "
        f"store keeps for weights {record.weights_digest[:12]} ({', '.join(kept.events)}){unverified}")
    return SeedRun(seed, folder, "reused", reused=list(kept.events))


def _final_checkpoint(layout: RunLayout) -> Path:
    final = layout.final_checkpoint()
    if final is None:
        raise UserError(f"{layout.folder}: final checkpoint missing; run the same command again to resume training")
    return final
