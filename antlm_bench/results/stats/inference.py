"""Intervals and tests over training seeds and items: Student-t with Satterthwaite degrees of freedom.

A configuration's score on a task is the mean of its k seeds' scores. Its variance has a seed part, estimated by
the sample variance of the per-seed scores (k - 1 degrees of freedom), and an item part from ``variance``
(thousands of items: treated as known). The interval is

    mean +- t(k - 1, 1 - alpha/2) * sqrt(s2_seeds / k + V_items)

The degrees of freedom are the seed part's alone (k - 1; Welch-Satterthwaite over the two seed parts for a
difference). Adding the item part to a Satterthwaite df would raise it exactly when the seeds happen to agree,
which is when the interval is already too short: in the calibration simulations that cost 2-3 points of
coverage at 3 seeds. With 3 seeds t(2) = 4.30: wide, and honest. A bootstrap over 3 seeds is not used: no replicate can leave the seeds' range, so it under-covers.
One seed: the seed part is unknown. The interval covers the items only and says so, unless the caller knows
the seed SD (``seed_sd``), which then enters with infinite degrees of freedom.

Comparisons (``difference``) pick a design from the seeds on each side:
- ``same-seed``: the same configuration and the same seeds on both sides (a code change under deterministic
  training): only the items vary, paired by item (normal);
- ``paired-seeds``: the same seed labels on both sides: the per-seed differences, t with k - 1 df, paired by item
  within each seed;
- ``welch``: seeds on both sides, not matched: Welch's t over seeds plus the paired item part;
- ``pooled``: one side has a single seed: the seed variance is pooled from the side(s) with two or more seeds
  (or taken from ``seed_sd``);
- ``unknown``: one seed a side and no seed SD: the test is over items only and never called significant.
See docs/statistics.md for the formulas and the calibration tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _sp

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
    return float(_sp.norm.ppf(q)) if not math.isfinite(df) else float(_sp.t.ppf(q, df))


def _two_sided_p(t_stat: float, df: float) -> float:
    tail = _sp.norm.sf(abs(t_stat)) if not math.isfinite(df) else _sp.t.sf(abs(t_stat), df)
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


def _seed_part(a: np.ndarray, b: np.ndarray, design: str, seed_sd: float | None
               ) -> tuple[list[tuple[float, float]], str]:
    """[(variance, df)] of the seed part of mean(a) - mean(b), and a note."""
    ka, kb = a.size, b.size
    if design == "same-seed":
        return [], "seeds fixed on both sides: only items vary"
    if design == "paired-seeds":
        return [(float(np.var(a - b, ddof=1)) / ka, ka - 1)], f"{ka} matched seeds"
    if design == "welch":
        return [(float(np.var(a, ddof=1)) / ka, ka - 1), (float(np.var(b, ddof=1)) / kb, kb - 1)], \
            f"{ka} vs {kb} seeds"
    if seed_sd is not None:
        return [(seed_sd**2 * (1 / ka + 1 / kb), math.inf)], f"given seed SD {100 * seed_sd:.2f} pp"
    sides = [s for s in (a, b) if s.size > 1]
    if sides and design == "pooled":
        ss = sum(float(np.sum((s - s.mean()) ** 2)) for s in sides)
        df = sum(s.size - 1 for s in sides)
        return [(ss / df * (1 / ka + 1 / kb), df)], f"seed SD pooled from {df + len(sides)} seeds"
    return [], "1 seed a side: seed variance unknown"


def choose_design(labels_a: Sequence, labels_b: Sequence, same_configuration: bool = False,
                  seed_sd: float | None = None) -> str:
    """The comparison design that fits the seeds on each side (module docstring)."""
    same_labels = sorted(map(str, labels_a)) == sorted(map(str, labels_b))
    if same_configuration and same_labels:
        return "same-seed"
    if same_labels and len(labels_a) > 1:
        return "paired-seeds"
    if len(labels_a) > 1 and len(labels_b) > 1:
        return "welch"
    if seed_sd is not None or len(labels_a) > 1 or len(labels_b) > 1:
        return "pooled"
    return "unknown"


def difference(values_a: Sequence[float], values_b: Sequence[float], item_var: float, design: str,
               alpha: float = 0.05, seed_sd: float | None = None, power: float = 0.8) -> Difference:
    """a - b under ``design``; ``item_var`` is the item part of its variance (``variance`` module).

    For ``paired-seeds`` the two value lists must be in the same seed order.
    """
    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    delta = float(a.mean() - b.mean())
    seed_parts, note = _seed_part(a, b, design, seed_sd)
    se = math.sqrt(sum(v for v, _ in seed_parts) + item_var)
    df = satterthwaite_df(seed_parts, 0.0)
    known = design == "same-seed" or bool(seed_parts)
    mde = minimum_detectable_effect(se, df, alpha, power) if known else None
    if se == 0:
        p = 1.0 if delta == 0 else P_FLOOR
        return Difference(delta, delta, delta, 0.0, df, p if known else None, design, mde, note)
    half = _t_quantile(1 - alpha / 2, df) * se
    p = _two_sided_p(delta / se, df) if known else None
    return Difference(delta, delta - half, delta + half, se, df, p, design, mde, note)


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


def seeds_needed(gap: float, seed_sd: float, item_var: float, alpha: float = 0.05, power: float = 0.8,
                 most: int = 1000) -> int | None:
    """Seeds per side for a two-sided Welch test of two configurations to detect ``gap`` with ``power``.

    Assumes equal seed SD on both sides and the same items (``item_var``: item part of the difference's
    variance). None when even ``most`` seeds a side do not reach it (the items' noise alone is too large).
    """
    for k in range(2, most + 1):
        se = math.sqrt(2 * seed_sd**2 / k + item_var)
        df = 2 * k - 2
        if minimum_detectable_effect(se, df, alpha, power) <= abs(gap):
            return k
    return None
