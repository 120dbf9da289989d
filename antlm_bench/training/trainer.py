"""The phase trainer: one model, a schedule of objectives, checkpoints you can resume bit for bit.

    result = train(TrainConfig(model="antlm-babyllama", preset="tiny", output="runs/x"))

``train`` resolves the config once, at the edge (``TrainJob``: the recipe at its preset, ``recipes.ResolvedPreset``,
with the run's own knobs; the parsed schedule; the run's ``runs.identity.RunIdentity``). ``Trainer`` is the loop
(``Trainer._loop``, one screen) over four parts it builds from that job with explicit arguments, each testable
alone: ``plan.StepPlan`` (the schedule as global steps; which rows and objective a step trains), ``step.StepRunner``
(one optimizer step's gradients in micro-batches, accumulation and DDP; the optimizer at a phase's start),
``checkpointer.Checkpointer`` (checkpoints, resume points, resuming; the records of ``antlm_bench.runs.record``) and
``reporting.Reporter`` (progress, metrics, run.json, per-phase scoring). Per-phase scores come from a scorer the
caller passes in (``PhaseScorer``): training imports no evaluation code; ``antlm_bench.pipeline.score_checkpoint``
(on ``antlm_bench.evaluate``) is the one ``train`` / ``run`` pass. Each step:

1. builds the WHOLE global batch for its objective (``objectives.BatchBuilder``; masks keyed by (seed, step); MIX
   splits it row by row), takes this process's rows, and runs them in micro-batches: the step's gradient is that of
   the global batch's loss (a MIX batch's objectives weighed as the recipe's ``mix_loss`` says), whatever the
   micro-batch size or number of processes;
2. stops the run before the optimizer moves if the loss or gradient norm is not finite (``TrainingDiverged``; the
   last checkpoint stays as it was); otherwise clips, steps AdamW and the phase's LR schedule (restarted at every
   phase; AdamW's moments too where the recipe says ``optimizer_at_phase: reset``);
3. writes the checkpoints due, and on SIGINT / SIGTERM a resume point, then stops (``TrainingInterrupted``).

Resume: weights, optimizer, scheduler position and every process's RNG state come back from ``last``; the data
order and the masks are functions of (seed, step), so a resumed run computes exactly what the uninterrupted run
computed. The precision (``--precision``: bf16 autocast with float32 master weights where the chip multiplies bf16
natively, else float32; ``antlm_bench.models.precision``) is chosen once, recorded, kept by a resume, and part of
the configuration fingerprint.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from antlm_bench.config import (
    TrainConfig,
)
from antlm_bench.errors import DivergedError, UserError, one_line
from antlm_bench.models import build_model
from antlm_bench.models.precision import Precision, resolve_precision
from antlm_bench.options import parse_device
from antlm_bench.progress import line_printer
from antlm_bench.recipes import ResolvedPreset, load_recipe
from antlm_bench.runs.identity import RunIdentity
from antlm_bench.runs.layout import RunLayout, words_checkpoint_name
from antlm_bench.runs.record import read_record
from antlm_bench.runs.schedule import Schedule, parse_schedule
from antlm_bench.training.checkpointer import (
    RECIPE_KNOBS,
    Checkpointer,
    RunFacts,
    SavePolicy,
    check_run_folder,
    claim_run_folder,
    config_fingerprint,
    inspect_run_folder,
    start_fingerprint_config,
    training_fingerprint,
)
from antlm_bench.training.objectives import BatchBuilder, LossModule
from antlm_bench.training.plan import PhasePlan, StepPlan, check_plan_size, plan_phases
from antlm_bench.training.reporting import PhaseScorer, Reporter, StepInfo, _Reporters
from antlm_bench.training.step import Dist, StepRunner, StopSignal, make_optimizer, resolve_device


class TrainingDiverged(DivergedError):
    """The loss (or the gradient norm) stopped being a finite number (exit status 3)."""



class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: the step under way was finished and a resume point written at ``step``. The
    message is the one line to print; ``exit_code`` is 130 (SIGINT) or 143 (SIGTERM), as a shell reports them."""

    def __init__(self, signum: int, step: int) -> None:
        self.signum, self.step = signum, step
        self.exit_code = 128 + signum
        super().__init__(f"interrupted at step {step}; rerun with --resume")



@dataclass(frozen=True)
class TrainJob:
    """A ``TrainConfig`` resolved once, at the edge (``TrainJob.of``; ``train`` calls it): the recipe at its preset
    with the run's own knobs over both, the parsed schedule and the run's identity. The ``Trainer`` hands these to
    its parts; nothing below looks a recipe, a preset or a schedule up again."""

    config: TrainConfig
    preset: ResolvedPreset  # Recipe.resolve(config.preset), overridden by --lr / --global-batch-size / --warmup-ratio
    schedule: Schedule
    identity: RunIdentity

    @classmethod
    def of(cls, config: TrainConfig) -> TrainJob:
        """Resolve ``config``: an unknown recipe or preset, knobs the recipe's own validation refuses, a schedule
        that does not parse or is absurdly long (1000000000000_MLM) are one line here, before any file is read."""
        preset = load_recipe(config.model).resolve(config.preset).overridden(
            lr=config.lr, global_batch_size=config.global_batch_size, warmup_ratio=config.warmup_ratio)
        schedule = parse_schedule(config.schedule or preset.recipe.default_schedule)
        check_plan_size(schedule, None)
        identity = RunIdentity(preset.recipe.name, preset.name, schedule.canonical, config.seed, config.label)
        return cls(config, preset, schedule, identity)


@dataclass
class TrainResult:
    output: Path
    final_checkpoint: Path | None
    steps: int
    losses: list[float] = field(default_factory=list)  # of the steps this process ran (not the resumed ones)
    stopped_early: bool = False
    precision: Precision = Precision("fp32", "")  # what the steps computed in, and why


class Trainer:
    """A resolved ``TrainJob`` (``Trainer(TrainJob.of(config))``) trained by the loop (``_loop``, one screen) over the
    parts it builds in ``__init__``, each testable alone: the step plan
    (``plan.StepPlan``), the step runner (``step.StepRunner``), the checkpointer (``checkpointer.Checkpointer``) and
    the reporter (``reporting.Reporter``). ``scorer`` scores the checkpoints ``--eval-every`` asks for (required
    then; ``antlm_bench.pipeline.score_checkpoint`` is the one ``train`` and ``run`` pass)."""

    def __init__(self, job: TrainJob, *, scorer: PhaseScorer | None = None, tokenizer: Any = None,
                 corpus: Any = None, callbacks: list[Callable[[StepInfo], None]] | None = None,
                 console: Console | None = None) -> None:
        self.job = job
        self.config = config = job.config
        self.callbacks = list(callbacks or [])
        requested = parse_device(config.device)  # first: a bad --device must not leave a folder behind
        kind = "cuda" if requested.startswith("cuda") or (requested == "auto" and torch.cuda.is_available()) else "cpu"
        self.dist = Dist(kind)
        self.device = resolve_device(requested, self.dist.local_rank)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        if config.torch_threads is not None:
            torch.set_num_threads(config.torch_threads)
        if config.deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True)
        _Reporters.check_installed(config.report_to)  # on every process: one alone failing would hang the rest
        recipe, sizes, schedule = job.preset.recipe, job.preset.spec, job.schedule
        self.layout = RunLayout(Path(config.output).expanduser())
        say = self._say_early(console)
        # read-only until the plan stands: a refused schedule or a bad corpus must not have deleted anything
        mode, points = inspect_run_folder(self.layout, config.resume, config.overwrite, say)

        self.tokenizer, corpus = self._data(tokenizer, corpus)
        self.precision = self._precision(sizes.hidden_size, resuming=mode == "resume")
        n_sequences, seq_len = (int(n) for n in corpus.input_ids.shape)
        steps_per_epoch = math.ceil(n_sequences / sizes.global_batch_size)
        plans = plan_phases(schedule, recipe, steps_per_epoch)
        if config.save_at_words and corpus.n_words <= 0:
            raise UserError("--save-at-words: this corpus does not know its number of words")
        # every random draw (masks, data order, initial weights, dropout) from the seed under the run's label
        seed = job.identity.random_seed
        builder = BatchBuilder(recipe.masking, self.tokenizer.mask_token_id, len(self.tokenizer),
                               self.tokenizer.all_special_ids, seed)
        self.steps = StepPlan(plans, steps_per_epoch, sizes.global_batch_size, corpus, builder, seed)

        # the model: the same initial weights on every process (seeded), then this process's dropout stream
        torch.manual_seed(seed)
        self.model = build_model(job.preset, self.tokenizer).to(self.device)
        if self.dist.rank > 0:
            torch.manual_seed(seed + 7919 * self.dist.rank)
        configuration = config_fingerprint(job.preset, schedule, self.precision.name, corpus.data_hash,
                                           corpus.tokenizer_hash)
        start = start_fingerprint_config(job.preset, schedule, self.precision.name)
        self.facts = RunFacts(
            identity=job.identity, preset=job.preset, plans=plans,
            steps_per_epoch=steps_per_epoch, global_batch=sizes.global_batch_size, seq_len=seq_len,
            n_sequences=n_sequences, n_words=int(corpus.n_words), data_hash=corpus.data_hash,
            tokenizer_hash=corpus.tokenizer_hash, world_size=self.dist.world,
            training_fingerprint=training_fingerprint(self.model, self.steps, start),
            config_fingerprint=configuration, precision=self.precision,
            overrides={knob: getattr(config, knob) for knob in RECIPE_KNOBS if getattr(config, knob) is not None},
        )
        self.optimizer = make_optimizer(self.model, recipe, self.device)
        micro_batch = config.micro_batch_size or sizes.micro_batch_size
        self.reporter = Reporter(config, self.facts, self.layout, self.dist, console, scorer, self.model,
                                 self.tokenizer, self.device, sum(p.numel() for p in self.model.parameters()),
                                 micro_batch)
        policy = SavePolicy(save_at_words=tuple(config.save_at_words), save_every_epoch=config.save_every_epoch,
                            save_every_steps=config.save_every_steps, eval_every=config.eval_every)
        self.checkpointer = Checkpointer(self.layout, self.facts, self.steps, self.model, self.optimizer,
                                         self.tokenizer, self.device, self.dist, self.reporter.say, policy)
        if mode == "resume":
            self.checkpointer.check_same_run()
        claim_run_folder(self.layout, self.dist, resuming=mode == "resume", say=say)
        self.step, self.tokens_seen, self.elapsed_before = 0, 0, 0.0
        if mode == "resume":
            resumed = self.checkpointer.resume(points)
            self.step, self.tokens_seen, self.elapsed_before = resumed.step, resumed.tokens_seen, resumed.elapsed_s
        self.model.train()
        loss_module: torch.nn.Module = LossModule(self.model)
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            loss_module = DistributedDataParallel(loss_module, device_ids=ids)
        self.runner = StepRunner(self.model, loss_module, self.optimizer, self.dist, self.device,
                                 self.precision.autocast(self.device),
                                 recipe, sizes.global_batch_size, micro_batch)
        self.signal = StopSignal()

    @staticmethod
    def _say_early(console: Any) -> Callable[[str], None]:
        """Before the reporter exists: lines for the main process only."""
        main = int(os.environ.get("RANK", "0") or 0) == 0
        return line_printer(console if main else None)

    def _precision(self, hidden_size: int, resuming: bool) -> Precision:
        """--precision resolved for this device and model width; ``auto`` on a resume keeps what the run started
        with (the resume check refuses an explicit other one), so a probe under another load never splits a run."""
        if resuming and self.config.precision == "auto":
            try:
                record = self.layout.read_run_file()
            except UserError:
                record = None
            if record is not None and record.precision is not None:
                return Precision(record.precision, f"the resumed run's ({record.precision_reason or ''})")
        return resolve_precision(self.config.precision, self.device, hidden_size)

    def _data(self, tokenizer: Any, corpus: Any) -> tuple[Any, Any]:
        if corpus is not None:
            if tokenizer is None:
                raise ValueError("a corpus passed in needs its tokenizer")
            return tokenizer, corpus
        from antlm_bench.data.corpus import default_corpus_dir, prepare_training_data

        folder = self.config.corpus or default_corpus_dir(self.config.data_dir)
        prepare = lambda: prepare_training_data(folder, self.job.preset, self.config.cache_dir,  # noqa: E731
                                                self.config.max_words)
        # the main process trains the tokenizer and packs the corpus; the others then read the same cache
        result = prepare() if self.dist.main else None
        self.dist.barrier()
        return result if self.dist.main else prepare()

    def run(self) -> TrainResult:
        """Train to the end of the schedule (or --max-steps); run.json ends "finished", "stopped", "diverged",
        "failed" or "interrupted", never "running" after the process is gone (kill -9 aside)."""
        try:
            return self._loop()
        except TrainingDiverged:
            raise  # _diverged recorded it, with the step
        except BaseException as err:
            record = self.reporter.run_record("interrupted" if isinstance(err, KeyboardInterrupt) else "failed",
                                              self.step)
            record.error = one_line(err, 200, typed=True)
            with contextlib.suppress(OSError):  # a full disk must not hide the error that brought us here
                self.reporter.write_run_file(record)
            raise

    def _loop(self) -> TrainResult:
        config, steps, reporter = self.config, self.steps, self.reporter
        stop_at = min(steps.total_steps, config.max_steps) if config.max_steps else steps.total_steps
        reporter.start(self.step, stop_at)
        for folder in reporter.unscored_checkpoints():
            reporter.score(folder)
        self.dist.barrier()
        losses: list[float] = []
        start_time = last_save = time.perf_counter()
        tokens_at_start = self.tokens_seen
        reporter.say(reporter.plan_text())
        schedule_words = self.facts.words_seen(steps.sequences_before(steps.total_steps) * self.facts.seq_len)
        unreachable = [words for words in config.save_at_words if words > schedule_words]
        if unreachable:  # a grid (babylm-strict) larger than the run: say so now, not by their absence at the end
            reporter.say(f"--save-at-words: the schedule ends at {schedule_words:,} words seen; never reached: "
                         + ", ".join(words_checkpoint_name(words) for words in unreachable))
        scheduler, scheduler_phase = None, -1
        with ThreadPoolExecutor(max_workers=1) as prefetch, self.signal.caught():
            pending = prefetch.submit(steps.build, self.step) if self.step < stop_at else None
            try:
                while self.step < stop_at:
                    plan = steps.plan_at(self.step)
                    if scheduler_phase != plan.index:
                        reporter.say(reporter.phase_text(plan, self.step))
                        scheduler, scheduler_phase = self.runner.enter_phase(plan, self.step), plan.index
                    assert pending is not None and scheduler is not None
                    batch = pending.result()
                    pending = prefetch.submit(steps.build, self.step + 1) if self.step + 1 < stop_at else None
                    lr = self.optimizer.param_groups[0]["lr"]
                    by_time = self.dist.main and bool(config.save_every_minutes) and \
                        time.perf_counter() - last_save >= 60 * config.save_every_minutes  # type: ignore[operator]
                    outcome = self.runner.gradients(batch, by_time, self.signal.received is not None)
                    if not (math.isfinite(outcome.loss) and math.isfinite(outcome.grad_norm)):
                        self._diverged(plan, outcome.loss, outcome.grad_norm)
                    self.optimizer.step()
                    scheduler.step()
                    self.optimizer.zero_grad(set_to_none=True)
                    tokens_before = self.tokens_seen
                    self.step += 1
                    self.tokens_seen += len(batch) * self.facts.seq_len
                    losses.append(outcome.loss)
                    speed = (self.tokens_seen - tokens_at_start) / max(time.perf_counter() - start_time, 1e-9)
                    info = StepInfo(self.step, plan.index, batch.objective, self.step / self.facts.steps_per_epoch,
                                    outcome.loss, lr, outcome.grad_norm, self.tokens_seen, speed)
                    reporter.log(info)
                    elapsed = self.elapsed_before + time.perf_counter() - start_time
                    saved = self.checkpointer.after_step(plan, self.step, tokens_before, self.tokens_seen,
                                                         outcome.save_wanted, stop_at, elapsed, reporter.score)
                    if saved:
                        last_save = time.perf_counter()
                    for callback in self.callbacks:
                        callback(info)
                    stopping = outcome.stop_wanted or (not self.dist.enabled and self.signal.received is not None)
                    if stopping and self.step < stop_at:  # SIGINT / SIGTERM: this step is done, keep it
                        if not saved:
                            self.checkpointer.save_resume_point(plan, self.step, self.tokens_seen,
                                                                self.step == plan.end_step, elapsed)
                        raise TrainingInterrupted(self.signal.received or signal.SIGTERM, self.step)
            finally:
                if pending is not None:
                    pending.cancel()
                reporter.stop()
        return self._finish(losses)

    def _finish(self, losses: list[float]) -> TrainResult:
        finished = self.step >= self.steps.total_steps
        final = self.layout.phase_checkpoint(len(self.facts.plans) - 1, self.facts.plans[-1].phase)
        record = self.reporter.run_record("finished" if finished else "stopped", self.step)
        if finished and self.dist.main:  # the network the run trained, as its final checkpoint recorded it
            final_record = read_record(final)
            record.weights_digest = final_record.weights_digest if final_record is not None else None
        self.reporter.write_run_file(record)
        self.dist.barrier()
        self.dist.close()
        return TrainResult(self.layout.folder, final if finished else None, self.step, losses,
                           stopped_early=not finished, precision=self.precision)

    def _diverged(self, plan: PhasePlan, loss: float, grad_norm: float) -> None:
        what = f"loss {loss}" if not math.isfinite(loss) else f"gradient norm {grad_norm}"
        last = read_record(self.layout.last) if self.layout.last.is_dir() else None
        kept = (f"the last good checkpoint is {self.layout.last} (step {last.step})" if last is not None
                else "no checkpoint was saved before it")
        record = self.reporter.run_record("diverged", self.step)
        record.diverged_at_step = self.step + 1
        self.reporter.write_run_file(record)
        raise TrainingDiverged(
            f"{what} at step {self.step + 1} (phase {plan.index} {plan.phase.label}, epoch "
            f"{(self.step + 1) / self.facts.steps_per_epoch:.2f}); training stopped and {kept}; lower the learning "
            "rate or check the data, then --resume"
        )


def train(config: TrainConfig, **kwargs: Any) -> TrainResult:
    """Train ``config.model`` at ``config.preset`` through its schedule (see the module docstring); ``kwargs`` go to
    ``Trainer`` (``scorer=``, ``console=``, ``callbacks=``, ``tokenizer=`` and ``corpus=``).

    The main process holds the run folder's lock throughout (``antlm_bench.locking``): a second ``train`` or
    ``run`` into the same folder is refused at once, naming this pid, and a failure that leaves the folder this
    call created empty removes it. Other DDP processes (``RANK`` > 0) do not take it: they share the run.
    """
    from antlm_bench.results.store import output_folder

    job = TrainJob.of(config)  # an unknown recipe or preset, a bad schedule: refused before the folder is touched
    if int(os.environ.get("RANK", "0") or 0) != 0:
        return Trainer(job, **kwargs).run()
    # what training did not make in the folder is refused before output_folder locks and tidies it
    check_run_folder(RunLayout(Path(config.output).expanduser()), config.resume)
    with output_folder(config.output, "train"):
        return Trainer(job, **kwargs).run()
