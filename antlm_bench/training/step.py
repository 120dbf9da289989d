"""One optimizer step over the global batch: the objective's forward passes in micro-batches, gradients
accumulated so that the step's gradient is that of the global batch's loss (the mean over its labelled tokens; a
MIX batch's objectives weighed as the recipe's ``mix_loss`` says, ``MixedBatch.loss_scales``), whatever the
micro-batch size or the number of processes (under DDP gradients are all-reduced at the last micro-batch only);
and the optimizer policy at a phase's first step (the LR schedule restarts; AdamW's moments too where the recipe
says ``optimizer_at_phase: reset``). Also here: this process's device (``resolve_device``), the DDP process group (``Dist``),
AdamW (``make_optimizer``), and SIGINT / SIGTERM, which stop the run after the step under way (``StopSignal``; the
processes agree in the step's all-reduce).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from antlm_bench.errors import UserError
from antlm_bench.options import parse_device
from antlm_bench.recipes import Recipe
from antlm_bench.training.lr_schedules import phase_scheduler
from antlm_bench.training.objectives import Batch, MixedBatch
from antlm_bench.training.plan import PhasePlan


def resolve_device(name: str, local_rank: int) -> torch.device:
    """The training device of this process (``name`` checked by ``options.parse_device``): ``auto`` and ``cuda``
    take the process's own GPU under torchrun."""
    parse_device(name)
    if name == "auto":
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
        if device.index is None:
            device = torch.device(f"cuda:{local_rank}")
    return device


class Dist:
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


def make_optimizer(model: torch.nn.Module, recipe: Recipe, device: torch.device) -> torch.optim.AdamW:
    """AdamW; no weight decay on biases and norm gains (one-dimensional parameters)."""
    decay, no_decay = [], []
    for _, param in model.named_parameters():
        if param.requires_grad:
            (decay if param.ndim >= 2 else no_decay).append(param)
    spec = recipe.optimizer
    groups = [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    extra = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=spec.lr, betas=spec.betas, eps=spec.eps, **extra)


def split_rows(n_rows: int, parts: int) -> list[np.ndarray]:
    return np.array_split(np.arange(n_rows), parts)



@dataclass
class StepOutcome:
    # the global batch's loss: the mean over its labelled tokens; a MIX batch's as the recipe's mix_loss weighs its
    # objectives (row_share: each objective's mean token loss times its share of the rows)
    loss: float
    grad_norm: float
    save_wanted: bool  # some process wants a checkpoint after this step (a wall-clock trigger)
    stop_wanted: bool  # some process received SIGINT / SIGTERM: every process stops after this step


class StepRunner:
    """One optimizer step's gradients over the global batch, and the optimizer at a phase's first step."""

    def __init__(self, model: torch.nn.Module, loss_module: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 dist: Dist, device: torch.device, autocast: Any, recipe: Recipe, global_batch: int,
                 micro_batch: int) -> None:
        self.model = model
        self.loss_module = loss_module  # the LossModule, DDP-wrapped under torch.distributed
        self.optimizer = optimizer
        self.dist = dist
        self.device = device
        self.autocast = autocast
        self.recipe = recipe
        self.global_batch = global_batch
        self.micro_batch = micro_batch

    def enter_phase(self, plan: PhasePlan, step: int) -> torch.optim.lr_scheduler.LRScheduler:
        """The phase's LR scheduler, at the step the run is at (a resume lands mid-phase); AdamW reset first
        where the recipe says so and this is the phase's first step (a resume mid-phase loaded the state after
        the reset)."""
        if plan.index > 0 and step == plan.start_step and self.recipe.optimizer_at_phase == "reset":
            self.optimizer.state.clear()  # moments and step count from zero
        return phase_scheduler(self.optimizer, plan.lr, step - plan.start_step)

    def micro_batches(self, n_rows: int, whole_batch: int | None = None) -> list[np.ndarray]:
        """This process's rows of a batch of ``n_rows``, in micro-batches (as many as ``whole_batch`` rows would
        need: the global batch for a plain batch, so a short last batch of an epoch is cut as it always was)."""
        mine = split_rows(n_rows, self.dist.world)[self.dist.rank]
        whole = self.global_batch if whole_batch is None else whole_batch
        n_micro = max(1, math.ceil(math.ceil(whole / self.dist.world) / self.micro_batch))
        chunks = np.array_split(mine, n_micro)
        # the synchronising backward is the last one: keep the non-empty chunks at the end
        return sorted(chunks, key=len)

    def _chunks(self, batch: Batch | MixedBatch) -> list[tuple[Batch, np.ndarray, float]]:
        """(part, rows, scale) forward passes of one step: a plain batch is one part; a MIX batch runs each
        objective's part in its own micro-batches (one attention mode and label shift per forward pass). ``scale``
        weighs a part's summed token loss in the step's loss (``loss_scales``, from counts over the global batch)."""
        scales = batch.loss_scales(self.recipe.mix_loss)
        if isinstance(batch, Batch):
            ((_, scale),) = scales
            return [(batch, rows, scale) for rows in self.micro_batches(len(batch))]
        chunks = [(part, rows, scale) for part, scale in scales
                  for rows in self.micro_batches(len(part), len(part))]
        # the synchronising backward is the last one: the empty chunks first, as for a plain batch
        return sorted(chunks, key=lambda chunk: len(chunk[1]) > 0)

    def gradients(self, batch: Batch | MixedBatch, save_wanted: bool = False,
                  stop_wanted: bool = False) -> StepOutcome:
        """Accumulate one step's gradients over the global batch. The loss, the wish for a checkpoint and a stop
        signal travel in one all-reduce, so every process learns what any of them wants after this step."""
        chunks = self._chunks(batch)
        local_loss = torch.zeros((), device=self.device, dtype=torch.float32)
        for i, (part, rows, scale) in enumerate(chunks):
            last = i == len(chunks) - 1
            if len(rows) == 0 and not (last and self.dist.enabled):
                continue
            if len(rows) == 0:  # this process has no rows left but must join the gradient all-reduce
                rows, scale = np.arange(1), 0.0
            x = torch.from_numpy(part.input_ids[rows]).to(self.device, non_blocking=True)
            y = torch.from_numpy(part.labels[rows]).to(self.device, non_blocking=True)
            sync = contextlib.nullcontext() if last or not self.dist.enabled else self.loss_module.no_sync()
            with sync:
                with self.autocast:
                    loss_sum = self.loss_module(x, y, part.shift, part.attention_mode)
                # DDP averages the processes' gradients: x world gives the sum of every process's share
                (loss_sum * (self.dist.world * scale)).backward()
            local_loss += loss_sum.detach().float() * scale
        flags = torch.tensor([float(save_wanted), float(stop_wanted)], device=self.device)
        stats = self.dist.all_reduce_sum(torch.cat([local_loss[None], flags]))
        loss, wanted, stop = stats.tolist()
        clip = self.recipe.optimizer.grad_clip
        params = [p for p in self.model.parameters() if p.grad is not None]
        if clip:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
        else:
            grad_norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))
        return StepOutcome(loss, grad_norm, wanted > 0, stop > 0)


class StopSignal:
    """SIGINT / SIGTERM (what a cluster scheduler sends before pre-emption) end the loop after the step under way,
    with a resume point; a second one interrupts at once. Only the main thread can install handlers: elsewhere (a
    trainer run in a worker thread) signals keep their defaults."""

    def __init__(self) -> None:
        self.received: int | None = None  # the first signal caught

    @contextlib.contextmanager
    def caught(self) -> Iterator[StopSignal]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return

        def handler(signum: int, frame: Any) -> None:
            if self.received is not None:
                raise KeyboardInterrupt  # impatient: the second signal stops now (the last resume point stays)
            self.received = signum

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
