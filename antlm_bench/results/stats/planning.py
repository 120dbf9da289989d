"""What a ``sweep --until-decided`` design can decide, found by simulating the sweep's own rule before any seed runs.

The rule (``sweep.loop.run_sweep``, ``sweep.rule.compare_round``): a family of ``comparisons`` (schedules x
columns against one baseline) shares alpha by Bonferroni; after the first ``first_seeds`` seeds and after every
round of ``round_seeds`` more, each comparison's anytime-valid interval (:mod:`.sequential`, Lai's confidence
sequence, its prior precision tuned for ``max_seeds`` at the family's alpha) is read: a difference where it
excludes 0, an equivalence where it lies within +-``tolerance``, else undecided. The sweep stops when no comparison
is undecided or at ``max_seeds``, and every comparison's verdict is the one at the stop, so a comparison decided
early but undecided again at the stop (the intervals are not nested) counts as undecided, exactly as the sweep
reports it.

The truth simulated: per-seed scores of a configuration with SD ``seed_sd``; the two sides of a comparison at the
same seed correlated by ``correlation`` (same initialisation and data order), so that a paired difference has SD
``seed_sd * sqrt(2 (1 - correlation))``; the comparisons independent of each other. One comparison has the gap of
interest, the others ``others_gap`` (0: the family's other comparisons are nulls, the hardest case for a sweep that
stops only when everything is decided). Gaussian scores: docs/statistics.md shows the sequence keeps its error
rate under heavier tails and seed-to-seed drift as well.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from antlm_bench.results.stats.sequential import half_width_factor, prior_precision


@dataclass(frozen=True)
class Design:
    """A sweep's stopping rule, as ``sweep --until-decided`` fixes it before the first seed."""

    comparisons: int  # the family that shares alpha (Bonferroni)
    max_seeds: int
    first_seeds: int = 3
    round_seeds: int = 1
    alpha: float = 0.05
    tolerance: float | None = None  # equivalence margin, in the gap's units; None: no equivalence verdict

    def looks(self) -> list[int]:
        """The seed counts at which the sweep reads the intervals (as ``grid.next_seeds`` grows the rounds)."""
        looks, n = [], min(self.first_seeds, self.max_seeds)
        while True:
            looks.append(n)
            if n >= self.max_seeds:
                return looks
            n = min(n + self.round_seeds, self.max_seeds)

    @property
    def alpha_each(self) -> float:
        return self.alpha / max(1, self.comparisons)

    def first_decidable(self) -> int | None:
        """The first look at which an interval can be bounded at all (None: never within ``max_seeds``)."""
        c = prior_precision(self.max_seeds, self.alpha_each)
        return next((n for n in self.looks() if math.isfinite(half_width_factor(n, self.alpha_each, c))), None)


@dataclass(frozen=True)
class Truth:
    seed_sd: float  # SD of one configuration's per-seed scores
    correlation: float  # between the two sides' scores at the same seed
    gap: float  # true gap of the comparison of interest (same units as seed_sd)
    others_gap: float = 0.0  # true gap of every other comparison of the family

    @property
    def difference_sd(self) -> float:
        return self.seed_sd * math.sqrt(2.0 * (1.0 - self.correlation))


@dataclass(frozen=True)
class PlanOutcome:
    """What the design did over ``reps`` simulated sweeps."""

    reps: int
    decided_right: float  # the comparison of interest decided a difference of the true sign (A/A: either sign)
    decided_wrong_sign: float
    decided_equivalent: float
    others_difference: float  # share of sweeps in which any other comparison is decided a difference (nulls: an error)
    others_equivalent: float  # mean share of the other comparisons decided equivalent
    family_difference: float  # share of sweeps with any comparison decided a difference (A/A: the family error)
    mean_seeds: float  # seeds a side at the stop
    all_decided: float  # share of sweeps that stopped with every comparison decided (at or before the cap)

    @staticmethod
    def margin(p: float, reps: int) -> float:
        """The 95% binomial margin of a simulated share."""
        return 1.96 * math.sqrt(max(p * (1 - p), 0.0) / reps)


@dataclass(frozen=True)
class SweepVerdicts:
    """Each simulated sweep's stop and its comparisons' verdicts there (arrays [reps] and [reps, comparisons])."""

    seeds_at_stop: np.ndarray
    all_decided: np.ndarray
    positive: np.ndarray  # decided a difference > 0
    negative: np.ndarray  # decided a difference < 0
    equivalent: np.ndarray


def decide_sweeps(design: Design, differences: np.ndarray, went_on_after: int = 0) -> SweepVerdicts:
    """The sweep's rule on paired per-seed differences [reps, comparisons, max_seeds] (vectorised: every sweep and
    comparison at once): intervals at each look, the stop (first look with no comparison undecided, else the
    cap) and the verdicts there. ``went_on_after``: a sweep known to have gone on from its looks up to that many
    seeds (a study under way): only later looks can stop it."""
    reps, k, n_max = differences.shape
    if (k, n_max) != (design.comparisons, design.max_seeds):
        raise ValueError(f"differences {differences.shape}: expected [reps, {design.comparisons}, {design.max_seeds}]")
    looks = np.asarray(design.looks())
    c = prior_precision(n_max, design.alpha_each)
    factors = np.asarray([half_width_factor(int(n), design.alpha_each, c) for n in looks])
    s1, s2 = np.cumsum(differences, axis=2), np.cumsum(differences * differences, axis=2)
    n = looks.astype(np.float64)
    mean = s1[:, :, looks - 1] / n
    variance = np.maximum(s2[:, :, looks - 1] - n * mean * mean, 0.0) / np.maximum(n - 1, 1)
    with np.errstate(invalid="ignore"):
        half = np.where(np.isfinite(factors), factors * np.sqrt(variance / n), np.inf)
    low, high = mean - half, mean + half
    positive, negative = low > 0, high < 0
    equivalent = np.zeros_like(positive)
    if design.tolerance is not None and design.tolerance > 0:
        equivalent = ~(positive | negative) & (low > -design.tolerance) & (high < design.tolerance)
    undecided = ~(positive | negative | equivalent)  # [reps, k, looks]
    all_decided = ~undecided.any(axis=1) & (looks > went_on_after)[None, :]  # [reps, looks]: where it can stop
    decided_somewhere = all_decided.any(axis=1)
    stop = np.where(decided_somewhere, all_decided.argmax(axis=1), len(looks) - 1)
    rows = np.arange(reps)
    return SweepVerdicts(looks[stop], decided_somewhere, positive[rows, :, stop], negative[rows, :, stop],
                         equivalent[rows, :, stop])


def simulate_design(design: Design, truth: Truth, reps: int, rng: np.random.Generator,
                    observed: Sequence[float] = ()) -> PlanOutcome:
    """The sweep's rule on ``reps`` simulated sweeps of this truth. ``observed``: the comparison of interest's
    paired differences of the seeds a sweep under way has run (fewer than ``max_seeds``), kept in every simulated
    sweep, which goes on from its look at that many seeds: the shares are then conditional on them (conditional
    power, the chance that going on decides). The other comparisons' seeds so far are simulated, not observed."""
    if len(observed) >= design.max_seeds:
        raise ValueError(f"{len(observed)} observed seeds: a sweep at its cap ({design.max_seeds}) has no seeds to go")
    k = design.comparisons
    gaps = np.full(k, truth.others_gap)
    gaps[0] = truth.gap
    d = gaps[None, :, None] + truth.difference_sd * rng.standard_normal((reps, k, design.max_seeds))
    d[:, 0, :len(observed)] = np.asarray(observed, dtype=np.float64)
    v = decide_sweeps(design, d, went_on_after=len(observed))
    pos, neg, equiv = v.positive, v.negative, v.equivalent
    if truth.gap > 0:
        right, wrong = pos[:, 0], neg[:, 0]
    elif truth.gap < 0:
        right, wrong = neg[:, 0], pos[:, 0]
    else:
        right, wrong = pos[:, 0] | neg[:, 0], np.zeros(reps, dtype=bool)
    others = (pos[:, 1:] | neg[:, 1:]).any(axis=1) if k > 1 else np.zeros(reps, dtype=bool)
    return PlanOutcome(
        reps=reps, decided_right=float(right.mean()), decided_wrong_sign=float(wrong.mean()),
        decided_equivalent=float(equiv[:, 0].mean()), others_difference=float(others.mean()),
        others_equivalent=float(equiv[:, 1:].mean()) if k > 1 else 0.0,
        family_difference=float((pos | neg).any(axis=1).mean()),
        mean_seeds=float(v.seeds_at_stop.mean()), all_decided=float(v.all_decided.mean()))


@dataclass(frozen=True)
class GapPlan:
    """One true gap's simulated sweeps, as a row of ``plan``'s table."""

    truth: Truth
    outcome: PlanOutcome
    # the fixed-sample t test's power at the cap (:func:`fixed_sample_power`), for reference; None at gap 0 and for
    # a sweep under way (the fixed-n t's power is that of a design planned in advance: no conditional reading)
    fixed_power: float | None


def simulate_gaps(design: Design, seed_sd: float, correlation: float, gaps: Sequence[float], others_gap: float,
                  reps: int, seed: int, observed: Sequence[float] = ()) -> list[GapPlan]:
    """The design on ``reps`` simulated sweeps per true gap: the A/A gap 0 first, then each other gap in the order
    given, all drawn from one generator seeded ``seed`` (so that a table reproduces from its seed).
    ``observed``: as in :func:`simulate_design`."""
    rng = np.random.default_rng(seed)
    plans = []
    for gap in [0.0, *[g for g in gaps if g != 0]]:
        truth = Truth(seed_sd, correlation, gap, others_gap)
        outcome = simulate_design(design, truth, reps, rng, observed=observed)
        fixed = None if gap == 0 or len(observed) else fixed_sample_power(design, truth)
        plans.append(GapPlan(truth, outcome, fixed))
    return plans


def fixed_sample_power(design: Design, truth: Truth) -> float:
    """For reference: the power of a fixed-sample paired t test at ``max_seeds`` (two-sided, Bonferroni over the
    family), the test one would run with the seed count fixed in advance and a single look (noncentral t)."""
    from scipy import stats

    n, df = design.max_seeds, design.max_seeds - 1
    if n < 2 or truth.difference_sd == 0:
        return math.nan
    critical = stats.t.ppf(1 - design.alpha_each / 2, df)
    shift = truth.gap / (truth.difference_sd / math.sqrt(n))
    # the lower tail as the upper tail of the mirrored shift: scipy's nct.cdf far in a tail returns nan (issue seen at a
    # shift of 10 with 9 degrees of freedom), its sf there returns the tiny number it is
    return float(stats.nct.sf(critical, df, shift) + stats.nct.sf(critical, df, -shift))


__all__ = ["Design", "GapPlan", "PlanOutcome", "SweepVerdicts", "Truth", "decide_sweeps", "fixed_sample_power",
           "simulate_design", "simulate_gaps"]
