"""Bootstrap intervals and paired comparisons.

A task score is the unweighted mean of its subtask scores, so its interval comes from a stratified bootstrap:
each replicate resamples items within every subtask (clusters of items that belong together, such as EWoK's
original/swapped pairs, are resampled as one), recomputes each subtask's accuracy, and averages them.
Comparisons between two runs scored on the same items resample the *same* items for both (paired bootstrap).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 20241204  # fixed so that intervals are reproducible run to run


def win_score(good: np.ndarray, bad: np.ndarray) -> np.ndarray:
    """1 for a win, 0.5 for a tie, 0 for a loss: a tie is never counted as correct."""
    good = np.asarray(good, dtype=np.float64)
    bad = np.asarray(bad, dtype=np.float64)
    return np.where(good > bad, 1.0, np.where(good == bad, 0.5, 0.0))


def _cluster_sums(values: np.ndarray, groups: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums and sizes (each item its own cluster when groups is None)."""
    if groups is None:
        return values, np.ones_like(values)
    _, inverse = np.unique(groups, return_inverse=True)
    sums = np.bincount(inverse, weights=values)
    sizes = np.bincount(inverse).astype(np.float64)
    return sums, sizes


def _replicate_means(values: np.ndarray, groups: np.ndarray | None, resamples: int, rng: np.random.Generator):
    sums, sizes = _cluster_sums(values, groups)
    picks = rng.integers(0, len(sums), size=(resamples, len(sums)))
    return sums[picks].sum(axis=1) / sizes[picks].sum(axis=1)


@dataclass
class Interval:
    value: float
    low: float
    high: float


def bootstrap_mean(
    values: Sequence[float],
    groups: Sequence | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> Interval:
    """Mean of ``values`` with a percentile bootstrap interval (clusters from ``groups``)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    replicates = _replicate_means(array, None if groups is None else np.asarray(groups), resamples, rng)
    alpha = (1 - level) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    value = float(array.mean())
    # the percentile interval of a mean always brackets the mean in practice; clamp for exact ties of quantiles
    return Interval(value, float(min(low, value)), float(max(high, value)))


def bootstrap_macro(
    subtask_values: Mapping[str, Sequence[float]],
    subtask_groups: Mapping[str, Sequence] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> Interval:
    """Unweighted mean over subtasks of their item means, with a stratified bootstrap interval."""
    names = sorted(subtask_values)
    if not names:
        return Interval(float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    point = np.mean([np.mean(np.asarray(subtask_values[n], dtype=np.float64)) for n in names])
    replicates = np.zeros(resamples)
    for name in names:
        groups = None if subtask_groups is None or name not in subtask_groups else np.asarray(subtask_groups[name])
        replicates += _replicate_means(np.asarray(subtask_values[name], dtype=np.float64), groups, resamples, rng)
    replicates /= len(names)
    alpha = (1 - level) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    return Interval(float(point), float(min(low, point)), float(max(high, point)))


@dataclass
class PairedComparison:
    delta: float  # mean(a) - mean(b), macro over subtasks
    low: float
    high: float
    p_value: float  # two-sided: how often the resampled delta crosses zero
    n_items: int


def paired_bootstrap(
    a: Mapping[str, Sequence[float]],
    b: Mapping[str, Sequence[float]],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> PairedComparison:
    """Paired, stratified bootstrap of the macro difference a - b over items shared by both runs.

    ``a[subtask]`` and ``b[subtask]`` must list per-item correctness in the same item order.
    """
    names = sorted(set(a) & set(b))
    if not names:
        raise ValueError("no subtask in common")
    rng = np.random.default_rng(seed)
    diffs = {}
    for name in names:
        va, vb = np.asarray(a[name], dtype=np.float64), np.asarray(b[name], dtype=np.float64)
        if va.shape != vb.shape:
            raise ValueError(f"subtask {name}: {va.size} items vs {vb.size}; paired comparison needs the same items")
        diffs[name] = va - vb
    point = float(np.mean([d.mean() for d in diffs.values()]))
    replicates = np.zeros(resamples)
    for name in names:
        replicates += _replicate_means(diffs[name], None, resamples, rng)
    replicates /= len(names)
    alpha = (1 - level) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    p_value = bootstrap_p_value(replicates)
    return PairedComparison(point, float(low), float(high), p_value, int(sum(d.size for d in diffs.values())))


def bootstrap_p_value(replicates: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "the mean difference is zero": twice the smaller tail mass beyond zero.

    Counted as (hits + 1) / (B + 1), so a p-value is never 0: B replicates cannot resolve anything below 1/(B+1).
    """
    b = replicates.size
    tail = min(int(np.sum(replicates <= 0)), int(np.sum(replicates >= 0)))
    return float(min(1.0, 2 * (tail + 1) / (b + 1)))


def _confusion_metric(counts: np.ndarray, metric: str) -> np.ndarray:
    """Metric from confusion-cell counts [..., 4] ordered (tp, fp, fn, tn) for f1, or [..., 2] (right, wrong)."""
    if metric == "accuracy":
        return counts[..., 0] / counts.sum(axis=-1)
    tp, fp, fn = counts[..., 0], counts[..., 1], counts[..., 2]
    denominator = 2 * tp + fp + fn
    # scikit-learn's f1_score with zero_division=0: no positive predicted or present -> 0
    return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)


def bootstrap_classification(
    strata: Mapping[str, tuple[Sequence[int], Sequence[int], str]],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> Interval:
    """Unweighted mean over strata of a classification metric, with a stratified bootstrap over examples.

    ``strata[name] = (labels, predictions, metric)`` with metric ``accuracy`` or ``f1`` (binary, positive class 1).
    One stratum gives that stratum's own interval; GLUE's score is the mean over its tasks (F1 for MRPC and QQP).
    Both metrics depend on the resampled examples only through their confusion-cell counts, and the counts of a
    resample of n examples are Multinomial(n, observed cell shares): drawing those counts directly is the same
    bootstrap as resampling the examples, in O(resamples) memory even for QQP's 20k examples.
    """
    names = sorted(strata)
    if not names:
        return Interval(float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    point = 0.0
    replicates = np.zeros(resamples)
    for name in names:
        labels, predictions, metric = strata[name]
        y, p = np.asarray(labels), np.asarray(predictions)
        if y.size == 0:
            raise ValueError(f"stratum {name}: no examples")
        if metric == "accuracy":
            counts = np.array([np.sum(y == p), np.sum(y != p)], dtype=np.int64)
        elif metric == "f1":
            counts = np.array(
                [np.sum((p == 1) & (y == 1)), np.sum((p == 1) & (y != 1)), np.sum((p != 1) & (y == 1)),
                 np.sum((p != 1) & (y != 1))], dtype=np.int64,
            )
        else:
            raise ValueError(f"unknown metric {metric!r}")
        point += float(_confusion_metric(counts.astype(np.float64), metric))
        drawn = rng.multinomial(y.size, counts / y.size, size=resamples).astype(np.float64)
        replicates += _confusion_metric(drawn, metric)
    point /= len(names)
    replicates /= len(names)
    alpha = (1 - level) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    return Interval(point, float(min(low, point)), float(max(high, point)))
