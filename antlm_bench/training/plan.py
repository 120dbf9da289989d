"""The step plan: the schedule as global steps, and what each step trains.

An epoch is ``ceil(N_sequences / global_batch)`` steps; phase k ends at step ``round(cumulative epochs *
steps_per_epoch)`` (``schedule.phase_end_steps``: half up, at least one step each), so fractional phases add up
exactly. Step ``g`` reads the rows ``g % steps_per_epoch`` of epoch ``g // steps_per_epoch``'s permutation, seeded
by (seed, epoch): a fractional phase continues where the last one stopped, and the order depends on nothing but
the seed. Each step builds its WHOLE global batch (masks keyed by (seed, step)); every process later takes its rows.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from antlm_bench.errors import UserError
from antlm_bench.recipes import Recipe
from antlm_bench.runs.layout import phase_checkpoint_name
from antlm_bench.runs.schedule import Phase, Schedule, phase_end_steps
from antlm_bench.training.lr_schedules import PhaseLR, build_phase_lr
from antlm_bench.training.objectives import Batch, BatchBuilder, MixedBatch, draw_mix_objective

# a plan longer than this is a typo (1000000000000_MLM), refused before anything is built; 1000x the paper's run
MAX_TOTAL_STEPS = 100_000_000


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
        return phase_checkpoint_name(self.index, self.phase)



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



class StepPlan:
    """Which phase, rows and objective a global step trains: a pure function of (seed, step)."""

    def __init__(self, plans: list[PhasePlan], steps_per_epoch: int, global_batch: int, corpus: Any,
                 builder: BatchBuilder, seed: int) -> None:
        self.plans = plans
        self.steps_per_epoch = steps_per_epoch
        self.global_batch = global_batch
        self.corpus = corpus
        self.n_sequences = int(corpus.input_ids.shape[0])
        self.builder = builder
        self.seed = seed
        self._ends = [plan.end_step for plan in plans]
        self._orders: dict[int, np.ndarray] = {}  # the current epoch's permutation only

    @property
    def total_steps(self) -> int:
        return self.plans[-1].end_step

    def sequences_before(self, step: int) -> int:
        """Sequences the steps before ``step`` trained on (repeats counted; an epoch's last step may be short)."""
        epochs, index = divmod(step, self.steps_per_epoch)
        return epochs * self.n_sequences + min(index * self.global_batch, self.n_sequences)

    def plan_at(self, step: int) -> PhasePlan:
        """The phase that global step ``step`` (0-based) belongs to (a bisection: up to MAX_PHASES phases)."""
        return self.plans[min(bisect.bisect_right(self._ends, step), len(self.plans) - 1)]

    def rows(self, step: int) -> np.ndarray:
        epoch, index = divmod(step, self.steps_per_epoch)
        if epoch not in self._orders:
            self._orders = {epoch: epoch_order(self.seed, epoch, self.n_sequences)}
        return self._orders[epoch][index * self.global_batch : (index + 1) * self.global_batch]

    def build(self, step: int) -> Batch | MixedBatch:
        """The whole global batch of ``step`` (every process builds it and later takes its own rows)."""
        rows = np.sort(self.rows(step))  # sorted: cheaper gathers, and the order within a batch does not matter
        ids, starts = self.corpus.input_ids[rows], self.corpus.word_starts[rows]
        phase = self.plan_at(step).phase
        if phase.objective == "MIX":  # per sample: the rows of this batch split by the weights
            assert phase.weights is not None
            return self.builder.build_mix(phase.weights, ids, starts, step)
        objective = phase.objective
        if objective == "BATCHMIX":  # per batch: one objective drawn for the whole step
            assert phase.weights is not None
            objective = draw_mix_objective(phase.weights, self.seed, step)
        return self.builder.build(objective, ids, starts, step)
