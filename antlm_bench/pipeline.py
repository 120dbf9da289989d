"""``antlm-bench run``: the whole job in one command.

    data + tokenizer (cached) -> train under the schedule, each phase scored its own way (paper Fig. 2)
      -> final checkpoint evaluated on every asked task (minimal pairs by --final-scoring: auto, the last
         phase's method, or clm / pll for every run; GLUE fine-tuning)
      -> rows appended to the run's tables -> a Table-2-style summary over seeds

Each seed is one run folder ``<output>/<recipe>-<preset>-<schedule>-seed<N>`` (``...-<schedule>-<label>-seed<N>``
under ``--label``: runs.identity). Re-running the same command reuses
what is finished: training is skipped when the run folder says it finished with the same settings, word cap,
precision and corpus text (a finished run of another request is refused in one line naming the difference; an
unfinished one is resumed from its last checkpoint, which refuses other text itself), and a task's final
evaluation is skipped when a marker keyed by the content hash of (checkpoint weights, task spec, evaluation
settings) says it was done.

A finished run whose checkpoints are gone (pruned to save disk, or restored from a results export:
leaderboards/export_runs.py) keeps what its store holds: its final evaluations are reused when each one verifies
against the request (:func:`kept_final_evaluations`), and a task it lacks is refused in one line, since scoring it
needs the weights.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from antlm_bench.adapters.glue.options import GlueOptions
from antlm_bench.data import atomic_write_bytes, hash_files
from antlm_bench.errors import UserError
from antlm_bench.locking import fault_point
from antlm_bench.models import count_parameters
from antlm_bench.models.threads import choose_threads
from antlm_bench.options import SAVE_EVERY_MINUTES, parse_device, parse_label, parse_seeds, resolve_device
from antlm_bench.progress import line_printer
from antlm_bench.recipes import Recipe, load_recipe
from antlm_bench.registry import add_include_path
from antlm_bench.results.store import commit_results, output_folder
from antlm_bench.results.tables import append_index
from antlm_bench.runs.identity import run_folder_name
from antlm_bench.runs.layout import RunLayout
from antlm_bench.runs.record import read_record
from antlm_bench.runs.run_file import RunRecord
from antlm_bench.runs.schedule import parse_schedule

if TYPE_CHECKING:
    import pyarrow as pa

    from antlm_bench.training.reporting import ScoreRequest



class RunConfig(BaseModel):
    """What ``antlm-bench run`` takes (validated at the edge)."""

    model_config = ConfigDict(extra="forbid")

    model: str = "antlm-babyllama"
    tasks: str = "babylm"
    preset: str | None = None  # default: paper on CUDA, tiny on CPU
    schedule: str | None = None  # default: the recipe's
    seeds: list[int] = Field(default_factory=lambda: [42])
    # a name beside the seeds (runs.identity): in the folder names and rows, and in every random draw
    label: str | None = None
    output: Path = Path("results")
    data_dir: Path | None = None
    corpus: Path | None = None
    cache_dir: Path | None = None
    max_words: int | None = Field(None, gt=0)
    eval_every: Literal["none", "phase", "epoch", "words"] = "phase"
    save_at_words: list[int] = Field(default_factory=list)  # checkpoints/chck_<N>M (train --save-at-words)
    # a resume point (`last`) every M minutes of training: what a hard kill (SIGKILL, a lost machine) can cost;
    # not part of the configuration (checkpoint settings never change the network a seed trains)
    save_every_minutes: float = Field(SAVE_EVERY_MINUTES, gt=0)
    eval_limit: int | None = Field(None, gt=0)  # per-phase scoring; default: the preset's eval_limit
    limit: int | None = Field(None, gt=0)  # final minimal-pair evaluation: first N items per subtask
    glue: GlueOptions = Field(default_factory=GlueOptions)  # GLUE's options (epochs, max_train_examples, probe, ...)
    batch_tokens: int = Field(4096, gt=0)
    device: str = "auto"
    precision: Literal["auto", "fp32", "bf16"] = "auto"  # training's (models.precision); recorded in run.json
    threads: int | None = Field(None, gt=0)  # CPU threads for torch (default: models.threads.choose_threads)
    convention: Literal["babylm-2025", "babylm-2024"] = "babylm-2025"  # scoring convention, recorded in every row
    # the final minimal-pair evaluation's method: auto (by the last phase: CLM -> clm, MLM -> pll), or one method
    # for every run, so that schedules ending in different objectives are measured by one instrument
    final_scoring: Literal["auto", "clm", "pll"] = "auto"
    progress: bool = True

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: Any) -> Any:
        return parse_label(value)

    @field_validator("device")
    @classmethod
    def _device(cls, name: str) -> str:
        return parse_device(name)  # at the edge: a device this machine lacks is refused before any work

    @field_validator("save_at_words", mode="before")
    @classmethod
    def _words(cls, value: Any) -> Any:
        from antlm_bench.training.plan import parse_save_at_words

        return parse_save_at_words(value) if isinstance(value, str) or value is None else value

    @model_validator(mode="after")
    def _words_need_counts(self) -> RunConfig:
        if self.eval_every == "words" and not self.save_at_words:
            raise ValueError("--eval-every words needs --save-at-words")
        return self


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


# `antlm-bench run`'s options that are RunConfig fields of the same name and value
_SAME_NAMED_OPTIONS = ("model", "tasks", "preset", "schedule", "label", "output", "data_dir", "corpus", "max_words",
                       "eval_limit", "limit", "eval_every", "save_at_words", "save_every_minutes", "device",
                       "precision", "threads", "convention", "final_scoring")


def run_config_of_options(options: Mapping[str, Any]) -> RunConfig:
    """The ``RunConfig`` of ``antlm-bench run``'s parsed option values (by the options' names), for ``run`` and for
    each cell of ``antlm-bench sweep`` (to skip finished ones); adds the ``--include-path`` folders."""
    for folder in options.get("include_path") or []:
        add_include_path(folder)
    precision = options.get("precision", "auto")
    glue = GlueOptions.of_flags(
        {"epochs": options["glue_epochs"], "max_train_examples": options["glue_max_train_examples"],
         "probe": options["probe"] or None, "protocol": options.get("glue_protocol"),
         # GLUE fine-tunes by the rule training follows
         "precision": precision if precision != "auto" else None},
        flags={"epochs": "--glue-epochs", "max_train_examples": "--glue-max-train-examples",
               "protocol": "--glue-protocol"})
    return RunConfig(**{name: options[name] for name in _SAME_NAMED_OPTIONS}, seeds=parse_seeds(options["seeds"]),
                     glue=glue, progress=not options["quiet"])


def run_threads(config: RunConfig, recipe: Recipe, preset: str) -> tuple[int, str]:
    """The torch threads a run of ``recipe`` at ``preset`` uses, and why (``models.threads.choose_threads``); the
    sweep asks it too, to share the cores among its worker processes."""
    return choose_threads(config.threads, count_parameters(recipe, preset), resolve_device(config.device))


def default_preset() -> tuple[str, str]:
    if torch.cuda.is_available():
        return "paper", f"CUDA device {torch.cuda.get_device_name(0)} found: preset paper"
    return "tiny", "no CUDA device: preset tiny (CPU quickstart size; --preset cpu learns grammar on a CPU in under an hour a seed, small or paper are larger)"


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


def _finished_training(layout: RunLayout, recipe: Recipe, preset: str, schedule: str, seed: int,
                       config: RunConfig) -> bool:
    """Whether the folder holds a finished run of this request (reused then); refuses, in one line naming the
    difference, a finished run that is not this request's: other settings, other --save-at-words, another word cap,
    precision or corpus text (``_check_same_training``)."""
    folder = layout.folder
    try:
        record = layout.read_run_file()
    except UserError:
        return False  # a damaged run file: the run is resumed (or restarted) and the file written anew
    if record is None:
        return False
    same = ((record.recipe, record.preset, record.schedule, record.seed, record.label)
            == (recipe.name, preset, schedule, seed, config.label))
    if record.status == "finished" and not same:
        labelled = f", label {record.label}" if record.label else ""
        raise UserError(f"{folder}: holds a finished run with other settings ({record.recipe}, "
                        f"{record.preset}, {record.schedule}, seed {record.seed}{labelled}); use another --output")
    saved = record.config.save_at_words
    if record.status == "finished" and saved != config.save_at_words:
        shown = ",".join(map(str, saved)) or "none"
        raise UserError(f"{folder}: a finished run saved with --save-at-words {shown}; this command asks for "
                        f"{','.join(map(str, config.save_at_words)) or 'none'}; use another --output")
    if record.status != "finished":
        return False
    _check_same_training(layout, record, recipe, preset, config)
    return True


_DATA_HASHES: dict[tuple[Any, ...], str] = {}  # one reading of an unchanged corpus per process (a sweep's cells)


def _check_same_training(layout: RunLayout, record: RunRecord, recipe: Recipe, preset: str,
                         config: RunConfig) -> None:
    """A finished run is reused only when what decided its network equals the request: the word cap, the
    precision asked for (``auto`` accepts the run's) and the corpus text (its data hash, read from the corpus the
    request names); otherwise one line naming the difference, and nothing is reused or deleted."""
    from antlm_bench.data.corpus import default_corpus_dir, find_corpus_files, training_data_hash, training_words

    folder = layout.folder
    then = training_words(recipe, preset, record.config.max_words)
    now = training_words(recipe, preset, config.max_words)
    if then != now:
        raise UserError(f"{folder}: holds a finished run trained with --max-words {then or 'none'}; this command "
                        f"asks for --max-words {now or 'none'}; nothing was reused: use another --output, or the "
                        "run's --max-words")
    if config.precision != "auto" and record.precision not in (None, config.precision):
        raise UserError(f"{folder}: holds a finished run trained in precision {record.precision}; this "
                        f"command asks for --precision {config.precision}; nothing was reused: use another "
                        "--output, or --precision auto")
    corpus = Path(config.corpus or default_corpus_dir(config.data_dir)).expanduser()
    files = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in find_corpus_files(corpus, "train"))
    key = (files, recipe.name, preset, now)
    if key not in _DATA_HASHES:
        _DATA_HASHES[key] = training_data_hash(corpus, recipe, preset, config.max_words)
    recorded = record.data_hash
    if recorded and recorded != _DATA_HASHES[key]:
        raise UserError(f"{folder}: holds a finished run trained on other text (data hash {recorded[:12]}; "
                        f"{corpus} now gives {_DATA_HASHES[key][:12]}); nothing was reused: use another --output, "
                        "or the corpus it was trained on")


def _eval_marker(layout: RunLayout, task: str, key: str) -> Path:
    return layout.evals_dir / f"{task}-{key[:16]}.json"


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
    if config.final_scoring == "auto" or not request.adapter().needs_scoring_model:
        return "auto"
    return "auto" if final_method(schedule, "auto") == config.final_scoring else config.final_scoring


def _eval_settings(config: RunConfig, request: Any, task_options: GlueOptions, seed: int,
                   schedule: str) -> dict[str, Any]:
    """What a final evaluation's marker hashes besides weights and task (the key ``glue`` holds the options of a
    task that takes them, under that name so that markers written before keep their hash)."""
    takes_options = request.adapter().takes_options
    return {"scoring": _final_scoring_arg(config, schedule, request), "limit": config.limit,
            "batch_tokens": config.batch_tokens, "glue": task_options.given() if takes_options else None,
            "seed": seed, "convention": config.convention}


def _task_options(config: RunConfig, recipe: Recipe, preset: str) -> GlueOptions:
    """The run's task options over its preset's budget (``glue_budget``): what every evaluation of the run takes."""
    return config.glue.under(recipe.preset(preset).glue_budget, f"recipe {recipe.name} preset {preset}: glue_budget")


def _spec_text(request: Any) -> str:
    return request.spec.source.read_text(encoding="utf-8") if request.spec.source else request.name


def _spec_digest(request: Any) -> str:
    """sha256 of the task spec a final evaluation ran under: its event records it, so that a run whose checkpoint
    is gone (its marker key cannot be recomputed without the weights) still tells an edited spec apart."""
    return hashlib.sha256(_spec_text(request).encode()).hexdigest()


def _task_arg(request: Any) -> str:
    """The task as a final evaluation names it (``glue:rte,mrpc`` for a few members): evaluate's --tasks, and the
    ``task`` of its event and marker."""
    return request.name + (":" + ",".join(request.members) if request.members else "")


def _eval_key(weights: str, request: Any, settings: dict[str, Any]) -> str:
    """The content hash a final evaluation's marker is named by: weights, task spec, settings, members."""
    return _sha256_text(weights, _spec_text(request), json.dumps(settings, sort_keys=True, default=str),
                        ",".join(request.members or []))


@dataclass(frozen=True)
class KeptEvaluations:
    """The final evaluations a finished run's store keeps for a request, found without its weights: per task (by
    its name) the event that verified (``events``), or why none did (``missing``); ``unverified_specs``: tasks
    whose event was committed before events recorded their spec's digest (its settings and weights verified, its
    spec not)."""

    events: dict[str, str]
    missing: dict[str, str]
    unverified_specs: tuple[str, ...] = ()


def kept_final_evaluations(layout: RunLayout, record: RunRecord, requests: Sequence[Any],
                           settings_of: Callable[[Any], dict[str, Any]]) -> KeptEvaluations:
    """For each request (``settings_of(request)``: its evaluation settings), the latest final-evaluation event of
    the run's store that verifies: the same task, the same settings, the same spec (where the event records its
    digest), and score rows that are all its own (their count the event's) and all of the run's final weights
    (``weights_digest`` equal to run.json's). Nothing is trusted that the records do not show: a run.json without
    a weights digest keeps nothing."""
    from antlm_bench.results.store import stored_events

    events = [e for e in stored_events(layout.folder) if e.record.get("kind") == "final-eval"] \
        if layout.scores.is_dir() else []
    weights = record.weights_digest
    found: dict[str, str] = {}
    missing: dict[str, str] = {}
    unverified: list[str] = []
    for request in requests:
        task = _task_arg(request)
        wanted = json.loads(json.dumps(settings_of(request), default=str))
        why = "its store holds no final evaluation of it"
        for event in reversed(events):
            if event.record.get("task") != task:
                continue
            if event.record.get("settings") != wanted:
                why = f"its evaluation {event.name} ran with other settings"
                continue
            spec = event.record.get("spec")
            if spec is not None and spec != _spec_digest(request):
                why = f"its task spec changed since its evaluation {event.name}"
                continue
            try:
                scores = event.scores()  # its bytes checked against its record
            except UserError as damaged:
                why = f"its evaluation {event.name} cannot be read back as written ({damaged})"
                continue
            digests = set(scores.column("weights_digest").to_pylist())
            if weights is None:
                why = "its run.json records no weights digest, so no evaluation can be tied to its weights"
            elif scores.num_rows != event.record.get("scores_rows") or digests != {weights}:
                why = f"its evaluation {event.name} does not hold the scores of its final weights ({weights[:12]})"
            else:
                found[request.name] = event.name
                if spec is None:
                    unverified.append(request.name)
                break
        else:
            missing[request.name] = why
    return KeptEvaluations(found, missing, tuple(unverified))


def pending_seeds(config: RunConfig) -> list[int]:
    """The seeds of ``config`` that :func:`run_benchmark` would still train or evaluate, found without writing
    anything (``antlm-bench sweep`` skips a cell with none, in a fraction of a second instead of a process)."""
    from antlm_bench.tasks import resolve_tasks

    preset = config.preset or default_preset()[0]
    recipe = load_recipe(config.model)
    schedule = parse_schedule(config.schedule or recipe.default_schedule).canonical
    requests = resolve_tasks(config.tasks)
    task_options = _task_options(config, recipe, preset)
    pending = []
    for seed in config.seeds:
        folder = run_folder_name(recipe.name, preset, schedule, seed, config.label)
        layout = RunLayout(config.output.expanduser() / folder)

        def settings_of(request: Any, seed: int = seed) -> dict[str, Any]:
            return _eval_settings(config, request, task_options, seed, schedule)

        try:
            finished = _finished_training(layout, recipe, preset, schedule, seed, config)
            final = layout.final_checkpoint() if finished else None
            if finished and final is None:  # checkpoints gone: done when its store keeps every evaluation
                record = layout.read_run_file()
                if record is None or kept_final_evaluations(layout, record, requests, settings_of).missing:
                    pending.append(seed)
                continue
        except UserError:  # a damaged or foreign run folder: `run` says what is wrong with it
            final = None
        if final is None:
            pending.append(seed)
            continue
        weights = checkpoint_hash(final)
        if not all(_eval_marker(layout, r.name, _eval_key(weights, r, settings_of(r))).exists() for r in requests):
            pending.append(seed)
    return pending


def run_benchmark(config: RunConfig, console: Any = None) -> RunSummary:
    """Train (or reuse) one run per seed, evaluate its final checkpoint on every task, summarise."""
    from antlm_bench.evaluate import EvalConfig, checkpoint_info_from_record, evaluate, run_info_from_record
    from antlm_bench.tasks import resolve_tasks
    from antlm_bench.training.trainer import TrainConfig, train

    say = line_printer(console)
    preset = config.preset
    if preset is None:
        preset, why = default_preset()
        say(why)
    recipe = load_recipe(config.model)
    preset_spec = recipe.preset(preset)
    schedule = parse_schedule(config.schedule or recipe.default_schedule).canonical
    requests = resolve_tasks(config.tasks)  # fail on a bad task name before any training
    minimal_pair_tasks = [r.name for r in requests if r.adapter().needs_scoring_model]
    eval_limit = config.eval_limit or preset_spec.eval_limit
    task_options = _task_options(config, recipe, preset)
    notes = []
    if preset_spec.glue_budget and any(r.adapter().takes_options for r in requests):
        given = config.glue.given()
        applied = {k: v for k, v in preset_spec.glue_budget.items() if k not in given}
        if applied:
            notes.append(f"preset {preset}: GLUE budget " + ", ".join(f"{k}={v}" for k, v in applied.items())
                         + " (override with --glue-epochs / --glue-max-train-examples)")
    for note in notes:
        say(note)
    # the recipe and the schedule it trains, its default said as such: the choice is plain before any training
    default = "" if config.schedule else " (the recipe's default)"
    say(f"{recipe.name} ({recipe.architecture}), preset {preset}, schedule {schedule}{default}, seeds "
        f"{', '.join(map(str, config.seeds))}, tasks {', '.join(r.name for r in requests)}"
        + (f", final minimal-pair scoring {config.final_scoring}" if config.final_scoring != "auto" else ""))
    # the same choice as eval's (evaluations below make it again for the model they load, with config.threads)
    n_threads, threads_why = run_threads(config, recipe, preset)
    torch.set_num_threads(n_threads)
    say(f"torch threads: {n_threads} ({threads_why})")

    output = config.output.expanduser()
    runs: list[SeedRun] = []
    for seed in config.seeds:
        layout = RunLayout(output / run_folder_name(recipe.name, preset, schedule, seed, config.label))
        folder = layout.folder
        # one live `run` (or `train`) per run folder: a second one into it is refused, naming this pid
        with output_folder(folder, "run"):
            if _finished_training(layout, recipe, preset, schedule, seed, config):
                status = "reused"
                if layout.final_checkpoint() is None:
                    runs.append(_reuse_kept(layout, seed, requests,
                                            lambda r, s=seed: _eval_settings(config, r, task_options, s, schedule),
                                            say))
                    continue
                say(f"seed {seed}: training already finished in {folder}; reusing it")
            else:
                status = "resumed" if layout.run_file.exists() else "trained"
                train_config = TrainConfig(
                    model=recipe.name, preset=preset, output=folder, schedule=schedule, data_dir=config.data_dir,
                    corpus=config.corpus, cache_dir=config.cache_dir, seed=seed, label=config.label,
                    max_words=config.max_words,
                    resume=status == "resumed", eval_every=config.eval_every if minimal_pair_tasks else "none",
                    eval_tasks=",".join(minimal_pair_tasks) or "blimp", eval_limit=eval_limit, device=config.device,
                    convention=config.convention, progress=config.progress, save_at_words=config.save_at_words,
                    save_every_minutes=config.save_every_minutes,
                    torch_threads=n_threads, torch_threads_reason=threads_why, precision=config.precision,
                )
                result = train(train_config, console=console, scorer=score_checkpoint)
                if result.final_checkpoint is None:
                    raise UserError(f"{folder}: training stopped before the last phase; run the same command again "
                                    "to resume")
            final = _final_checkpoint(layout)
            record = read_record(final)
            seed_run = SeedRun(seed, folder, status)
            weights = checkpoint_hash(final)
            for request in requests:
                settings = _eval_settings(config, request, task_options, seed, schedule)
                key = _eval_key(weights, request, settings)
                marker = _eval_marker(layout, request.name, key)
                if marker.exists():
                    seed_run.reused.append(request.name)
                    continue
                task_arg = _task_arg(request)
                out = evaluate(final, EvalConfig(
                    tasks=task_arg, scoring=settings["scoring"], limit=config.limit, log_samples=True,
                    batch_tokens=config.batch_tokens, device="cuda" if resolve_device(config.device).startswith("cuda") else "cpu",
                    data_dir=config.data_dir,
                    # the run's identity and the checkpoint's name as the trainer's per-phase rows give them, so
                    # the final rows join the run and replace the last phase's quick look
                    run_info=replace(run_info_from_record(record, final), run_id=folder.name),
                    checkpoint_info=checkpoint_info_from_record(record, final.relative_to(folder)),
                    options=task_options, progress=config.progress, seeds=[seed], work_dir=layout.work_dir,
                    convention=config.convention, threads=config.threads,
                ))
                # scores and items are one event of the run folder's store; the marker comes after the commit, so a
                # kill in between re-evaluates next time and the newer event replaces this one's rows (no duplicates)
                event = commit_results(folder, out.scores, out.items, {"kind": "final-eval", "task": task_arg,
                                                                       "key": key, "settings": settings,
                                                                       "spec": _spec_digest(request)})
                fault_point("run.marker")
                atomic_write_bytes(marker, json.dumps({"task": task_arg, "key": key, "settings": settings,
                                                       "event": event}, default=str, indent=1).encode())
                append_index(folder, {"checkpoint": str(final.relative_to(folder)), "scores": layout.scores.name,
                                      "event": event, "tasks": task_arg, "final": True})
                seed_run.evaluated.append(request.name)
            runs.append(seed_run)
    return RunSummary(recipe.name, preset, schedule, runs, output, notes)


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
