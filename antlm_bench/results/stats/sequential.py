"""Seeds until decided: an anytime-valid confidence sequence for the mean of paired per-seed differences.

``sweep --until-decided`` adds seeds in rounds and looks at the comparisons after every round. A fixed-sample test
re-run after each look is not a test any more: every look is another chance of a false positive, and stopping at
the first "significant" look drives the error rate well past alpha (docs/statistics.md measures it). What keeps its
error rate under any stopping rule is a *confidence sequence*: intervals CS_1, CS_2, ... that hold the true mean
*simultaneously* for all n with probability >= 1 - alpha, so the interval at whatever seed count one stops at
(by any rule, even one that looked at the data) still covers with >= 1 - alpha.

The method: Lai's confidence sequence for a Gaussian mean with unknown variance (T. L. Lai, "On confidence
sequences", Annals of Statistics 4(2):265-280, 1976; discussed and extended in H. Wang and A. Ramdas, "Anytime-valid
t-tests and confidence sequences for Gaussian means with unknown variance", Sequential Analysis, 2025,
arXiv:2310.03722). The per-seed differences d_1..d_n (seed s of the schedule minus seed s of the baseline: the
same initialisation and data order on both sides) are modelled as iid N(mu, sigma^2), sigma unknown. For a
candidate mu let y_i = d_i - mu, S = sum y_i, V = sum y_i^2. The likelihood ratio of the scale-invariant
statistics y/|y_1| (the right-Haar prior d sigma / sigma on sigma, a N(0, 1/c) prior on the standardised effect
(mean - mu) / sigma) is

    M_n(mu) = sqrt(c / (n + c)) * (1 - S^2 / ((n + c) V)) ** (-n / 2)

a nonnegative martingale with M_0 = 1 under mu (Lai 1976; the group-invariance argument in Perez-Ortiz, Lardy,
de Heide and Grunwald, "E-statistics, group invariance and anytime-valid testing", Annals of Statistics, 2024,
arXiv:2208.07610), so by Ville's inequality P(exists n: M_n(mu) >= 1/alpha) <= alpha. The confidence sequence
is {mu : M_n(mu) < 1/alpha}; solving the quadratic in d_bar - mu gives the closed form

    d_bar +- sqrt(g Q / (n (n - g))),   g = (1 - r)(n + c),   r = (alpha sqrt(c / (n + c))) ** (2 / n)

with Q = sum (d_i - d_bar)^2; the interval is the whole line while n <= g (the first seeds alone cannot exclude
anything: M_1 = 1 always). It is exact for Gaussian differences at every n, without asymptotics, which is what a
handful of seeds needs; the price is width: at 10 seeds and alpha 0.05 the half-width is 3.85 standard errors
against the fixed-sample t's 2.26. ``c`` trades early against late width; :func:`prior_precision` picks the one
that makes the interval narrowest at the planned largest seed count, chosen before any data is seen (choosing it
from the data would void the guarantee).

A comparison is decided (:func:`decide`) when its interval excludes 0 (a difference, in the interval's direction)
or lies within +-tolerance (an equivalence: no difference larger than the tolerance). Both read the same
time-uniform interval, so either conclusion is wrong with probability <= alpha whatever the stopping rule.
The calibration (:func:`calibrate`, printed by ``benchmarks/calibration.py``) checks it on simulated seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

DIFFERENCE = "difference"
EQUIVALENT = "equivalent"
UNDECIDED = "undecided"


@dataclass(frozen=True)
class SequentialInterval:
    """The confidence sequence at the current look: mean of the n paired differences and its anytime-valid
    interval (infinite bounds while the seeds cannot bound anything yet)."""

    n: int
    mean: float
    low: float
    high: float
    alpha: float
    prior_precision: float

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)


def _growth(n: int, alpha: float, c: float) -> float:
    """g = (1 - r)(n + c) of the closed form (module docstring)."""
    r = (alpha * math.sqrt(c / (n + c))) ** (2.0 / n)
    return (1.0 - r) * (n + c)


def half_width_factor(n: int, alpha: float, c: float) -> float:
    """The interval's half-width in standard errors of the mean, s / sqrt(n) (s the sample SD of the differences):
    sqrt(g (n - 1) / (n - g)); infinite while n <= g."""
    if n < 2:
        return math.inf
    g = _growth(n, alpha, c)
    return math.sqrt(g * (n - 1) / (n - g)) if n > g else math.inf


def prior_precision(planned_n: int, alpha: float = 0.05) -> float:
    """The mixing precision c that makes the interval narrowest at ``planned_n`` seeds (the most a sweep will
    use). It depends on the plan only, never on the data, so the confidence sequence keeps its guarantee."""
    if planned_n < 2:
        raise ValueError(f"planned_n {planned_n}: the sequence needs at least 2 seeds")

    def width(log_c: float) -> float:
        return min(half_width_factor(planned_n, alpha, math.exp(log_c)), 1e12)

    from scipy import optimize  # here: a board that only reads a decision never plans one

    best = optimize.minimize_scalar(width, bounds=(-10.0, 6.0), method="bounded")
    return float(math.exp(best.x))


def fewest_seeds(alpha: float = 0.05, limit: int = 1000) -> int:
    """The fewest seeds, from 3, at which the sequence bounds anything (with ``c`` tuned for that many): below it no
    stopping rule built on it can decide. Two seeds are left out: whatever c, their half-width is at least about
    2 / alpha standard errors (40 at alpha 0.05), and three give 10 at alpha 0.05."""
    for n in range(3, limit + 1):
        if math.isfinite(half_width_factor(n, alpha, prior_precision(n, alpha))):
            return n
    raise ValueError(f"alpha {alpha}: no finite interval within {limit} seeds")


def confidence_sequence(differences: Sequence[float], alpha: float = 0.05,
                        prior_precision_c: float = 1.0) -> SequentialInterval:
    """Lai's anytime-valid interval for the mean of iid Gaussian ``differences`` with unknown variance, at the
    current n (module docstring). Valid simultaneously over all n, so any stopping rule may read it."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha}: must be between 0 and 1")
    if not prior_precision_c > 0:
        raise ValueError(f"prior precision {prior_precision_c}: must be > 0")
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or not np.all(np.isfinite(d)):
        raise ValueError("differences: a flat list of finite numbers")
    n = int(d.size)
    mean = float(d.mean()) if n else math.nan
    factor = half_width_factor(n, alpha, prior_precision_c)
    if not math.isfinite(factor):
        return SequentialInterval(n, mean, -math.inf, math.inf, alpha, prior_precision_c)
    half = factor * float(np.std(d, ddof=1)) / math.sqrt(n)
    return SequentialInterval(n, mean, mean - half, mean + half, alpha, prior_precision_c)


def decide(interval: SequentialInterval, tolerance: float | None = None) -> str:
    """``difference`` when the interval excludes 0, ``equivalent`` when it lies within +-``tolerance`` (given and
    > 0), else ``undecided``. A difference is checked first: an interval inside +-T that excludes 0 is a
    (small) difference."""
    if not interval.bounded:
        return UNDECIDED
    if interval.low > 0 or interval.high < 0:
        return DIFFERENCE
    if tolerance is not None and tolerance > 0 and -tolerance < interval.low and interval.high < tolerance:
        return EQUIVALENT
    return UNDECIDED


# ----------------------------------------------------------------------------------------------------------
# calibration on simulated seeds with a known truth


@dataclass(frozen=True)
class SequentialCalibration:
    """One row of the calibration table: a true gap (in seed SDs) and what the rules did over ``reps`` runs."""

    gap_sds: float
    reps: int
    difference: float  # share decided "difference" in the direction of the truth (A/A: either direction)
    wrong_sign: float  # share decided "difference" with the wrong sign (A/A: 0 by definition)
    equivalent: float  # share decided "equivalent" (within +-tolerance)
    coverage: float  # share whose interval at the stop holds the true gap
    mean_seeds: float  # expected number of seeds a side at the stop (max_seeds when never decided)
    naive_rejections: float  # fixed-sample paired t re-tested after every round: share ever "significant"


# draws the per-seed scores of a baseline and a schedule with the same seed labels: (rng, seeds, gap) -> (a, b)
PairedDraw = Callable[[np.random.Generator, int, float], tuple[np.ndarray, np.ndarray]]


def gaussian_pairs(seed_sd: float = 1.0, correlation: float = 0.5) -> PairedDraw:
    """The simplest truth: per-seed scores N(0, seed_sd^2) on both sides, correlated by ``correlation`` (the same
    initialisation and data order), the schedule shifted by the gap."""

    def draw(rng: np.random.Generator, seeds: int, gap: float) -> tuple[np.ndarray, np.ndarray]:
        a = rng.normal(0.0, seed_sd, seeds)
        b = correlation * a + math.sqrt(1 - correlation**2) * rng.normal(0.0, seed_sd, seeds) + gap
        return a, b

    return draw


def simulate(draw: PairedDraw, gap: float, rng: np.random.Generator, reps: int, first_seeds: int, max_seeds: int,
             round_seeds: int, tolerance: float | None, alpha: float = 0.05) -> tuple[float, float, float, float,
                                                                                      float, float]:
    """(difference right sign, wrong sign, equivalent, coverage, mean seeds, naive rejections) of the stopping rule
    of ``sweep --until-decided`` on ``reps`` simulated experiments with true gap ``gap``."""
    from antlm_bench.results.stats.inference import paired_seeds

    c = prior_precision(max_seeds, alpha)
    looks = list(range(first_seeds, max_seeds, round_seeds)) + [max_seeds]
    right = wrong = equivalent = covered = naive = 0
    seeds_used = 0
    for _ in range(reps):
        a, b = draw(rng, max_seeds, gap)
        d = b - a
        stop_interval = None
        for n in looks:
            interval = confidence_sequence(d[:n], alpha, c)
            verdict = decide(interval, tolerance)
            if verdict != UNDECIDED or n == looks[-1]:
                stop_interval = interval
                break
        assert stop_interval is not None
        seeds_used += stop_interval.n
        covered += stop_interval.low <= gap <= stop_interval.high
        verdict = decide(stop_interval, tolerance)
        if verdict == DIFFERENCE:
            sign = 1.0 if stop_interval.low > 0 else -1.0
            if gap == 0 or sign == math.copysign(1.0, gap):
                right += 1
            else:
                wrong += 1
        equivalent += verdict == EQUIVALENT
        # the fixed-sample paired t test (the board's paired-seeds design) re-run at every look, stopped at the
        # first p < alpha: what a user who "adds seeds until it is significant" gets
        naive += any((p := paired_seeds(b[:n], a[:n], 0.0, alpha).p_value) is not None and p < alpha
                     for n in looks if n >= 2)
    return (right / reps, wrong / reps, equivalent / reps, covered / reps, seeds_used / reps, naive / reps)


def calibrate(draw: PairedDraw, seed_sd: float, rng: np.random.Generator, reps: int = 1000, first_seeds: int = 3,
              max_seeds: int = 12, round_seeds: int = 1, tolerance_sds: float = 1.0, alpha: float = 0.05,
              gaps_sds: Sequence[float] = (0.0, 1.0, 2.0)) -> list[SequentialCalibration]:
    """The stopping rule under true gaps of ``gaps_sds`` seed SDs (``seed_sd``: the SD of one configuration's
    per-seed scores under ``draw``), equivalence margin ``tolerance_sds`` seed SDs."""
    rows = []
    for gap_sds in gaps_sds:
        stats = simulate(draw, gap_sds * seed_sd, rng, reps, first_seeds, max_seeds, round_seeds,
                         tolerance_sds * seed_sd, alpha)
        rows.append(SequentialCalibration(gap_sds, reps, *stats))
    return rows


def calibration_table(rows: Sequence[SequentialCalibration], alpha: float = 0.05) -> list[str]:
    """The calibration as Markdown lines (docs/statistics.md); rates with their 95% binomial margin."""

    def rate(p: float, reps: int) -> str:
        return f"{100 * p:.1f}% ±{100 * 1.96 * math.sqrt(p * (1 - p) / reps):.1f}"

    lines = ["| true gap | decided: difference | wrong sign | decided: equivalent | coverage of the interval at the "
             f"stop | mean seeds a side | fixed-sample t re-tested each round, share p < {alpha:g} |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        gap = "0 (A/A)" if row.gap_sds == 0 else f"{row.gap_sds:g} seed SD"
        lines.append(f"| {gap} | {rate(row.difference, row.reps)} | {rate(row.wrong_sign, row.reps)} | "
                     f"{rate(row.equivalent, row.reps)} | {rate(row.coverage, row.reps)} | {row.mean_seeds:.1f} | "
                     f"{rate(row.naive_rejections, row.reps)} |")
    return lines


__all__ = [
    "DIFFERENCE", "EQUIVALENT", "UNDECIDED", "PairedDraw", "SequentialCalibration", "SequentialInterval", "calibrate",
    "calibration_table", "confidence_sequence", "decide", "fewest_seeds", "gaussian_pairs", "half_width_factor", "prior_precision",
    "simulate",
]
