"""The phase trainer: one model, a schedule of objectives, checkpoints you can resume bit for bit.

    result = train(TrainConfig(model="antlm-babyllama", preset="tiny", output="runs/x"))

The loop, top to bottom (``Trainer.run``):

1. The schedule becomes a plan of global steps: an epoch is ``ceil(N_sequences / global_batch)`` steps, a phase
   ends at step ``round(cumulative epochs * steps_per_epoch)`` (half up; at least one step each), so fractional
   phases add up exactly. Step ``g`` reads the rows ``g % steps_per_epoch`` of
   epoch ``g // steps_per_epoch``'s permutation, seeded by (seed, epoch): a fractional phase continues where the
   last one stopped, and the order depends on nothing but the seed.
2. Each step builds the WHOLE global batch for its objective (``objectives.BatchBuilder``; masks keyed by
   (seed, step)), takes this process's rows, and runs them in micro-batches: gradients accumulate, scaled so that
   the step's gradient is the mean over every labelled token of the global batch, whatever the micro-batch size or
   the number of processes. Under DDP (``torchrun``) gradients are all-reduced at the last micro-batch only.
3. A non-finite loss or gradient norm stops the run before the optimizer moves (``TrainingDiverged``); the last
   checkpoint stays as it was. Otherwise: clip, AdamW, the phase's LR schedule (restarted at every phase; AdamW's
   moments too where the recipe says ``optimizer_at_phase: reset``).
4. Checkpoints: ``checkpoints/phase-<k>-<OBJ>`` at every phase end (``epoch-<e>`` with ``--save-every-epoch`` or
   ``--eval-every epoch``), the resume point ``last`` every ``--save-every-steps`` / ``--save-every-minutes`` and at
   every phase end. ``--eval-every`` scores the new checkpoint with the phase's own method and appends the rows to
   ``scores.parquet`` (the paper's Figure 2 data).

Resume: weights, optimizer, scheduler position and every process's RNG state come back from ``last``; the data
order and the masks are functions of (seed, step), so a resumed run computes exactly what the uninterrupted run
computed. bf16 autocast is used on CUDA only; on CPU everything is float32.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as _dt
import importlib
import json
import math
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow.parquet as pq
import torch
import torch.distributed as dist
from pydantic import BaseModel, ConfigDict, Field

from antlm_bench import __version__
from antlm_bench.checkpoint import (
    LAST,
    RESUME_DIR,
    describe_last,
    load_weights,
    read_trainer_state,
    resume_points,
    write_checkpoint,
    write_json_atomic,
    write_resume_point,
)
from antlm_bench.checkpoint_state import auto_scoring_method
from antlm_bench.errors import DivergedError, UserError
from antlm_bench.lr_schedules import PhaseLR, build_phase_lr, describe, phase_scheduler
from antlm_bench.objectives import Batch, BatchBuilder, LossModule, MixedBatch, draw_mix_objective
from antlm_bench.recipes import Recipe, load_recipe
from antlm_bench.schedule import Phase, Schedule, format_number, parse_schedule, phase_end_steps

RUN_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
SCORES = "scores.parquet"
_RUN_ITEMS = (RUN_FILE, METRICS_FILE, CHECKPOINTS, SCORES, LAST, RESUME_DIR, "index.jsonl", "tensorboard")
# what a run folder holds that a restart must never delete: finished checkpoints and the scores of checkpoints
_KEEP_ITEMS = (CHECKPOINTS, SCORES, "index.jsonl")
# a plan longer than this is a typo (1000000000000_MLM), refused before anything is built; 1000x the paper's run
MAX_TOTAL_STEPS = 100_000_000
_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


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
    eval_every: Literal["none", "phase", "epoch"] = "none"
    eval_tasks: str = "blimp"
    eval_limit: int | None = Field(None, gt=0)
    convention: Literal["babylm-2025", "babylm-2024"] = "babylm-2025"  # scoring convention of --eval-every
    save_every_steps: int | None = Field(None, gt=0)
    save_every_minutes: float | None = Field(30.0, gt=0)
    save_every_epoch: bool = False
    micro_batch_size: int | None = Field(None, gt=0)  # default: the preset's
    max_steps: int | None = Field(None, gt=0)  # stop after this many global steps (smoke runs, benchmarks)
    device: str = "auto"
    deterministic: bool = False  # torch.use_deterministic_algorithms (bit-exact reruns; slower on GPU)
    report_to: list[Literal["tensorboard", "wandb"]] = Field(default_factory=list)
    progress: bool = True


@dataclass
class PhasePlan:
    index: int
    phase: Phase
    start_step: int  # global step where the phase begins
    n_steps: int
    lr: PhaseLR

    @property
    def end_step(self) -> int:
        return self.start_step + self.n_steps

    @property
    def folder_name(self) -> str:
        return f"phase-{self.index}-{self.phase.objective}"


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


@dataclass
class TrainResult:
    output: Path
    final_checkpoint: Path | None
    steps: int
    losses: list[float] = field(default_factory=list)  # of the steps this process ran (not the resumed ones)
    stopped_early: bool = False


def plan_phases(schedule: Schedule, recipe: Recipe, steps_per_epoch: int) -> list[PhasePlan]:
    """Each phase's steps and LR layout; a schedule of more than ``MAX_TOTAL_STEPS`` steps on this corpus is
    refused first, from the phases' epochs alone (the layouts never list a phase's steps, so no plan is big)."""
    phases = check_plan_size(schedule, steps_per_epoch)
    plans, start = [], 0
    for index, (phase, end) in enumerate(zip(phases, phase_end_steps(phases, steps_per_epoch))):
        n_steps = end - start
        spec = recipe.lr_schedule(phase.dominant_objective)
        plans.append(PhasePlan(index, phase, start, n_steps, build_phase_lr(spec, n_steps, steps_per_epoch)))
        start += n_steps
    return plans


def check_plan_size(schedule: Schedule, steps_per_epoch: int | None) -> list[Phase]:
    """The schedule's phases, if its plan stays within ``MAX_TOTAL_STEPS``. ``steps_per_epoch=None``: before the
    corpus is read, on the least any corpus gives (one step per epoch), so an absurd schedule is refused at once,
    before the corpus is read or the tokenizer trained."""
    phases = schedule.phases  # at most schedule.MAX_PHASES: the parser counts before it expands
    per_epoch = 1 if steps_per_epoch is None else steps_per_epoch
    total = math.fsum(phase.epochs for phase in phases) * per_epoch
    if not total <= MAX_TOTAL_STEPS:
        shown = schedule.canonical if len(schedule.canonical) <= 80 else schedule.canonical[:60] + "..."
        where = ("at least one step per epoch on any corpus" if steps_per_epoch is None
                 else f"{steps_per_epoch} per epoch on this corpus")
        raise UserError(f"schedule {shown!r}: {total:,.0f} optimizer steps ({where}); the limit is "
                        f"{MAX_TOTAL_STEPS:,}; give fewer epochs")
    return phases


def epoch_order(seed: int, epoch: int, n_sequences: int) -> np.ndarray:
    """The permutation of the corpus for one epoch: a pure function of (seed, epoch)."""
    return np.random.default_rng([int(seed), int(epoch), 0xDA7A]).permutation(n_sequences)


def _split_rows(n_rows: int, parts: int) -> list[np.ndarray]:
    return np.array_split(np.arange(n_rows), parts)


class _Dist:
    """The process group, if ``torchrun`` / ``accelerate launch`` started us in one."""

    def __init__(self, device_kind: str) -> None:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        self.started_here = False
        if world > 1 and not dist.is_initialized():
            backend = "nccl" if device_kind == "cuda" else "gloo"
            dist.init_process_group(backend=backend, timeout=_dt.timedelta(hours=2))
            self.started_here = True
        self.enabled = dist.is_initialized() and dist.get_world_size() > 1
        self.rank = dist.get_rank() if self.enabled else 0
        self.world = dist.get_world_size() if self.enabled else 1
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def gather(self, obj: Any) -> list[Any]:
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def close(self) -> None:
        if self.started_here and dist.is_initialized():
            dist.destroy_process_group()


def check_device(name: str) -> str:
    """``--device`` as given, if torch can use it here: auto, cpu, mps, cuda or cuda:N."""
    if not _DEVICE.fullmatch(name):
        raise UserError(f"--device {name}: unknown; use auto, cpu, cuda or cuda:N")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
    if name.startswith("cuda:") and int(name[5:]) >= torch.cuda.device_count():
        raise UserError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                        f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if name == "mps" and not torch.backends.mps.is_available():
        raise UserError("--device mps: not available on this machine; use --device cpu")
    return name


def _resolve_device(name: str, local_rank: int) -> torch.device:
    check_device(name)
    if name == "auto":
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
        if device.index is None:
            device = torch.device(f"cuda:{local_rank}")
    return device


def _optimizer(model: torch.nn.Module, recipe: Recipe, device: torch.device) -> torch.optim.AdamW:
    """AdamW; no weight decay on biases and norm gains (one-dimensional parameters)."""
    decay, no_decay = [], []
    for _, param in model.named_parameters():
        if param.requires_grad:
            (decay if param.ndim >= 2 else no_decay).append(param)
    spec = recipe.optimizer
    groups = [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    extra = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=spec.lr, betas=spec.betas, eps=spec.eps, **extra)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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


class Trainer:
    def __init__(self, config: TrainConfig, *, tokenizer: Any = None, corpus: Any = None,
                 callbacks: list[Callable[[StepInfo], None]] | None = None, console: Any = None) -> None:
        self.config = config
        self.callbacks = list(callbacks or [])
        self.console = console
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

    # -- setup -------------------------------------------------------------------------------------------------
    def _say(self, message: str) -> None:
        if self.console is not None and self.dist.main:
            self.console.print(message, highlight=False, markup=False)

    def _inspect_output(self) -> tuple[str, list[Path]]:
        """Decide, reading only, what to do with the folder: ("fresh", []), ("restart", []) when it holds nothing
        worth keeping, or ("resume", the resume points to try, best first). Refuses a folder that holds another
        run, and a --resume that could only go on by deleting finished checkpoints."""
        config, out = self.config, self.output
        present = [name for name in _RUN_ITEMS if (out / name).exists() or (out / name).is_symlink()]
        if config.resume:
            points = resume_points(out)
            if points:
                self._check_same_run(out)
                return "resume", points
            kept = _kept_items(out)
            if kept:
                shown = ", ".join(kept[:3]) + (f" and {len(kept) - 3} more" if len(kept) > 3 else "")
                raise UserError(f"--resume {out}: no resume point ({describe_last(out)}, and no other "
                                f"{RESUME_DIR}/step-* folder), but the run holds {shown}; nothing was deleted; "
                                "pass --overwrite to train it again from the start, or train into a new --output")
            if present:  # a run that never reached its first checkpoint: nothing to keep
                self._say(f"--resume: {out} has no resume checkpoint yet; starting from the beginning")
                return "restart", []
            return "fresh", []
        if present:
            if not config.overwrite:
                raise UserError(f"{out} already holds a training run ({', '.join(present)}); pass --resume to "
                                "continue it or --overwrite to start again")
            return "restart", []
        return "fresh", []

    def _claim_output(self, resuming: bool) -> None:
        """Make the run folder ours: a restart clears the old run's items, every start clears killed writers'
        staging folders. A resume deletes nothing of the run."""
        out = self.output
        self.dist.barrier()
        if self.dist.main:
            if not resuming:
                for name in _RUN_ITEMS:
                    path = out / name
                    if path.is_symlink() or path.is_file():
                        path.unlink()
                    elif path.exists():
                        shutil.rmtree(path)
            out.mkdir(parents=True, exist_ok=True)
            for leftover in list(out.glob(f"{CHECKPOINTS}/.*.tmp-*")) + list(out.glob(f"{RESUME_DIR}/.*.tmp-*")):
                shutil.rmtree(leftover, ignore_errors=True)  # staging folders of a killed writer
        self.dist.barrier()

    def _resume(self, points: list[Path]) -> Path:
        """Load the first resume point that holds up (see ``_load_resume_point``), saying so when it is not
        ``last``; refuse with one line when none does. Nothing is deleted either way."""
        problems: list[str] = []
        for path in points:
            try:
                self._load_resume_point(path)
            except UserError as err:
                problems.append(str(err))
                continue
            if problems:
                self._say(f"--resume: {problems[0]}; resuming from {path} instead")
            return path
        more = f" (and {len(problems) - 1} other resume point(s) unusable too)" if len(problems) > 1 else ""
        raise UserError(f"{problems[0]}{more}; nothing was deleted; pass --overwrite to train the run again from "
                        "the start, or train into a new --output")

    def _check_same_run(self, out: Path) -> None:
        path = out / RUN_FILE
        if not path.is_file():
            return
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return
        mine = {"recipe": self.recipe.name, "preset": self.config.preset, "schedule": self.schedule.canonical,
                "seed": self.config.seed}
        for key, value in mine.items():
            if key in record and record[key] != value:
                raise UserError(f"--resume {out}: the run was started with {key}={record[key]!r}, now {value!r}; "
                                "resume with the same settings or train into a new --output")

    def _data(self, tokenizer: Any, corpus: Any) -> tuple[Any, Any]:
        if corpus is not None:
            if tokenizer is None:
                raise ValueError("a corpus passed in needs its tokenizer")
            return tokenizer, corpus
        from antlm_bench.corpus import default_corpus_dir, prepare_training_data

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

    def _load_resume_point(self, path: Path) -> None:
        """Check a resume point against this run and load it: the records parse, the step agrees across them and
        with the schedule, the weights load and fit the model. Everything is checked before anything is set."""
        state, trainer_state = read_trainer_state(path)
        if state.get("data_hash") and state["data_hash"] != self.corpus.data_hash:
            raise UserError(f"--resume {path}: the training data changed since the checkpoint (data hash "
                            f"{state['data_hash'][:12]} vs {self.corpus.data_hash[:12]}); use the same corpus")
        if state.get("global_batch_size") not in (None, self.global_batch):
            raise UserError(f"--resume {path}: global batch {state['global_batch_size']} then, {self.global_batch} now")
        self._check_step(path, state, trainer_state)
        weights = load_weights(path, self.device)
        tied = set(getattr(self.model, "_tied_weights_keys", None) or [])
        try:
            missing, unexpected = self.model.load_state_dict(weights, strict=False)
        except RuntimeError as err:  # a tensor of another shape
            raise UserError(f"--resume {path}: the weights do not fit the model ({_first_line(err)}); resume with "
                            "the same recipe and preset") from None
        if unexpected or any(key not in tied for key in missing):
            raise UserError(f"--resume {path}: the weights do not fit the model (missing {missing[:3]}, unexpected "
                            f"{unexpected[:3]}); resume with the same recipe and preset")
        try:
            self.optimizer.load_state_dict(trainer_state["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            raise UserError(f"{path / 'trainer_state.pt'}: the optimizer state does not fit the model "
                            f"({_first_line(err)}); resume from another checkpoint") from None
        for param, moments in self.optimizer.state.items():
            for name in ("exp_avg", "exp_avg_sq"):
                if name in moments and moments[name].shape != param.shape:
                    raise UserError(f"{path / 'trainer_state.pt'}: optimizer {name} of shape "
                                    f"{tuple(moments[name].shape)} for a parameter of shape {tuple(param.shape)}; "
                                    "resume from another checkpoint")
        self.step = int(trainer_state["step"])
        self.tokens_seen = int(trainer_state["tokens_seen"])
        self.elapsed_before = float(trainer_state.get("elapsed_s", 0.0))
        rng = trainer_state.get("rng", {})
        cpu_states = rng.get("torch", []) if isinstance(rng, dict) else []
        try:
            if len(cpu_states) == self.dist.world:
                torch.set_rng_state(cpu_states[self.dist.rank])
                cuda_states = rng.get("cuda", [])
                if self.device.type == "cuda" and len(cuda_states) == self.dist.world and cuda_states[self.dist.rank] is not None:
                    torch.cuda.set_rng_state(cuda_states[self.dist.rank], self.device)
            else:
                self._say(f"--resume: the run had {len(cpu_states)} processes, now {self.dist.world}; dropout noise "
                          "is reseeded (the data order and masks are unchanged)")
                torch.manual_seed(self.config.seed + 104729 * (self.step + 1) + 7919 * self.dist.rank)
        except (RuntimeError, TypeError) as err:
            raise UserError(f"{path / 'trainer_state.pt'}: unusable random-number state ({_first_line(err)}); "
                            "resume from another checkpoint") from None
        self._say(f"resumed from {path.resolve()} at step {self.step} (epoch {self.step / self.steps_per_epoch:.2f})")

    def _check_step(self, path: Path, state: dict[str, Any], trainer_state: dict[str, Any]) -> None:
        """The resume point's step: the same in both records and the folder name, inside this schedule, in the
        phase the record names. A step edited in one place would otherwise resume somewhere else, or past the end
        and report a final checkpoint that was never written."""
        step = trainer_state["step"]
        where = path / "trainer_state.pt"
        if state.get("step") != step:
            raise UserError(f"{where}: field step is {step} but {path / 'antlm_state.json'} says "
                            f"{state.get('step')!r}; the checkpoint was altered, resume from another one")
        if not 0 < step <= self.total_steps:
            raise UserError(f"{where}: field step is {step}, outside this schedule's steps 1..{self.total_steps} "
                            f"({self.schedule.canonical}); resume from another checkpoint")
        named = re.fullmatch(r"step-(\d+)", path.resolve().name)
        if named and int(named.group(1)) != step:
            raise UserError(f"{where}: field step is {step} in a folder named {path.resolve().name}; the checkpoint "
                            "was altered, resume from another one")
        for key, mine in (("schedule", self.schedule.canonical), ("steps_per_epoch", self.steps_per_epoch),
                          ("phase_index", self._plan_at(step - 1).index)):
            if key in state and state[key] != mine:
                raise UserError(f"{path / 'antlm_state.json'}: field {key} is {state[key]!r}, this run has {mine!r} "
                                f"at step {step}; resume with the same settings or from another checkpoint")
        most = step * self.global_batch * self.seq_len
        if not 0 < trainer_state["tokens_seen"] <= most:
            raise UserError(f"{where}: field tokens_seen is {trainer_state['tokens_seen']}, impossible after {step} "
                            f"steps (at most {most}); resume from another checkpoint")

    # -- records -----------------------------------------------------------------------------------------------
    def _plan_at(self, step: int) -> PhasePlan:
        """The phase that global step ``step`` (0-based) belongs to (a bisection: up to MAX_PHASES phases)."""
        if not hasattr(self, "_ends"):
            self._ends = [plan.end_step for plan in self.plans]
        return self.plans[min(bisect.bisect_right(self._ends, step), len(self.plans) - 1)]

    def _record(self, plan: PhasePlan, complete: bool) -> dict[str, Any]:
        from antlm_bench.tables import current_git_commit

        return {
            "schedule": self.schedule.canonical,
            "phases": [{"index": p.index, "objective": p.phase.label, "epochs": p.phase.epochs,
                        "attention": p.phase.attention_mode, "start_step": p.start_step, "steps": p.n_steps}
                       for p in self.plans],
            "phase_index": plan.index, "phase_objective": plan.phase.label, "phase_complete": complete,
            "phase_step": self.step - plan.start_step, "phase_steps": plan.n_steps,
            "epoch": self.step / self.steps_per_epoch, "step": self.step, "tokens_seen": self.tokens_seen,
            "recipe": self.recipe.name, "preset": self.config.preset, "architecture": self.recipe.architecture,
            "seed": self.config.seed, "data_hash": self.corpus.data_hash, "tokenizer_hash": self.corpus.tokenizer_hash,
            "package_version": __version__, "git_commit": current_git_commit(),
            "steps_per_epoch": self.steps_per_epoch, "global_batch_size": self.global_batch, "seq_len": self.seq_len,
            "n_sequences": self.n_sequences, "world_size": self.dist.world, "created_at": _now(),
        }

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

    def _trainer_state(self, elapsed: float) -> dict[str, Any]:
        cpu = self.dist.gather(torch.get_rng_state())
        cuda = self.dist.gather(torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None)
        return {
            "optimizer": self.optimizer.state_dict(), "step": self.step, "tokens_seen": self.tokens_seen,
            "scheduler": {"phase_index": self._plan_at(max(self.step - 1, 0)).index,
                          "last_lr": [g["lr"] for g in self.optimizer.param_groups]},
            "rng": {"torch": cpu, "cuda": cuda}, "world_size": self.dist.world, "elapsed_s": elapsed,
        }

    def _save_last(self, plan: PhasePlan, complete: bool, elapsed: float) -> None:
        trainer_state = self._trainer_state(elapsed)  # a collective: every process takes part
        if self.dist.main:
            write_resume_point(self.output, self.model, self.tokenizer, self._record(plan, complete), trainer_state)
        self.dist.barrier()

    def _save_named(self, name: str, plan: PhasePlan, complete: bool) -> Path:
        folder = self.output / CHECKPOINTS / name
        if self.dist.main:
            write_checkpoint(folder, self.model, self.tokenizer, self._record(plan, complete))
            self._say(f"saved {folder} (step {self.step}, epoch {format_number(round(self.step / self.steps_per_epoch, 4))})")
        self.dist.barrier()
        return folder

    # -- evaluation --------------------------------------------------------------------------------------------
    def _evaluate(self, folder: Path) -> None:
        """Score a checkpoint with its phase's own method; its rows replace any earlier rows of that checkpoint."""
        if self.dist.main:
            from antlm_bench.checkpoint_state import read_state
            from antlm_bench.evaluate import evaluate
            from antlm_bench.tables import CheckpointInfo, RunInfo, append_index

            state = read_state(folder)
            method, _ = auto_scoring_method(state, is_masked_lm=False)
            name = str(folder.relative_to(self.output))
            run = RunInfo(run_id=self.output.name, recipe=self.recipe.name, architecture=self.recipe.architecture,
                          preset=self.config.preset, schedule=self.schedule.canonical, seed=self.config.seed,
                          data_hash=self.corpus.data_hash)
            checkpoint = CheckpointInfo(checkpoint=name, phase_index=state["phase_index"],
                                        phase_objective=state["phase_objective"], epoch=state["epoch"],
                                        tokens_seen=state["tokens_seen"])
            self.model.eval()
            try:
                out = evaluate(self.model, self.config.eval_tasks, scoring=method, limit=self.config.eval_limit,
                               device=str(self.device), data_dir=self.config.data_dir, run_info=run,
                               checkpoint_info=checkpoint, progress=False, tokenizer=self.tokenizer,
                               model_path=folder, seeds=[self.config.seed], convention=self.config.convention)
            finally:
                self.model.train()
            from antlm_bench.locking import fault_point
            from antlm_bench.store import commit_results

            # one event of the run folder's store, committed with one rename; a re-scored checkpoint's newer
            # event replaces its rows when read (no read-modify-write of the scores here)
            event = commit_results(self.output, out.scores, None, {
                "kind": "phase-score", "checkpoint": name, "scoring": method, "tasks": self.config.eval_tasks,
                "limit": self.config.eval_limit, "step": state["step"], "epoch": state["epoch"]})
            fault_point("train.index")
            append_index(self.output, {"checkpoint": name, "scores": SCORES, "scoring": method, "event": event,
                                       "tasks": self.config.eval_tasks, "step": state["step"],
                                       "epoch": state["epoch"], "created_at": _now()})
            aggregate = [r for r in out.scores.to_pylist() if r["subtask"] == "" and r["metric"] == "accuracy"]
            shown = ", ".join(f"{r['task']} {r['value']:.3f}" for r in aggregate)
            self._say(f"scored {name} with {method}: {shown}")
        self.dist.barrier()

    def _missing_evals(self) -> list[Path]:
        """Checkpoints an interrupted run saved but never scored (resume scores them first)."""
        if self.config.eval_every == "none" or not self.dist.main:
            return []
        kind = "phase-*" if self.config.eval_every == "phase" else "epoch-*"
        folders = sorted((self.output / CHECKPOINTS).glob(kind)) if (self.output / CHECKPOINTS).is_dir() else []
        done: set[str] = set()
        if (self.output / SCORES).exists():
            done = set(pq.read_table(self.output / SCORES, columns=["checkpoint"])["checkpoint"].to_pylist())
        return [f for f in folders if f.is_dir() and not f.name.startswith(".") and
                str(f.relative_to(self.output)) not in done]

    # -- the loop ----------------------------------------------------------------------------------------------
    def _rows(self, step: int) -> np.ndarray:
        epoch, index = divmod(step, self.steps_per_epoch)
        if epoch not in self._orders:
            self._orders = {epoch: epoch_order(self.config.seed, epoch, self.n_sequences)}
        return self._orders[epoch][index * self.global_batch : (index + 1) * self.global_batch]

    def _build(self, step: int) -> Batch | MixedBatch:
        rows = np.sort(self._rows(step))  # sorted: cheaper gathers, and the order within a batch does not matter
        word_starts = getattr(self.corpus, "word_starts", None)
        ids, starts = self.corpus.input_ids[rows], None if word_starts is None else word_starts[rows]
        phase = self._plan_at(step).phase
        if phase.objective == "MIX":  # per sample: the rows of this batch split by the weights
            assert phase.weights is not None
            return self.builder.build_mix(phase.weights, ids, starts, step)
        objective = phase.objective
        if objective == "BATCHMIX":  # per batch: one objective drawn for the whole step
            assert phase.weights is not None
            objective = draw_mix_objective(phase.weights, self.config.seed, step)
        return self.builder.build(objective, ids, starts, step)

    def _micro_batches(self, n_rows: int, whole_batch: int | None = None) -> list[np.ndarray]:
        """This process's rows of a batch of ``n_rows``, in micro-batches (as many as ``whole_batch`` rows would
        need: the global batch for a plain batch, so a short last batch of an epoch is cut as it always was)."""
        mine = _split_rows(n_rows, self.dist.world)[self.dist.rank]
        whole = self.global_batch if whole_batch is None else whole_batch
        n_micro = max(1, math.ceil(math.ceil(whole / self.dist.world) / self.micro_batch))
        chunks = np.array_split(mine, n_micro)
        # the synchronising backward is the last one: keep the non-empty chunks at the end
        return sorted(chunks, key=len)

    def _chunks(self, batch: Batch | MixedBatch) -> list[tuple[Batch, np.ndarray]]:
        """(part, rows) forward passes of one step: a plain batch is one part; a MIX batch runs each objective's
        part in its own micro-batches (one attention mode and label shift per forward pass)."""
        if isinstance(batch, Batch):
            return [(batch, rows) for rows in self._micro_batches(len(batch))]
        chunks = [(part, rows) for part in batch.parts for rows in self._micro_batches(len(part), len(part))]
        # the synchronising backward is the last one: the empty chunks first, as for a plain batch
        return sorted(chunks, key=lambda chunk: len(chunk[1]) > 0)

    def _train_step(self, batch: Batch | MixedBatch, save_wanted: bool = False) -> tuple[float, float, bool]:
        """One optimizer step's gradients over the global batch: (mean loss per labelled token, grad norm, whether
        any process wants a checkpoint after it). The loss sum and the wish travel in one all-reduce, and so does
        a stop signal that arrived on any process (``self.stop_requested``): every process then stops after this
        same step."""
        n_targets = batch.n_targets
        chunks = self._chunks(batch)
        scale = self.dist.world / max(n_targets, 1)
        local_sum = torch.zeros((), device=self.device, dtype=torch.float32)
        for i, (part, rows) in enumerate(chunks):
            last = i == len(chunks) - 1
            if len(rows) == 0 and not (last and self.dist.enabled):
                continue
            weight = 1.0
            if len(rows) == 0:  # this process has no rows left but must join the gradient all-reduce
                rows, weight = np.arange(1), 0.0
            x = torch.from_numpy(part.input_ids[rows]).to(self.device, non_blocking=True)
            y = torch.from_numpy(part.labels[rows]).to(self.device, non_blocking=True)
            sync = contextlib.nullcontext() if last or not self.dist.enabled else self.loss_module.no_sync()
            with sync:
                with self.autocast:
                    loss_sum = self.loss_module(x, y, part.shift, part.attention_mode)
                (loss_sum * (scale * weight)).backward()
            local_sum += loss_sum.detach().float() * weight
        flags = torch.tensor([float(save_wanted), float(self._signal is not None)], device=self.device)
        stats = self.dist.all_reduce_sum(torch.cat([local_sum[None], flags]))
        total, wanted, stop = stats.tolist()
        self.stop_requested = stop > 0
        loss = total / max(n_targets, 1)
        clip = self.recipe.optimizer.grad_clip
        params = [p for p in self.model.parameters() if p.grad is not None]
        if clip:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
        else:
            grad_norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))
        return loss, grad_norm, wanted > 0

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
        start_time = time.perf_counter()
        last_save_time = start_time
        tokens_at_start = self.tokens_seen
        self._say(self._plan_text())
        prefetch = ThreadPoolExecutor(max_workers=1)
        pending = prefetch.submit(self._build, self.step) if self.step < stop_at else None
        scheduler = None
        scheduler_phase = -1
        previous_handlers = self._catch_signals()
        try:
            while self.step < stop_at:
                plan = self._plan_at(self.step)
                if scheduler_phase != plan.index:
                    if plan.index > 0 and self.step == plan.start_step and self.recipe.optimizer_at_phase == "reset":
                        # moments and step count from zero; a resume mid-phase loaded the state after this reset
                        self.optimizer.state.clear()
                    scheduler = phase_scheduler(self.optimizer, plan.lr, self.step - plan.start_step)
                    scheduler_phase = plan.index
                    done = self.step - plan.start_step
                    self._say(f"phase {plan.index}/{len(self.plans) - 1} {plan.phase.label}: {plan.n_steps} steps"
                              + (f" (resuming after {done})" if done else "")
                              + (f", optimizer {self.recipe.optimizer_at_phase}" if plan.index else "")
                              + f", {plan.phase.attention_mode} attention, lr {describe(plan.lr.spec)}")
                assert pending is not None
                batch = pending.result()
                pending = prefetch.submit(self._build, self.step + 1) if self.step + 1 < stop_at else None
                lr = self.optimizer.param_groups[0]["lr"]
                # a wall-clock trigger is the main process's to decide; the others learn of it in the all-reduce
                by_time = (self.dist.main and bool(config.save_every_minutes)
                           and time.perf_counter() - last_save_time >= 60 * config.save_every_minutes)
                loss, grad_norm, by_time = self._train_step(batch, by_time)
                if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                    self._diverged(plan, loss, grad_norm)
                self.optimizer.step()
                assert scheduler is not None
                scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.step += 1
                self.tokens_seen += len(batch) * self.seq_len
                losses.append(loss)
                now = time.perf_counter()
                speed = (self.tokens_seen - tokens_at_start) / max(now - start_time, 1e-9)
                info = StepInfo(self.step, plan.index, batch.objective, self.step / self.steps_per_epoch, loss, lr,
                                grad_norm, self.tokens_seen, speed)
                self._log(info, reporters, progress)

                # checkpoints: phase end, epoch end, every N steps / minutes, where --max-steps stops, on a signal
                saved = False
                phase_end = self.step == plan.end_step
                epoch_end = self.step % self.steps_per_epoch == 0
                if epoch_end and (config.save_every_epoch or config.eval_every == "epoch"):
                    folder = self._save_named(f"epoch-{self.step // self.steps_per_epoch}", plan, phase_end)
                    if config.eval_every == "epoch":
                        self._evaluate(folder)
                if phase_end:
                    folder = self._save_named(plan.folder_name, plan, True)
                    self._save_last(plan, True, self.elapsed_before + now - start_time)
                    last_save_time, saved = time.perf_counter(), True
                    if config.eval_every == "phase" or (config.eval_every == "epoch" and not epoch_end):
                        self._evaluate(folder)
                else:
                    by_steps = bool(config.save_every_steps) and self.step % config.save_every_steps == 0
                    if by_steps or by_time or self.step == stop_at:
                        self._save_last(plan, False, self.elapsed_before + now - start_time)
                        last_save_time, saved = time.perf_counter(), True
                for callback in self.callbacks:
                    callback(info)
                if self._stopping() and self.step < stop_at:  # SIGINT / SIGTERM: this step is done, keep it
                    if not saved:
                        self._save_last(plan, phase_end, self.elapsed_before + time.perf_counter() - start_time)
                    raise TrainingInterrupted(self._signal or signal.SIGTERM, self.step)
        finally:
            self._restore_signals(previous_handlers)
            prefetch.shutdown(wait=True, cancel_futures=True)
            if progress is not None:
                progress.stop()
            if reporters is not None:
                reporters.close()
        finished = self.step >= self.total_steps
        if self.dist.main:
            write_json_atomic(self.output / RUN_FILE, self._run_record("finished" if finished else "stopped"))
        final = self.output / CHECKPOINTS / self.plans[-1].folder_name
        self.dist.barrier()
        self.dist.close()
        return TrainResult(self.output, final if finished else None, self.step, losses, stopped_early=not finished)

    def _catch_signals(self) -> dict[int, Any]:
        """SIGINT and SIGTERM (what a cluster scheduler sends before pre-emption) end the loop after the current
        step, with a resume point (``TrainingInterrupted``); a second one interrupts at once. Only the main thread
        can install handlers: elsewhere (a trainer run in a worker thread) signals keep their defaults."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum: int, frame: Any) -> None:
            if self._signal is not None:
                raise KeyboardInterrupt  # impatient: the second signal stops now (the last resume point stays)
            self._signal = signum

        return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _stopping(self) -> bool:
        """Stop after this step: one process alone decides only when it is alone (else all agree in the step's
        all-reduce, so every process stops after the same step)."""
        return self.stop_requested or (not self.dist.enabled and self._signal is not None)

    @staticmethod
    def _restore_signals(previous: dict[int, Any]) -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

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

    # -- progress and metrics ----------------------------------------------------------------------------------
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
                  "tokens_seen": info.tokens_seen, "tokens_per_s": round(info.tokens_per_s, 1)}
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


def _first_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return (text[:200] + "...") if len(text) > 200 else text or type(err).__name__


def _kept_items(out: Path) -> list[str]:
    """What a run folder holds that only --overwrite may delete: finished checkpoints, scores."""
    kept = []
    folder = out / CHECKPOINTS
    if folder.is_dir():
        kept += [f"{CHECKPOINTS}/{p.name}" for p in sorted(folder.iterdir()) if not p.name.startswith(".")]
    kept += [name for name in _KEEP_ITEMS if name != CHECKPOINTS and (out / name).exists()]
    return kept


def train(config: TrainConfig, **kwargs: Any) -> TrainResult:
    """Train ``config.model`` at ``config.preset`` through its schedule (see the module docstring).

    The main process holds the run folder's lock throughout (``antlm_bench.locking``): a second ``train`` or
    ``run`` into the same folder is refused at once, naming this pid, and a failure that leaves the folder this
    call created empty removes it. Other DDP processes (``RANK`` > 0) do not take it: they share the run.
    """
    from antlm_bench.locking import output_folder

    if int(os.environ.get("RANK", "0") or 0) != 0:
        return Trainer(config, **kwargs).run()
    with output_folder(config.output, "train"):
        return Trainer(config, **kwargs).run()


def read_metrics(output: str | Path) -> list[dict[str, Any]]:
    path = Path(output) / METRICS_FILE
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
