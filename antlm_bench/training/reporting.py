"""What a run tells: the plan and phase lines, the progress bar, one metrics.jsonl line per step, TensorBoard / W&B
(main process only), run.json, and ``--eval-every``: each new checkpoint scored with its phase's own method, its rows
committed to the run folder's store (the paper's Figure 2 data).

The scoring itself is the caller's (``PhaseScorer``, given a ``ScoreRequest``): training imports no evaluation code.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from rich.console import Console

from antlm_bench import __version__
from antlm_bench.clock import utc_stamp
from antlm_bench.data import atomic_write_bytes
from antlm_bench.data.files import append_bytes, read_regular_file
from antlm_bench.errors import UserError
from antlm_bench.locking import fault_point
from antlm_bench.progress import ELAPSED, REMAINING, Bar, progress_bar, progress_line
from antlm_bench.results.store import commit_results, read_results_folder
from antlm_bench.results.tables import append_index
from antlm_bench.runs.layout import RunLayout
from antlm_bench.runs.record import CheckpointRecord, read_record
from antlm_bench.runs.run_file import RUN_SCHEMA_VERSION, RunRecord, TrainSettings
from antlm_bench.training.checkpointer import RunFacts
from antlm_bench.training.plan import PhasePlan
from antlm_bench.training.step import Dist

if TYPE_CHECKING:  # the trainer builds the reporter
    from antlm_bench.config import TrainConfig

# the training bar's columns and, off a terminal, its line (progress.progress_bar)
BAR_COLUMNS = ("{task.fields[phase]}", Bar(24), "step {task.completed}/{task.total}", "epoch {task.fields[epoch]}",
               "loss {task.fields[loss]}", "{task.fields[speed]} tok/s", ELAPSED, "ETA", REMAINING)
PLAIN_LINE = ("step {task.completed}/{task.total} ({task.fields[phase]}), epoch {task.fields[epoch]}, loss "
              "{task.fields[loss]}, {task.fields[speed]} tok/s, about {left} left")


@dataclass(frozen=True)
class ScoreRequest:
    """What ``--eval-every`` asks a scorer for: the rows of one checkpoint, scored with its phase's method."""

    model: Any  # the trainer's model, in eval mode; its weights are the checkpoint's
    tokenizer: Any
    folder: Path  # the checkpoint folder
    name: str  # the checkpoint as the rows name it: its path in the run folder (checkpoints/phase-1-MLM)
    record: CheckpointRecord  # the checkpoint's record (its antlm_state.json)
    run_id: str  # the run folder's name
    tasks: str  # scored with the phase's own method (``--scoring auto``: the record decides)
    limit: int | None
    device: str
    data_dir: Path | None
    convention: str
    fast: bool  # the BabyLM 2025 fast suite (--eval-every words)


class PhaseScorer(Protocol):
    """Scores a checkpoint for ``--eval-every``: returns its rows, an Arrow table of ``SCORE_SCHEMA`` (the trainer
    commits them to the run folder's store and prints the task aggregates). The caller supplies it (``train`` and
    ``run`` pass ``antlm_bench.pipeline.score_checkpoint``): training imports no evaluation code."""

    def __call__(self, request: ScoreRequest) -> Any: ...


@dataclass
class StepInfo:
    """What callbacks receive after every optimizer step."""

    step: int  # global steps done
    phase_index: int
    objective: str  # the objective this step trained (BATCHMIX: the one drawn; MIX: "MIX", every part of it)
    epoch: float
    loss: float
    lr: float
    grad_norm: float
    tokens_seen: int
    tokens_per_s: float



class _Reporters:
    """Optional TensorBoard / W&B, on the main process only."""

    @staticmethod
    def check_installed(kinds: list[str]) -> None:
        for kind, module in (("tensorboard", "torch.utils.tensorboard"), ("wandb", "wandb")):
            if kind in kinds:
                try:
                    importlib.import_module(module)
                except ImportError:
                    raise UserError(f"--report-to {kind}: the {kind} package is not installed; pip install {kind}, "
                                    "or drop the option") from None

    def __init__(self, kinds: list[str], layout: RunLayout, run_record: RunRecord) -> None:
        self.tb = None
        self.wandb = None
        self.check_installed(kinds)
        if "tensorboard" in kinds:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=str(layout.tensorboard_dir))
        if "wandb" in kinds:
            import wandb

            self.wandb = wandb.init(project=os.environ.get("WANDB_PROJECT", "antlm-bench"), dir=str(layout.folder),
                                    name=layout.folder.name, config=run_record.model_dump(mode="json"),
                                    resume="allow")

    def log(self, info: StepInfo) -> None:
        scalars = {"loss": info.loss, "lr": info.lr, "grad_norm": info.grad_norm, "epoch": info.epoch,
                   "tokens_per_s": info.tokens_per_s, f"loss_{info.objective}": info.loss}
        if self.tb is not None:
            for key, value in scalars.items():
                self.tb.add_scalar(f"train/{key}", value, info.step)
        if self.wandb is not None:
            self.wandb.log({f"train/{k}": v for k, v in scalars.items()}, step=info.step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()



class Reporter:
    """What the run tells, on the main process: the plan and phase lines, progress, metrics.jsonl, TensorBoard /
    W&B, run.json, and the per-phase scores of the checkpoints ``--eval-every`` asks for."""

    def __init__(self, config: TrainConfig, facts: RunFacts, layout: RunLayout, dist: Dist, console: Console | None,
                 scorer: PhaseScorer | None, model: torch.nn.Module, tokenizer: Any, device: torch.device,
                 n_parameters: int, micro_batch: int) -> None:
        if config.eval_every != "none" and scorer is None:
            raise ValueError(f"eval_every={config.eval_every} scores checkpoints: pass the scorer (PhaseScorer), "
                             "e.g. antlm_bench.pipeline.score_checkpoint")
        self.config = config
        self.facts = facts
        self.layout = layout
        self.dist = dist
        self.console = console
        self.scorer = scorer
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.n_parameters = n_parameters
        self.micro_batch = micro_batch
        self._progress: Any = None
        self._task: Any = None
        self._reporters: _Reporters | None = None

    def say(self, message: str) -> None:
        if self.console is not None and self.dist.main:
            progress_line(message, self.console)

    def plan_text(self) -> str:
        facts = self.facts
        total = facts.plans[-1].end_step
        return (f"{facts.identity.recipe} ({facts.identity.preset}, {self.n_parameters / 1e6:.2f}M parameters) on "
                f"{self.device}, {self.dist.world} process(es): {facts.n_sequences} sequences of {facts.seq_len} "
                f"tokens, global batch {facts.global_batch} (micro {self.micro_batch}), {facts.steps_per_epoch} steps "
                f"per epoch; schedule {facts.identity.schedule}, {total} steps; precision {facts.precision.name} "
                f"({facts.precision.reason})")

    def phase_text(self, plan: PhasePlan, step: int) -> str:
        done = step - plan.start_step
        policy = self.facts.preset.recipe.optimizer_at_phase
        return (f"phase {plan.index}/{len(self.facts.plans) - 1} {plan.phase.label}: {plan.n_steps} steps"
                + (f" (resuming after {done})" if done else "") + (f", optimizer {policy}" if plan.index else "")
                + f", {plan.phase.attention_mode} attention, lr {plan.lr.spec.describe()}")

    # -- the run's life: start, steps, end -------------------------------------------------------------------------

    def start(self, step: int, stop_at: int) -> None:
        """run.json says "running"; metric lines past ``step`` go; the progress bar and reporters start."""
        if not self.dist.main:
            return
        record = self.run_record("running", step)
        self.write_run_file(record)
        self._truncate_metrics(step)
        self._reporters = _Reporters(self.config.report_to, self.layout, record)
        self._progress = progress_bar(*BAR_COLUMNS, console=self.console, enabled=self.config.progress,
                                      plain_line=PLAIN_LINE)
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task("train", total=stop_at, completed=step, phase="", epoch="-",
                                                 loss="-", speed="-")

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self._reporters is not None:
            self._reporters.close()
            self._reporters = None

    def log(self, info: StepInfo) -> None:
        if not self.dist.main:
            return
        record = {"step": info.step, "phase_index": info.phase_index, "objective": info.objective,
                  "epoch": round(info.epoch, 6), "loss": info.loss, "lr": info.lr, "grad_norm": info.grad_norm,
                  "tokens_seen": info.tokens_seen, "words_seen": self.facts.words_seen(info.tokens_seen),
                  "tokens_per_s": round(info.tokens_per_s, 1),
                  # CPU seconds of this process so far, every thread, setup included (a resume restarts the count):
                  # what a CPU-budget study charges a checkpoint (benchmarks/learning_curve.py)
                  "process_cpu_s": round(time.process_time(), 2)}
        if info.objective == "MIX":  # the loss of a MIX step is the recipe's weighting of its objectives' losses
            record["mix_loss"] = self.facts.preset.recipe.mix_loss
        # one write of one short line: never interleaved, never half a record, never through a planted link
        append_bytes(self.layout.metrics_file, (json.dumps(record) + "\n").encode())
        if self._reporters is not None:
            self._reporters.log(info)
        if self._progress is not None:
            plan = self.facts.plans[info.phase_index]
            self._progress.update(self._task, completed=info.step, epoch=f"{info.epoch:.2f}", loss=f"{info.loss:.4f}",
                                  speed=f"{info.tokens_per_s:,.0f}",
                                  phase=f"phase {plan.index}/{len(self.facts.plans) - 1} {info.objective}")

    def _truncate_metrics(self, step: int) -> None:
        """Drop metric lines past the resume point (and a half-written or damaged line), so the log tells one
        story."""
        path = self.layout.metrics_file
        if not os.path.lexists(path):
            return
        kept = []
        text = read_regular_file(path, fix="the run folder is damaged: remove it, or train into a new --output")
        for line in text.decode("utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] <= step:
                kept.append(line)
        atomic_write_bytes(path, ("\n".join(kept) + "\n").encode() if kept else b"")

    def run_record(self, status: str, step: int) -> RunRecord:
        facts, config = self.facts, self.config
        identity, recipe = facts.identity, facts.preset.recipe
        return RunRecord(
            schema_version=RUN_SCHEMA_VERSION, status=status, recipe=identity.recipe,  # type: ignore[arg-type]
            preset=identity.preset, architecture=recipe.architecture, schedule=identity.schedule,
            seed=identity.seed, label=identity.label,
            config=TrainSettings.model_validate(json.loads(config.model_dump_json())),
            n_parameters=self.n_parameters, n_sequences=facts.n_sequences, seq_len=facts.seq_len,
            n_words=facts.n_words or None, global_batch_size=facts.global_batch, micro_batch_size=self.micro_batch,
            steps_per_epoch=facts.steps_per_epoch, total_steps=facts.plans[-1].end_step,
            world_size=facts.world_size, device=str(self.device), precision=facts.precision.name,  # type: ignore[arg-type]
            precision_reason=facts.precision.reason, data_hash=facts.data_hash, tokenizer_hash=facts.tokenizer_hash,
            training_fingerprint=facts.training_fingerprint, config_fingerprint=facts.config_fingerprint,
            phases=[{"index": p.index, "objective": p.phase.label, "epochs": p.phase.epochs, "steps": p.n_steps,
                     "lr_schedule": p.lr.spec.describe()} for p in facts.plans],
            masking=recipe.masking.strategy, optimizer_at_phase=recipe.optimizer_at_phase,
            mix_loss=recipe.mix_loss, step=step, package_version=__version__, updated_at=utc_stamp(),
        )

    def write_run_file(self, record: RunRecord) -> None:
        """run.json's one writer (runs.run_file): the record, validated as every reader reads it."""
        if self.dist.main:
            # atomic_write_bytes gives the file the umask's mode, as every other file the run writes
            atomic_write_bytes(self.layout.run_file, RunRecord.model_validate(record.model_dump()).to_bytes())

    # -- per-phase scores ------------------------------------------------------------------------------------------

    def score(self, folder: Path) -> None:
        """Score a checkpoint with its phase's own method; its rows replace any earlier rows of that checkpoint."""
        if self.dist.main:
            assert self.scorer is not None  # the constructor refuses --eval-every without one
            record = read_record(folder)
            assert record is not None  # the trainer wrote it
            name = str(folder.relative_to(self.layout.folder))
            self.model.eval()
            try:
                scores = self.scorer(self._score_request(folder, name, record))
            finally:
                self.model.train()
            method = ",".join(sorted(set(scores.column("scoring").to_pylist()))) or "none"
            # one event of the run folder's store, committed with one rename; a re-scored checkpoint's newer
            # event replaces its rows when read (no read-modify-write of the scores here)
            event = commit_results(self.layout.folder, scores, None, {
                "kind": "phase-score", "checkpoint": name, "scoring": method, "tasks": self.config.eval_tasks,
                "limit": self.config.eval_limit, "step": record.step, "epoch": record.epoch})
            fault_point("train.index")
            append_index(self.layout.folder, {"checkpoint": name, "scores": self.layout.scores.name,
                                              "scoring": method, "event": event, "tasks": self.config.eval_tasks,
                                              "step": record.step, "epoch": record.epoch, "created_at": utc_stamp()})
            aggregate = [r for r in scores.to_pylist() if r["subtask"] == "" and r["metric"] == "accuracy"]
            shown = ", ".join(f"{r['task']} {r['value']:.3f}" for r in aggregate)
            self.say(f"scored {name} with {method}: {shown}")
        self.dist.barrier()

    def _score_request(self, folder: Path, name: str, record: CheckpointRecord) -> ScoreRequest:
        config = self.config
        return ScoreRequest(model=self.model, tokenizer=self.tokenizer, folder=folder, name=name, record=record,
                            run_id=self.layout.folder.name, tasks=config.eval_tasks,
                            limit=config.eval_limit, device=str(self.device), data_dir=config.data_dir,
                            convention=config.convention, fast=config.eval_every == "words")

    def unscored_checkpoints(self) -> list[Path]:
        """Checkpoints an interrupted run saved but never scored (resume scores them first)."""
        if self.config.eval_every == "none" or not self.dist.main:
            return []
        prefix = {"phase": "phase-", "epoch": "epoch-", "words": "chck_"}[self.config.eval_every]
        folders = self.layout.saved_checkpoints(prefix)
        done: set[str] = set()
        if self.layout.scores.exists():
            scores = read_results_folder(self.layout.folder, with_items=False).scores
            done = set(scores.column("checkpoint").to_pylist())
        return [f for f in folders if str(f.relative_to(self.layout.folder)) not in done]


def read_metrics(output: str | Path) -> list[dict[str, Any]]:
    """A run's metrics.jsonl, one dict a line; a line that is no JSON object is one line naming ``file:line``."""
    from antlm_bench.data.readers import parse_jsonl_lines, read_text

    path = RunLayout(Path(output)).metrics_file
    return list(parse_jsonl_lines(read_text(path, "the run folder is damaged", follow_links=False).splitlines(),
                                  str(path)))
