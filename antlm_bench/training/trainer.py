"""The phase trainer: one model, a schedule of objectives, checkpoints you can resume bit for bit.

    result = train(TrainConfig(model="antlm-babyllama", preset="tiny", output="runs/x"))

``Trainer`` is the loop (``Trainer._run``, one screen) over four parts, each readable alone in
``antlm_bench.training``: ``plan`` (the schedule as global steps; which rows and objective a step trains),
``step`` (one optimizer step's gradients in micro-batches, accumulation and DDP; the optimizer at a phase's start;
stopping on a signal), ``checkpoints`` (the run folder, checkpoints, resume) and ``reporting`` (progress, metrics,
run.json, per-phase scoring). Per-phase scores come from a scorer the caller passes in (``PhaseScorer``): training
imports no evaluation code; ``antlm_bench.pipeline.score_checkpoint`` (on ``antlm_bench.evaluate``) is the one
``train`` / ``run`` pass, and the default. Each step:

1. builds the WHOLE global batch for its objective (``objectives.BatchBuilder``; masks keyed by (seed, step); MIX
   splits it row by row), takes this process's rows, and runs them in micro-batches: the step's gradient is the
   mean over every labelled token of the global batch, whatever the micro-batch size or number of processes;
2. stops the run before the optimizer moves if the loss or gradient norm is not finite (``TrainingDiverged``; the
   last checkpoint stays as it was); otherwise clips, steps AdamW and the phase's LR schedule (restarted at every
   phase; AdamW's moments too where the recipe says ``optimizer_at_phase: reset``);
3. writes the checkpoints due, and on SIGINT / SIGTERM a resume point, then stops (``TrainingInterrupted``).

Resume: weights, optimizer, scheduler position and every process's RNG state come back from ``last``; the data
order and the masks are functions of (seed, step), so a resumed run computes exactly what the uninterrupted run
computed. bf16 autocast is used on CUDA only; on CPU everything is float32.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from antlm_bench.errors import DivergedError, UserError
from antlm_bench.recipes import load_recipe
from antlm_bench.training.checkpoint import LAST, write_json_atomic
from antlm_bench.training.checkpoints import (  # noqa: F401  (re-exported: the trainer's public names)
    CHECKPOINTS,
    METRICS_FILE,
    RUN_FILE,
    SCORES,
    CheckpointAndResume,
    _first_line,
    _kept_items,
)
from antlm_bench.training.objectives import BatchBuilder, LossModule
from antlm_bench.training.plan import (  # noqa: F401  (re-exported)
    MAX_TOTAL_STEPS,
    PhasePlan,
    StepPlan,
    check_plan_size,
    epoch_order,
    plan_phases,
)
from antlm_bench.training.reporting import (  # noqa: F401  (re-exported)
    PhaseScorer,
    Reporting,
    ScoreRequest,
    StepInfo,
    _Reporters,
    read_metrics,
)
from antlm_bench.runs.schedule import parse_schedule
from antlm_bench.training.step import (  # noqa: F401  (re-exported)
    ObjectiveStep,
    StopOnSignal,
    _Dist,
    _optimizer,
    _resolve_device,
    _split_rows,
    check_device,
)


class TrainingDiverged(DivergedError):
    """The loss (or the gradient norm) stopped being a finite number (exit status 3)."""



class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: the step under way was finished and a resume point written at ``step``. The
    message is the one line to print; ``exit_code`` is 130 (SIGINT) or 143 (SIGTERM), as a shell reports them."""

    def __init__(self, signum: int, step: int) -> None:
        self.signum, self.step = signum, step
        self.exit_code = 128 + signum
        super().__init__(f"interrupted at step {step}; rerun with --resume")



class TrainConfig(BaseModel):
    """Everything ``antlm-bench train`` takes (validated here, at the edge)."""

    model_config = ConfigDict(extra="forbid")

    model: str = "antlm-babyllama"
    preset: str = "tiny"
    output: Path
    schedule: str | None = None  # default: the recipe's default_schedule
    data_dir: Path | None = None  # the data folder; the corpus defaults to its pretrain_sample/
    corpus: Path | None = None  # a BabyLM-style folder of *.train files (overrides data_dir's sample)
    cache_dir: Path | None = None  # tokenizer and packed-corpus cache
    seed: int = 42
    max_words: int | None = Field(None, gt=0)
    resume: bool = False
    overwrite: bool = False
    eval_every: Literal["none", "phase", "epoch", "words"] = "none"  # words: each --save-at-words one, fast suite
    eval_tasks: str = "blimp"
    eval_limit: int | None = Field(None, gt=0)
    convention: Literal["babylm-2025", "babylm-2024"] = "babylm-2025"  # scoring convention of --eval-every
    save_every_steps: int | None = Field(None, gt=0)
    save_every_minutes: float | None = Field(30.0, gt=0)
    save_every_epoch: bool = False
    # checkpoints/chck_<N>M at the first step where the words seen (repeats counted) reach each of these
    save_at_words: list[int] = Field(default_factory=list)
    micro_batch_size: int | None = Field(None, gt=0)  # default: the preset's
    max_steps: int | None = Field(None, gt=0)  # stop after this many global steps (smoke runs, benchmarks)
    device: str = "auto"
    deterministic: bool = False  # torch.use_deterministic_algorithms (bit-exact reruns; slower on GPU)
    report_to: list[Literal["tensorboard", "wandb"]] = Field(default_factory=list)
    progress: bool = True

    @field_validator("save_at_words", mode="before")
    @classmethod
    def _words(cls, value: Any) -> Any:
        from antlm_bench.training.plan import parse_save_at_words

        if isinstance(value, str):
            return parse_save_at_words(value)
        if isinstance(value, (list, tuple)) and any(isinstance(v, str) for v in value):
            return parse_save_at_words(",".join(str(v) for v in value))
        return sorted(set(value)) if isinstance(value, (list, tuple)) else value

    @model_validator(mode="after")
    def _words_eval(self) -> TrainConfig:
        if any(w <= 0 for w in self.save_at_words):
            raise ValueError("save_at_words: word counts must be positive")
        if self.eval_every == "words" and not self.save_at_words:
            raise ValueError("eval_every words needs --save-at-words")
        return self



@dataclass
class TrainResult:
    output: Path
    final_checkpoint: Path | None
    steps: int
    losses: list[float] = field(default_factory=list)  # of the steps this process ran (not the resumed ones)
    stopped_early: bool = False



class Trainer(StepPlan, ObjectiveStep, StopOnSignal, CheckpointAndResume, Reporting):
    """The loop; its parts are the mixed-in classes of ``antlm_bench.training`` (see the module docstring).
    ``scorer`` scores the checkpoints ``--eval-every`` asks for (``reporting.PhaseScorer``; None: the top layer's
    default, ``antlm_bench.pipeline.score_checkpoint``, looked up when first needed)."""

    def __init__(self, config: TrainConfig, *, tokenizer: Any = None, corpus: Any = None,
                 callbacks: list[Callable[[StepInfo], None]] | None = None, console: Any = None,
                 scorer: PhaseScorer | None = None) -> None:
        self.config = config
        self.callbacks = list(callbacks or [])
        self.console = console
        self.scorer = scorer
        requested = check_device(config.device)  # first: a bad --device must not leave a folder behind
        kind = "cuda" if requested.startswith("cuda") or (requested == "auto" and torch.cuda.is_available()) else "cpu"
        self.dist = _Dist(kind)
        self.device = _resolve_device(requested, self.dist.local_rank)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        if config.deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True)
        _Reporters.check_installed(config.report_to)  # on every process: one alone failing would hang the rest
        self.recipe = load_recipe(config.model)
        self.preset = self.recipe.preset(config.preset)
        self.schedule = parse_schedule(config.schedule or self.recipe.default_schedule)
        check_plan_size(self.schedule, None)  # 1000000000000_MLM: refused before the corpus is even read
        self.output = Path(config.output).expanduser()
        # read-only until the plan stands: a refused schedule or a bad corpus must not have deleted anything
        self._mode, self._points = self._inspect_output()

        self.tokenizer, self.corpus = self._data(tokenizer, corpus)
        self.n_sequences = int(self.corpus.input_ids.shape[0])
        self.seq_len = int(self.corpus.input_ids.shape[1])
        self.global_batch = self.preset.global_batch_size
        self.micro_batch = config.micro_batch_size or self.preset.micro_batch_size
        self.steps_per_epoch = math.ceil(self.n_sequences / self.global_batch)
        self.plans = plan_phases(self.schedule, self.recipe, self.steps_per_epoch)
        self.total_steps = self.plans[-1].end_step
        # words per epoch (the corpus's whitespace words); words seen = tokens seen x words per token of an epoch
        self.n_words = int(getattr(self.corpus, "n_words", 0) or 0)
        if config.save_at_words and self.n_words <= 0:
            raise UserError("--save-at-words: this corpus does not know its number of words")
        self.builder = BatchBuilder(
            self.recipe.masking, self.tokenizer.mask_token_id, len(self.tokenizer), self.tokenizer.all_special_ids,
            config.seed,
        )
        self.autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16) if self.device.type == "cuda" and torch.cuda.is_bf16_supported()
            else contextlib.nullcontext()
        )

        # the model: the same initial weights on every process (seeded), then this process's dropout stream
        torch.manual_seed(config.seed)
        from antlm_bench.models import build_model

        self.model = build_model(self.recipe, config.preset, self.tokenizer).to(self.device)
        if self.dist.rank > 0:
            torch.manual_seed(config.seed + 7919 * self.dist.rank)
        self.n_parameters = sum(p.numel() for p in self.model.parameters())
        self.optimizer = _optimizer(self.model, self.recipe, self.device)
        self.step = 0
        self.tokens_seen = 0
        self.elapsed_before = 0.0
        self._claim_output(self._mode == "resume")
        self.resume_from = self._resume(self._points) if self._mode == "resume" else None
        self.model.train()
        loss_module = LossModule(self.model)
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.loss_module: torch.nn.Module = DistributedDataParallel(loss_module, device_ids=ids)
        else:
            self.loss_module = loss_module
        self._orders: dict[int, np.ndarray] = {}
        self._signal: int | None = None  # the first SIGINT / SIGTERM received during the loop
        self.stop_requested = False  # some process received one: stop after the current step

    def _data(self, tokenizer: Any, corpus: Any) -> tuple[Any, Any]:
        if corpus is not None:
            if tokenizer is None:
                raise ValueError("a corpus passed in needs its tokenizer")
            return tokenizer, corpus
        from antlm_bench.data.corpus import default_corpus_dir, prepare_training_data

        folder = self.config.corpus or default_corpus_dir(self.config.data_dir)
        # the main process trains the tokenizer and packs the corpus; the others then read the same cache
        result = None
        if self.dist.main:
            result = prepare_training_data(folder, self.recipe, self.config.preset, self.config.cache_dir,
                                           self.config.max_words)
        self.dist.barrier()
        if not self.dist.main:
            result = prepare_training_data(folder, self.recipe, self.config.preset, self.config.cache_dir,
                                           self.config.max_words)
        return result

    def run(self) -> TrainResult:
        """Train to the end of the schedule (or --max-steps); run.json ends "finished", "stopped", "diverged",
        "failed" or "interrupted", never "running" after the process is gone (kill -9 aside)."""
        try:
            return self._run()
        except TrainingDiverged:
            raise  # _diverged recorded it, with the step
        except BaseException as err:
            if self.dist.main:
                record = self._run_record("interrupted" if isinstance(err, KeyboardInterrupt) else "failed")
                record["error"] = f"{type(err).__name__}: {_first_line(err)}"
                with contextlib.suppress(OSError):  # a full disk must not hide the error that brought us here
                    write_json_atomic(self.output / RUN_FILE, record)
            raise

    def _run(self) -> TrainResult:
        config = self.config
        reporters = _Reporters(config.report_to, self.output, self._run_record("running")) if self.dist.main else None
        if self.dist.main:
            write_json_atomic(self.output / RUN_FILE, self._run_record("running"))
        self._truncate_metrics()
        for folder in self._missing_evals():
            self._evaluate(folder)
        self.dist.barrier()
        stop_at = min(self.total_steps, config.max_steps) if config.max_steps else self.total_steps
        losses: list[float] = []
        progress = self._progress(stop_at)
        self._start_time = self._last_save_time = time.perf_counter()
        self._tokens_at_start = self.tokens_seen
        self._say(self._plan_text())
        prefetch = ThreadPoolExecutor(max_workers=1)
        pending = prefetch.submit(self._build, self.step) if self.step < stop_at else None
        scheduler, scheduler_phase = None, -1
        previous_handlers = self._catch_signals()
        try:
            while self.step < stop_at:
                plan = self._plan_at(self.step)
                if scheduler_phase != plan.index:
                    scheduler, scheduler_phase = self._enter_phase(plan), plan.index
                assert pending is not None and scheduler is not None
                batch = pending.result()
                pending = prefetch.submit(self._build, self.step + 1) if self.step + 1 < stop_at else None
                lr = self.optimizer.param_groups[0]["lr"]
                loss, grad_norm, by_time = self._train_step(batch, self._save_due_by_time())
                if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                    self._diverged(plan, loss, grad_norm)
                self.optimizer.step()
                scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.step += 1
                self._tokens_before = self.tokens_seen
                self.tokens_seen += len(batch) * self.seq_len
                losses.append(loss)
                info = self._step_info(plan, batch.objective, loss, lr, grad_norm)
                self._log(info, reporters, progress)
                saved = self._checkpoint_after_step(plan, by_time, stop_at)
                for callback in self.callbacks:
                    callback(info)
                if self._stopping() and self.step < stop_at:  # SIGINT / SIGTERM: this step is done, keep it
                    if not saved:
                        self._save_last(plan, self.step == plan.end_step,
                                        self.elapsed_before + time.perf_counter() - self._start_time)
                    raise TrainingInterrupted(self._signal or signal.SIGTERM, self.step)
        finally:
            self._restore_signals(previous_handlers)
            prefetch.shutdown(wait=True, cancel_futures=True)
            if progress is not None:
                progress.stop()
            if reporters is not None:
                reporters.close()
        return self._finish(losses)

    def _save_due_by_time(self) -> bool:
        """A wall-clock trigger is the main process's to decide; the others learn of it in the all-reduce."""
        minutes = self.config.save_every_minutes
        return (self.dist.main and bool(minutes)
                and time.perf_counter() - self._last_save_time >= 60 * minutes)  # type: ignore[operator]

    def _finish(self, losses: list[float]) -> TrainResult:
        finished = self.step >= self.total_steps
        if self.dist.main:
            write_json_atomic(self.output / RUN_FILE, self._run_record("finished" if finished else "stopped"))
        final = self.output / CHECKPOINTS / self.plans[-1].folder_name
        self.dist.barrier()
        self.dist.close()
        return TrainResult(self.output, final if finished else None, self.step, losses, stopped_early=not finished)

    def _diverged(self, plan: PhasePlan, loss: float, grad_norm: float) -> None:
        what = f"loss {loss}" if not math.isfinite(loss) else f"gradient norm {grad_norm}"
        last = self.output / LAST
        kept = f"the last good checkpoint is {last} (step {json.loads((last / 'antlm_state.json').read_text())['step']})" \
            if (last / "antlm_state.json").is_file() else "no checkpoint was saved before it"
        if self.dist.main:
            record = self._run_record("diverged")
            record["diverged_at_step"] = self.step + 1
            write_json_atomic(self.output / RUN_FILE, record)
        raise TrainingDiverged(
            f"{what} at step {self.step + 1} (phase {plan.index} {plan.phase.label}, epoch "
            f"{(self.step + 1) / self.steps_per_epoch:.2f}); training stopped and {kept}; lower the learning rate "
            "or check the data, then --resume"
        )


def train(config: TrainConfig, **kwargs: Any) -> TrainResult:
    """Train ``config.model`` at ``config.preset`` through its schedule (see the module docstring); ``kwargs`` go to
    ``Trainer`` (``scorer=``, ``console=``, ``callbacks=``, ``tokenizer=`` and ``corpus=``).

    The main process holds the run folder's lock throughout (``antlm_bench.locking``): a second ``train`` or
    ``run`` into the same folder is refused at once, naming this pid, and a failure that leaves the folder this
    call created empty removes it. Other DDP processes (``RANK`` > 0) do not take it: they share the run.
    """
    from antlm_bench.results.store import output_folder

    if int(os.environ.get("RANK", "0") or 0) != 0:
        return Trainer(config, **kwargs).run()
    with output_folder(config.output, "train"):
        return Trainer(config, **kwargs).run()

