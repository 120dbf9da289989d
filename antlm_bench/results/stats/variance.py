"""Item-sampling variance of a score that several training seeds measured on the same items.

A cell of the board is one configuration scored on one task: per seed s = 1..k and item i = 1..n a correctness
c[s, i] (1 win, 0.5 tie, 0 loss). The same items serve every seed, so the design is two-way crossed:

    c[s, i] = mu + a_i + b_s + e_si        a: item effect, b: seed effect, e: seed-by-item residual

The score's error has two sources, items (the eval set is a sample) and seeds (the training run is a sample):

    Var(mean) = s2_a / n + s2_b / k + s2_e / (n k)

The across-seed variance of the per-seed scores estimates s2_b + s2_e / n, the item variance of the seed-averaged
correctness estimates s2_a + s2_e / k: adding both would count the residual twice. So the item part kept here is

    V_items = (var_i(mean_s c[s, i]) - MS_e / k) / n,   MS_e = sum (c - row - column + grand)^2 / ((n-1)(k-1))

(the two-way ANOVA estimator, floored at 0), and the seed part comes from the per-seed scores (``inference``).
A task is the unweighted mean of S subtasks (strata), so its item part is sum_j V_items_j / S^2. Items that must
move together (EWoK's original/swapped pairs) are first summed into clusters and linearised as a ratio mean.
With one seed there is no residual to separate: V_items is the plain item variance of that seed's score.
See docs/statistics.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


@dataclass
class ItemMatrix:
    """One subtask of one cell: correctness per seed (rows, in the cell's seed order) and item (columns)."""

    ids: np.ndarray  # item ids, sorted
    correct: np.ndarray  # [k seeds, n items]
    groups: np.ndarray | None = None  # cluster of each item (a name or a code), None when each stands alone

    def clustered(self) -> np.ndarray:
        """[k, clusters] linearised values whose column mean is each seed's subtask accuracy."""
        if self.groups is None:
            return self.correct
        _, inverse = np.unique(self.groups, return_inverse=True)
        sizes = np.bincount(inverse).astype(np.float64)
        totals = np.stack([np.bincount(inverse, weights=row) for row in self.correct])
        if np.all(sizes == sizes[0]):
            return totals / sizes[0]
        # ratio mean sum(t) / sum(m): its linearisation (t - ratio m) / mean(m) + ratio has the same variance
        ratio = totals.sum(axis=1, keepdims=True) / sizes.sum()
        return (totals - ratio * sizes) / sizes.mean() + ratio


def _item_component(values: np.ndarray) -> float:
    """Item part of Var(grand mean) of a [k, n] matrix, residual removed (see the module docstring)."""
    k, n = values.shape
    if n < 2:
        return 0.0
    item_means = values.mean(axis=0)
    between_items = float(np.var(item_means, ddof=1))
    if k < 2:
        return between_items / n
    residual = values - item_means[None, :] - values.mean(axis=1, keepdims=True) + values.mean()
    ms_residual = float(np.sum(residual**2)) / ((n - 1) * (k - 1))
    return max(0.0, between_items - ms_residual / k) / n


def _residual_ms(values: np.ndarray) -> float:
    """Seed-by-item residual mean square of a [k, n] matrix (0 with one seed: not estimable)."""
    k, n = values.shape
    if k < 2 or n < 2:
        return 0.0
    residual = values - values.mean(axis=0)[None, :] - values.mean(axis=1, keepdims=True) + values.mean()
    return float(np.sum(residual**2)) / ((n - 1) * (k - 1))


def per_seed_scores(subtasks: Mapping[str, ItemMatrix]) -> np.ndarray:
    """Each seed's task score: the unweighted mean over subtasks of its accuracy on that subtask's items."""
    return np.mean([m.correct.mean(axis=1) for m in subtasks.values()], axis=0)


def item_variance(subtasks: Mapping[str, ItemMatrix]) -> float:
    """Item-sampling variance of one configuration's task score (mean over subtasks, seeds averaged)."""
    if not subtasks:
        return 0.0
    total = sum(_item_component(m.clustered()) for m in subtasks.values())
    return total / len(subtasks) ** 2


def _aligned(a: ItemMatrix, b: ItemMatrix) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' clustered matrices on the items (clusters) they share, in one order."""
    if np.array_equal(a.ids, b.ids):  # the usual case: both sides scored one item set
        return a.clustered(), ItemMatrix(a.ids, b.correct, a.groups).clustered()
    common, ia, ib = np.intersect1d(a.ids, b.ids, return_indices=True)
    groups = None if a.groups is None else a.groups[ia]
    left = ItemMatrix(common, a.correct[:, ia], groups).clustered()
    right = ItemMatrix(common, b.correct[:, ib], groups).clustered()
    return left, right


def shared_items(a: Mapping[str, ItemMatrix], b: Mapping[str, ItemMatrix]) -> int:
    """How many items both sides scored, over the subtasks both have."""
    return int(sum(a[s].ids.size if np.array_equal(a[s].ids, b[s].ids) else np.intersect1d(a[s].ids, b[s].ids).size
                   for s in set(a) & set(b)))


def item_variance_of_difference(a: Mapping[str, ItemMatrix], b: Mapping[str, ItemMatrix], design: str) -> float:
    """Item part of Var(score_a - score_b) when both sides scored the same items (paired by item).

    ``design``:
    - ``same-seed``: the seeds are fixed (a code change under deterministic training); the only sampling is the
      items', so the plain item variance of the seed-averaged per-item differences.
    - ``paired-seeds``: seed s of a is matched with seed s of b; the matched difference matrix is one cell.
    - ``unpaired-seeds``: the seed-averaged per-item differences, minus both sides' residuals (a one-seed side,
      whose residual is not estimable, is taken to have the other side's).
    """
    names = sorted(set(a) & set(b))
    if not names:
        return 0.0
    total = 0.0
    for name in names:
        left, right = _aligned(a[name], b[name])
        if left.shape[1] < 2:
            continue
        if design == "same-seed":
            total += float(np.var(left.mean(axis=0) - right.mean(axis=0), ddof=1)) / left.shape[1]
        elif design == "paired-seeds":
            total += _item_component(left - right)
        else:
            n = left.shape[1]
            between = float(np.var(left.mean(axis=0) - right.mean(axis=0), ddof=1))
            ms_left, ms_right = _residual_ms(left), _residual_ms(right)
            # a one-seed side has no residual of its own to remove; its seed part (a seed SD of the same
            # configuration, ``inference.pooled``) already holds it, so the other side's residual stands in
            ms_left = ms_right if left.shape[0] == 1 else ms_left
            ms_right = ms_left if right.shape[0] == 1 else ms_right
            overlap = ms_left / left.shape[0] + ms_right / right.shape[0]
            total += max(0.0, between - overlap) / n
    return total / len(names) ** 2
