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
    """The schedule of one phase laid out in steps.

    Restarts every ``cycle_length`` steps are kept as that one number (a phase of a billion steps must not hold a
    list of its cycles); otherwise ``starts`` lists the few cycle starts (``cycles=N``: N of them, a plain shape:
    one). ``boundaries`` spells the cycles out, for display and tests.
    """

    spec: LRSchedule
    n_steps: int
    starts: tuple[int, ...] = (0,)
    cycle_length: int | None = None

    @property
    def boundaries(self) -> tuple[int, ...]:
        """Where each cycle starts, plus ``n_steps`` at the end: ``[0, b1, ..., n_steps]``."""
        if self.cycle_length is not None:
            return (*range(0, self.n_steps, self.cycle_length), self.n_steps)
        return (*self.starts, self.n_steps)

    def cycle(self, step: int) -> tuple[int, int]:
        """(start, end) of the cycle that holds ``step`` (0 <= step < n_steps), without spelling out the rest."""
        if self.cycle_length is not None:
            start = step - step % self.cycle_length
            return start, min(start + self.cycle_length, self.n_steps)
        k = bisect.bisect_right(self.starts, step) - 1
        return self.starts[k], self.starts[k + 1] if k + 1 < len(self.starts) else self.n_steps

    def factor(self, step: int) -> float:
        return lr_factor(step, self)


def _layout(spec: LRSchedule, n_steps: int, steps_per_epoch: float) -> tuple[tuple[int, ...], int | None]:
    if n_steps <= 0:
        raise ValueError("a phase has at least one step")
    if spec.kind != "cosine_with_restarts":
        return (0,), None
    if spec.cycle_epochs is not None:
        return (0,), max(1, round(spec.cycle_epochs * steps_per_epoch))
    cycles = min(spec.cycles or 1, n_steps)
    return tuple(sorted({round(k * n_steps / cycles) for k in range(cycles)})), None


def cycle_boundaries(spec: LRSchedule, n_steps: int, steps_per_epoch: float) -> tuple[int, ...]:
    """Where each cycle starts, plus ``n_steps`` at the end. Restarts every ``cycle_epochs`` epochs put the
    boundaries at multiples of that many steps (a last, shorter cycle takes the remainder); ``cycles=N`` cuts the
    phase into N nearly equal cycles."""
    return build_phase_lr(spec, n_steps, steps_per_epoch).boundaries


def build_phase_lr(spec: LRSchedule, n_steps: int, steps_per_epoch: float) -> PhaseLR:
    starts, cycle_length = _layout(spec, n_steps, steps_per_epoch)
    return PhaseLR(spec, n_steps, starts, cycle_length)


def lr_factor(step: int, phase: PhaseLR) -> float:
    """The multiplier of the base learning rate at ``step`` (0-based, within the phase)."""
    spec = phase.spec
    step = min(max(step, 0), phase.n_steps - 1)
    start, end = phase.cycle(step)
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
