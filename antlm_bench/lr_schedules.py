"""Learning-rate shapes within one phase, as pure functions of the step.

Each phase runs its own schedule from its first step (a phase boundary restarts it), following the recipe's entry
for the phase's objective: BabyLlama uses cosine in CLM phases and cosine with a restart every 4 epochs in MLM
phases; LTG-BERT uses cosine with restarts, 4 cycles over the phase. Every cycle (a plain cosine is one cycle over
the whole phase) starts with a linear warm-up over ``warmup_ratio`` of its steps and ends at ``min_lr_ratio``.

``lr_factor`` is the pure function; ``phase_scheduler`` wraps it in ``torch.optim.lr_scheduler.LambdaLR``
starting at any step of the phase, which is how a resumed run lands on exactly the learning rate it left.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import torch

from antlm_bench.recipes import LRSchedule


@dataclass(frozen=True)
class PhaseLR:
    """The schedule of one phase laid out in steps: cycle boundaries ``[0, b1, ..., n_steps]``."""

    spec: LRSchedule
    n_steps: int
    boundaries: tuple[int, ...]

    def factor(self, step: int) -> float:
        return lr_factor(step, self)


def cycle_boundaries(spec: LRSchedule, n_steps: int, steps_per_epoch: float) -> tuple[int, ...]:
    """Where each cycle starts, plus ``n_steps`` at the end. Restarts every ``cycle_epochs`` epochs put the
    boundaries at multiples of that many steps (a last, shorter cycle takes the remainder); ``cycles=N`` cuts the
    phase into N nearly equal cycles."""
    if n_steps <= 0:
        raise ValueError("a phase has at least one step")
    if spec.kind != "cosine_with_restarts":
        return (0, n_steps)
    if spec.cycle_epochs is not None:
        length = max(1, round(spec.cycle_epochs * steps_per_epoch))
        starts = list(range(0, n_steps, length))
    else:
        cycles = min(spec.cycles or 1, n_steps)
        starts = sorted({round(k * n_steps / cycles) for k in range(cycles)})
    return (*starts, n_steps)


def build_phase_lr(spec: LRSchedule, n_steps: int, steps_per_epoch: float) -> PhaseLR:
    return PhaseLR(spec, n_steps, cycle_boundaries(spec, n_steps, steps_per_epoch))


def lr_factor(step: int, phase: PhaseLR) -> float:
    """The multiplier of the base learning rate at ``step`` (0-based, within the phase)."""
    spec = phase.spec
    step = min(max(step, 0), phase.n_steps - 1)
    k = bisect.bisect_right(phase.boundaries, step) - 1
    start, end = phase.boundaries[k], phase.boundaries[k + 1]
    length, position = end - start, step - start
    warmup = math.ceil(spec.warmup_ratio * length) if spec.warmup_ratio > 0 else 0
    if position < warmup:
        # the first step already moves (lr > 0); the warm-up reaches the peak on its last step
        return (position + 1) / warmup
    if spec.kind == "constant":
        return 1.0
    # as transformers' schedules: the decay would reach the floor one step after the cycle ends, so no step of
    # the cycle is spent at lr 0
    progress = (position - warmup) / (length - warmup)
    floor = spec.min_lr_ratio
    if spec.kind == "linear":
        shape = 1.0 - progress
    else:  # cosine, and each cycle of cosine_with_restarts
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    return floor + (1.0 - floor) * shape


def phase_scheduler(
    optimizer: torch.optim.Optimizer, phase: PhaseLR, start_step: int = 0
) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR whose k-th step is the phase's step ``start_step + k``; the optimizer's lr is set at once."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: lr_factor(start_step + k, phase))


def describe(spec: LRSchedule) -> str:
    """One human line: ``cosine with restarts every 4 epochs, warm-up 1%``."""
    if spec.kind == "cosine_with_restarts":
        if spec.cycle_epochs is not None:
            cycle = f"every {spec.cycle_epochs:g} epochs"
        else:
            cycle = f"{spec.cycles or 1} cycles"
        text = f"cosine with restarts, {cycle}"
    else:
        text = spec.kind
    if spec.warmup_ratio:
        text += f", warm-up {spec.warmup_ratio * 100:g}%"
    if spec.min_lr_ratio:
        text += f", floor {spec.min_lr_ratio:g}"
    return text
