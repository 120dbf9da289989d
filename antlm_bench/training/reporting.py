"""What a run tells: the progress bar and plan line, one metrics.jsonl line per step, TensorBoard / W&B (main
process only), run.json, and ``--eval-every``: each new checkpoint scored with its phase's own method, its rows
committed to the run folder's store (the paper's Figure 2 data).

The scoring itself is the caller's (``PhaseScorer``, given a ``ScoreRequest``): training imports no evaluation
code. Without one, the top layer's default is looked up by name when a checkpoint is first scored
(``DEFAULT_SCORER``: ``antlm_bench.pipeline.score_checkpoint``, ``antlm_bench.evaluate`` on the in-memory model).
"""

from __future__ import annotations

import importlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow.parquet as pq

from antlm_bench import __version__
from antlm_bench.errors import UserError
from antlm_bench.runs.record import auto_scoring_method
from antlm_bench.training.checkpoints import CHECKPOINTS, METRICS_FILE, SCORES, _now
from antlm_bench.training.lr_schedules import describe
from antlm_bench.training.plan import PhasePlan

# the scorer --eval-every uses when the caller passes none: the top layer's, found by name when first needed
DEFAULT_SCORER = ("antlm_bench.pipeline", "score_checkpoint")


@dataclass(frozen=True)
class ScoreRequest:
    """What ``--eval-every`` asks a scorer for: the rows of one checkpoint, scored with its phase's method."""

    model: Any  # the trainer's model, in eval mode; its weights are the checkpoint's
    tokenizer: Any
    folder: Path  # the checkpoint folder (its antlm_state.json record)
    tasks: str
    scoring: str  # the phase's method: clm, pll or mntp
    limit: int | None
    device: str
    data_dir: Path | None
    run_info: Any  # results.tables.RunInfo: the run columns of every row
    checkpoint_info: Any  # results.tables.CheckpointInfo: the checkpoint columns
    seed: int
    convention: str
    fast: bool  # the BabyLM 2025 fast suite (--eval-every words)


class PhaseScorer(Protocol):
    """Scores a checkpoint for ``--eval-every``: returns its rows, an Arrow table of ``SCORE_SCHEMA`` (the trainer
    commits them to the run folder's store and prints the task aggregates)."""

    def __call__(self, request: ScoreRequest) -> Any: ...


def default_scorer() -> PhaseScorer:
    module, name = DEFAULT_SCORER
    return getattr(importlib.import_module(module), name)


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

    def __init__(self, kinds: list[str], output: Path, run_record: dict[str, Any]) -> None:
        self.tb = None
        self.wandb = None
        self.check_installed(kinds)
        if "tensorboard" in kinds:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=str(output / "tensorboard"))
        if "wandb" in kinds:
            import wandb

            self.wandb = wandb.init(project=os.environ.get("WANDB_PROJECT", "antlm-bench"), dir=str(output),
                                    name=output.name, config=run_record, resume="allow")

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



class Reporting:
    """Progress, metrics, run records and per-phase scoring (mixed into ``Trainer``)."""

    config: Any
    console: Any
    scorer: PhaseScorer | None
    output: Path
    dist: Any
    recipe: Any
    schedule: Any
    corpus: Any
    tokenizer: Any
    model: Any
    device: Any
    plans: list[PhasePlan]
    step: int
    tokens_seen: int
    n_parameters: int
    n_sequences: int
    seq_len: int
    global_batch: int
    micro_batch: int
    steps_per_epoch: int
    total_steps: int
    _start_time: float
    _tokens_at_start: int

    def _say(self, message: str) -> None:
        if self.console is not None and self.dist.main:
            self.console.print(message, highlight=False, markup=False)

    def _plan_text(self) -> str:
        return (f"{self.recipe.name} ({self.config.preset}, {self.n_parameters / 1e6:.2f}M parameters) on "
                f"{self.device}, {self.dist.world} process(es): {self.n_sequences} sequences of {self.seq_len} "
                f"tokens, global batch {self.global_batch} (micro {self.micro_batch}), {self.steps_per_epoch} steps "
                f"per epoch; schedule {self.schedule.canonical}, {self.total_steps} steps")

    def _progress(self, stop_at: int):
        if not (self.config.progress and self.dist.main):
            return None
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        progress = Progress(
            TextColumn("{task.fields[phase]}"), BarColumn(bar_width=24), TextColumn("step {task.completed}/{task.total}"),
            TextColumn("epoch {task.fields[epoch]}"), TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[speed]} tok/s"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=self.console, transient=False,
        )
        progress.start()
        self._task = progress.add_task("train", total=stop_at, completed=self.step, phase="", epoch="-", loss="-",
                                       speed="-")
        return progress

    def _log(self, info: StepInfo, reporters: _Reporters | None, progress) -> None:
        if not self.dist.main:
            return
        record = {"step": info.step, "phase_index": info.phase_index, "objective": info.objective,
                  "epoch": round(info.epoch, 6), "loss": info.loss, "lr": info.lr, "grad_norm": info.grad_norm,
                  "tokens_seen": info.tokens_seen, "words_seen": self.words_seen(info.tokens_seen),  # type: ignore[attr-defined]
                  "tokens_per_s": round(info.tokens_per_s, 1)}
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(self.output / METRICS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write of one short line: never interleaved, never half a record
        finally:
            os.close(fd)
        if reporters is not None:
            reporters.log(info)
        if progress is not None:
            plan = self.plans[info.phase_index]
            progress.update(self._task, completed=info.step, epoch=f"{info.epoch:.2f}", loss=f"{info.loss:.4f}",
                            speed=f"{info.tokens_per_s:,.0f}",
                            phase=f"phase {plan.index}/{len(self.plans) - 1} {info.objective}")

    def _truncate_metrics(self) -> None:
        """Drop metric lines past the resume point (and a half-written last line), so the log tells one story."""
        path = self.output / METRICS_FILE
        if not self.dist.main or not path.exists():
            return
        kept = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("step", 0) <= self.step:
                kept.append(line)
        from antlm_bench.data import atomic_write_bytes

        atomic_write_bytes(path, ("\n".join(kept) + "\n").encode() if kept else b"")

    def _run_record(self, status: str) -> dict[str, Any]:
        return {
            "status": status, "recipe": self.recipe.name, "preset": self.config.preset,
            "architecture": self.recipe.architecture, "schedule": self.schedule.canonical, "seed": self.config.seed,
            "config": json.loads(self.config.model_dump_json()), "n_parameters": self.n_parameters,
            "n_sequences": self.n_sequences, "seq_len": self.seq_len, "n_words": getattr(self.corpus, "n_words", None),
            "global_batch_size": self.global_batch, "micro_batch_size": self.micro_batch,
            "steps_per_epoch": self.steps_per_epoch, "total_steps": self.total_steps, "world_size": self.dist.world,
            "device": str(self.device), "autocast": "bf16" if self.device.type == "cuda" else "none (float32)",
            "data_hash": self.corpus.data_hash, "tokenizer_hash": self.corpus.tokenizer_hash,
            "phases": [{"index": p.index, "objective": p.phase.label, "epochs": p.phase.epochs, "steps": p.n_steps,
                        "lr_schedule": describe(p.lr.spec)} for p in self.plans],
            "optimizer_at_phase": self.recipe.optimizer_at_phase,
            "step": self.step, "package_version": __version__, "updated_at": _now(),
        }

    def _evaluate(self, folder: Path) -> None:
        """Score a checkpoint with its phase's own method; its rows replace any earlier rows of that checkpoint."""
        if self.dist.main:
            from antlm_bench.locking import fault_point
            from antlm_bench.results.store import commit_results
            from antlm_bench.results.tables import append_index
            from antlm_bench.runs.record import read_state

            state = read_state(folder)
            method, _ = auto_scoring_method(state, is_masked_lm=False)
            name = str(folder.relative_to(self.output))
            self.model.eval()
            try:
                scores = self._scorer()(self._score_request(folder, name, state, method))
            finally:
                self.model.train()
            # one event of the run folder's store, committed with one rename; a re-scored checkpoint's newer
            # event replaces its rows when read (no read-modify-write of the scores here)
            event = commit_results(self.output, scores, None, {
                "kind": "phase-score", "checkpoint": name, "scoring": method, "tasks": self.config.eval_tasks,
                "limit": self.config.eval_limit, "step": state["step"], "epoch": state["epoch"]})
            fault_point("train.index")
            append_index(self.output, {"checkpoint": name, "scores": SCORES, "scoring": method, "event": event,
                                       "tasks": self.config.eval_tasks, "step": state["step"],
                                       "epoch": state["epoch"], "created_at": _now()})
            aggregate = [r for r in scores.to_pylist() if r["subtask"] == "" and r["metric"] == "accuracy"]
            shown = ", ".join(f"{r['task']} {r['value']:.3f}" for r in aggregate)
            self._say(f"scored {name} with {method}: {shown}")
        self.dist.barrier()

    def _scorer(self) -> PhaseScorer:
        if self.scorer is None:
            self.scorer = default_scorer()
        return self.scorer

    def _score_request(self, folder: Path, name: str, state: dict[str, Any], method: str) -> ScoreRequest:
        from antlm_bench.results.tables import CheckpointInfo, RunInfo

        config = self.config
        run = RunInfo(run_id=self.output.name, recipe=self.recipe.name, architecture=self.recipe.architecture,
                      preset=config.preset, schedule=self.schedule.canonical, seed=config.seed,
                      data_hash=self.corpus.data_hash)
        checkpoint = CheckpointInfo(checkpoint=name, phase_index=state["phase_index"],
                                    phase_objective=state["phase_objective"], epoch=state["epoch"],
                                    tokens_seen=state["tokens_seen"], words_seen=state.get("words_seen"))
        return ScoreRequest(model=self.model, tokenizer=self.tokenizer, folder=folder, tasks=config.eval_tasks,
                            scoring=method, limit=config.eval_limit, device=str(self.device), data_dir=config.data_dir,
                            run_info=run, checkpoint_info=checkpoint, seed=config.seed, convention=config.convention,
                            fast=config.eval_every == "words")

    def _missing_evals(self) -> list[Path]:
        """Checkpoints an interrupted run saved but never scored (resume scores them first)."""
        if self.config.eval_every == "none" or not self.dist.main:
            return []
        kind = {"phase": "phase-*", "epoch": "epoch-*", "words": "chck_*"}[self.config.eval_every]
        folders = sorted((self.output / CHECKPOINTS).glob(kind)) if (self.output / CHECKPOINTS).is_dir() else []
        done: set[str] = set()
        if (self.output / SCORES).exists():
            done = set(pq.read_table(self.output / SCORES, columns=["checkpoint"])["checkpoint"].to_pylist())
        return [f for f in folders if f.is_dir() and not f.name.startswith(".") and
                str(f.relative_to(self.output)) not in done]

    def _step_info(self, plan: PhasePlan, objective: str, loss: float, lr: float, grad_norm: float) -> StepInfo:
        speed = (self.tokens_seen - self._tokens_at_start) / max(time.perf_counter() - self._start_time, 1e-9)
        return StepInfo(self.step, plan.index, objective, self.step / self.steps_per_epoch, loss, lr, grad_norm,
                        self.tokens_seen, speed)


def read_metrics(output: str | Path) -> list[dict[str, Any]]:
    path = Path(output) / METRICS_FILE
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
