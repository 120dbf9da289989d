"""Intervals and tests over training seeds and items: Student-t on the seeds' degrees of freedom.

A configuration's score on a task is the mean of its k seeds' scores. Its variance has a seed part, estimated by
the sample variance of the per-seed scores (k - 1 degrees of freedom), and an item part from ``variance``
(thousands of items: treated as known). The interval is

    mean +- t(k - 1, 1 - alpha/2) * sqrt(s2_seeds / k + V_items)

The degrees of freedom are the seed part's alone (k - 1; for a difference see the designs below). Adding the
item part to a Satterthwaite df would raise it exactly when the seeds happen to agree,
which is when the interval is already too short: in the calibration simulations that cost 2-3 points of
coverage at 3 seeds. With 3 seeds t(2) = 4.30: wide, and honest. A bootstrap over 3 seeds is not used: no replicate can leave the seeds' range, so it under-covers.
One seed: the seed part is unknown. The interval covers the items only and says so, unless the caller knows
the seed SD (``seed_sd``), which then enters with infinite degrees of freedom.

Comparisons pick a design from the seeds on each side (``choose_design``); each design is one documented function
(``same_seed``, ``paired_seeds``, ``welch``, ``pooled``, ``untested``) that a sequential procedure can call
alone, and ``difference`` dispatches to them by name:
- ``same-seed``: both sides trained the *same networks* (equal weights digests, seed for seed: a change
  after training, e.g. to scoring): only the items vary, paired by item (normal). The same seed number is not
  enough: a training-code change that re-draws masks, data order or initialisation gives a new network;
- ``paired-seeds``: the same seed labels on both sides: the per-seed differences, t with k - 1 df, paired by item
  within each seed;
- ``welch``: seeds on both sides, not matched: Welch's standard error over seeds plus the paired item part, on
  min(k_a, k_b) - 1 df (Hsu: the Satterthwaite df is liberal at 3 seeds a side when the seed SDs differ);
- ``pooled``: one side has a single seed and the seed SD is known for *that* configuration: given by the user
  (``--seed-sd``, infinite df) or recorded from k >= 3 seeds of the same configuration (k - 1 df). A seed SD is
  never borrowed from another configuration: seed SDs differ by up to 13x between configurations;
- ``unknown``: one seed on a side and no seed SD of its configuration: the test is over items only and never
  called significant.
See docs/statistics.md for the formulas and the calibration tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# scipy.special's functions, which scipy.stats's t, normal and chi-square distributions call (the same numbers;
# scipy.stats itself takes most of a second to import, on every command that prints an interval)
from scipy import special as _special

# the smallest p-value a table stores: a t tail can underflow to 0.0, and "p = 0" is never true
P_FLOOR = 1e-300


@dataclass
class Estimate:
    """A configuration's score with its interval; ``method`` names how the interval was made."""

    value: float
    low: float
    high: float
    se: float
    df: float
    n_seeds: int
    seed_sd: float | None  # sample SD of the per-seed scores (None with one seed)
    item_se: float
    method: str


@dataclass
class Difference:
    """a - b with its interval, test and minimum detectable effect (all in score units, not points)."""

    delta: float
    low: float | None
    high: float | None
    se: float
    df: float
    p_value: float | None  # None when the design cannot test (seed variance unknown)
    design: str
    mde: float | None  # smallest |delta| detected with 80% power at alpha, from this se and df
    note: str = ""


def _t_quantile(q: float, df: float) -> float:
    return float(_special.ndtri(q)) if not math.isfinite(df) else float(_special.stdtrit(df, q))


def _chi2_quantile(q: float, df: float) -> float:
    return float(2 * _special.gammaincinv(df / 2, q))


def _two_sided_p(t_stat: float, df: float) -> float:
    tail = _special.ndtr(-abs(t_stat)) if not math.isfinite(df) else _special.stdtr(df, -abs(t_stat))
    return float(max(P_FLOOR, min(1.0, 2 * tail)))


def satterthwaite_df(seed_parts: Sequence[tuple[float, float]], item_part: float) -> float:
    """Welch-Satterthwaite df of sum(seed_parts) + item_part; seed_parts = [(variance, its df)], items known."""
    total = sum(v for v, _ in seed_parts) + item_part
    denominator = sum(v**2 / d for v, d in seed_parts if d > 0 and v > 0)
    if denominator == 0:
        return math.inf
    return total**2 / denominator


def minimum_detectable_effect(se: float, df: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true |delta| a two-sided test at ``alpha`` detects with probability ``power`` (t approximation)."""
    return (_t_quantile(1 - alpha / 2, df) + _t_quantile(power, df)) * se


def estimate(values: Sequence[float], item_var: float, alpha: float = 0.05,
             seed_sd: float | None = None) -> Estimate:
    """Mean of the per-seed ``values`` with a (1 - alpha) interval over seeds and items (module docstring)."""
    y = np.asarray(values, dtype=np.float64)
    k = y.size
    sd = float(np.std(y, ddof=1)) if k > 1 else None
    if k > 1:
        seed_var, seed_df, method = sd**2 / k, k - 1, f"t over {k} seeds + items"
    elif seed_sd is not None:
        seed_var, seed_df, method = seed_sd**2, math.inf, "1 seed, given seed SD + items"
    else:
        seed_var, seed_df, method = 0.0, math.inf, "items only (1 seed: seed variance unknown)"
    se = math.sqrt(seed_var + item_var)
    df = float(seed_df)
    half = _t_quantile(1 - alpha / 2, df) * se
    mean = float(y.mean())
    return Estimate(mean, mean - half, mean + half, se, df, k, sd, math.sqrt(item_var), method)


@dataclass(frozen=True)
class SeedSD:
    """A configuration's training-seed SD of a score known from outside the two sides' own spread.

    ``df``: infinite when given (``--seed-sd``), else the k - 1 of the k seeds it was estimated on.
    """

    value: float  # score units (0.01 = one point)
    df: float
    source: str  # what it rests on, for the report


# a seed SD recorded from fewer seeds is not used for a one-seed side: on 1 df (t = 12.7) a test cannot flag
# anything short of a collapse, and the chi-square interval of an SD from 2 seeds spans a factor of 70
MIN_SEEDS_FOR_RECORDED_SD = 3


def recorded_seed_sd(values: Sequence[float]) -> SeedSD | None:
    """The seed SD of one configuration from its own per-seed scores (None below MIN_SEEDS_FOR_RECORDED_SD)."""
    y = np.asarray(values, dtype=np.float64)
    if y.size < MIN_SEEDS_FOR_RECORDED_SD:
        return None
    return SeedSD(float(np.std(y, ddof=1)), float(y.size - 1), f"seed SD of the same configuration's {y.size} seeds")


def _finish(delta: float, seed_parts: list[tuple[float, float]], item_var: float, design: str, note: str,
            alpha: float, power: float, tested: bool = True, df: float | None = None) -> Difference:
    """Interval, p-value and MDE from the seed parts [(variance, df)] and the (known) item part; ``df``
    overrides the Satterthwaite df of the seed parts."""
    se = math.sqrt(sum(v for v, _ in seed_parts) + item_var)
    df = satterthwaite_df(seed_parts, 0.0) if df is None else df
    mde = minimum_detectable_effect(se, df, alpha, power) if tested else None
    if se == 0:
        p = 1.0 if delta == 0 else P_FLOOR
        return Difference(delta, delta, delta, 0.0, df, p if tested else None, design, mde, note)
    half = _t_quantile(1 - alpha / 2, df) * se
    p = _two_sided_p(delta / se, df) if tested else None
    return Difference(delta, delta - half, delta + half, se, df, p, design, mde, note)


def same_seed(values_a: Sequence[float], values_b: Sequence[float], item_var: float, alpha: float = 0.05,
              power: float = 0.8) -> Difference:
    """Same networks on both sides (equal weights digests): items alone vary; normal reference.

    Valid only for the same networks: two runs that share a seed number but not their training draws are seed
    draws, and this test then calls their seed difference significant (docs/statistics.md, calibration).
    """
    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    return _finish(float(a.mean() - b.mean()), [], item_var, "same-seed", "the same networks on both sides: only "
                   "items vary", alpha, power)


def paired_seeds(values_a: Sequence[float], values_b: Sequence[float], item_var: float, alpha: float = 0.05,
                 power: float = 0.8) -> Difference:
    """Seed s of a against seed s of b (the lists in one seed order): t over the k per-seed differences, k - 1 df.

    Valid whether or not seed s means the same draws on both sides: the pairs are independent across seeds.
    """
    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    k = a.size
    return _finish(float(a.mean() - b.mean()), [(float(np.var(a - b, ddof=1)) / k, k - 1)], item_var,
                   "paired-seeds", f"{k} matched seeds", alpha, power)


def welch(values_a: Sequence[float], values_b: Sequence[float], item_var: float, alpha: float = 0.05,
          power: float = 0.8) -> Difference:
    """Unmatched seeds, >= 2 a side: Welch's standard error over seeds, on min(k_a, k_b) - 1 df (Hsu).

    The Satterthwaite df is liberal when the seed SDs differ and the seeds are few: A/A 7.5% at 3 against 3 with
    one side 5x noisier (docs/statistics.md); min(k_a, k_b) - 1 holds the level for any ratio of the SDs.
    """
    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    parts = [(float(np.var(a, ddof=1)) / a.size, a.size - 1), (float(np.var(b, ddof=1)) / b.size, b.size - 1)]
    return _finish(float(a.mean() - b.mean()), parts, item_var, "welch", f"{a.size} vs {b.size} seeds", alpha,
                   power, df=float(min(a.size, b.size) - 1))


def pooled(values_a: Sequence[float], values_b: Sequence[float], item_var: float, seed_sd: SeedSD,
           alpha: float = 0.05, power: float = 0.8) -> Difference:
    """A one-seed side with the seed SD of its own configuration (``SeedSD``): seed part sd^2 (1/k_a + 1/k_b).

    The caller vouches that ``seed_sd`` belongs to the configuration of *both* sides (given by the user, or
    recorded from seeds of the same configuration fingerprint); borrowed from another configuration it is not a
    test (A/A 13-35% in the calibration).
    """
    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    part = [(seed_sd.value**2 * (1 / a.size + 1 / b.size), seed_sd.df)]
    return _finish(float(a.mean() - b.mean()), part, item_var, "pooled",
                   f"seed SD {100 * seed_sd.value:.2f} pp ({seed_sd.source})", alpha, power)


def untested(values_a: Sequence[float], values_b: Sequence[float], item_var: float, alpha: float = 0.05,
             power: float = 0.8) -> Difference:
    """One seed on a side and no seed SD of its configuration: the delta with its items-only interval, no test."""
    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    return _finish(float(a.mean() - b.mean()), [], item_var, "unknown", "one seed on a side: seed variance unknown",
                   alpha, power, tested=False)


def choose_design(labels_a: Sequence, labels_b: Sequence, same_networks: bool = False,
                  seed_sd_known: bool = False) -> str:
    """The comparison design that fits the seeds on each side (module docstring).

    ``same_networks``: every seed of a trained the same network as the seed of b with its label (equal, known
    weights digests); ``seed_sd_known``: a ``SeedSD`` of the configuration is available for a one-seed side.
    """
    same_labels = sorted(map(str, labels_a)) == sorted(map(str, labels_b))
    if same_networks and same_labels:
        return "same-seed"
    if same_labels and len(labels_a) > 1:
        return "paired-seeds"
    if len(labels_a) > 1 and len(labels_b) > 1:
        return "welch"
    return "pooled" if seed_sd_known else "unknown"


DESIGNS = ("same-seed", "paired-seeds", "welch", "pooled", "unknown")


def difference(values_a: Sequence[float], values_b: Sequence[float], item_var: float, design: str,
               alpha: float = 0.05, seed_sd: SeedSD | None = None, power: float = 0.8) -> Difference:
    """a - b under ``design`` (one of DESIGNS); ``item_var`` is the item part of its variance (``variance``).

    For ``paired-seeds`` the two value lists must be in the same seed order; ``pooled`` needs ``seed_sd``.
    """
    if design == "same-seed":
        return same_seed(values_a, values_b, item_var, alpha, power)
    if design == "paired-seeds":
        return paired_seeds(values_a, values_b, item_var, alpha, power)
    if design == "welch":
        return welch(values_a, values_b, item_var, alpha, power)
    if design == "pooled":
        if seed_sd is None:
            raise ValueError("the pooled design needs the configuration's seed SD")
        return pooled(values_a, values_b, item_var, seed_sd, alpha, power)
    if design == "unknown":
        return untested(values_a, values_b, item_var, alpha, power)
    raise ValueError(f"unknown design {design!r}; choose one of {', '.join(DESIGNS)}")


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone); None stays None and is not counted."""
    indexed = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(indexed)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def seed_sd_interval(sd: float, n_seeds: int, level: float = 0.95) -> tuple[float, float]:
    """Chi-square interval of a seed SD estimated on ``n_seeds`` seeds: sd * sqrt(df / chi2(df, 1 -+ alpha/2)).

    With 3 seeds it spans 0.52 sd to 6.3 sd: a seed count planned from 3 seeds is a range, not a number.
    """
    df = n_seeds - 1
    if df < 1:
        raise ValueError("a seed SD needs at least 2 seeds")
    alpha = 1 - level
    return (sd * math.sqrt(df / _chi2_quantile(1 - alpha / 2, df)), sd * math.sqrt(df / _chi2_quantile(alpha / 2, df)))


def seeds_needed(gap: float, seed_sd: float, item_var: float, alpha: float = 0.05, power: float = 0.8,
                 most: int = 1000) -> int | None:
    """Seeds per side for the board's paired-seeds test of two configurations to detect ``gap`` with ``power``.

    The gap's variance with k seeds a side is 2 seed_sd^2 / k + item_var (the per-seed differences of two
    configurations with equal seed SD, taken as uncorrelated: an upper bound when matched seeds correlate), tested
    with t on k - 1 df (``paired_seeds``); ``item_var`` is the item part of the difference's variance. None when
    even ``most`` seeds a side do not reach it (the items' noise alone is too large).
    """
    for k in range(2, most + 1):
        se = math.sqrt(2 * seed_sd**2 / k + item_var)
        if minimum_detectable_effect(se, k - 1, alpha, power) <= abs(gap):
            return k
    return None
