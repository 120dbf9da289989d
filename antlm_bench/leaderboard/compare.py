"""Gaps between two board rows, task by task and for the macro."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from antlm_bench.leaderboard.definition import MACRO, Z95
from antlm_bench.leaderboard.model import BoardRow, Cell, Comparison, ItemSet
from antlm_bench.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, _replicate_means

# ----------------------------------------------------------------------------------------------------------
# comparisons


def hierarchical_replicates(
    tasks: Mapping[str, Mapping[str, tuple[np.ndarray, np.ndarray | None]]],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, np.ndarray]:
    """Point and bootstrap replicates of mean over tasks of mean over subtasks of mean over items.

    ``tasks[task][subtask] = (values, groups)``. Items are resampled within each subtask (clusters from ``groups``
    as one), as ``stats.bootstrap_macro`` does; the two levels of unweighted means match how task and macro scores
    are defined (a plain mean over all subtasks would weight BLiMP's 67 paradigms over the supplement's 5).
    For one task without clusters this draws exactly what ``stats.paired_bootstrap`` draws.
    """
    rng = np.random.default_rng(seed)
    replicates = np.zeros(resamples)
    points = []
    for task in sorted(tasks):
        subtasks = tasks[task]
        task_reps = np.zeros(resamples)
        for name in sorted(subtasks):
            values, groups = subtasks[name]
            task_reps += _replicate_means(np.asarray(values, dtype=np.float64), groups, resamples, rng)
        replicates += task_reps / len(subtasks)
        points.append(np.mean([np.mean(subtasks[n][0]) for n in sorted(subtasks)]))
    return float(np.mean(points)), replicates / len(tasks)


def _percentile_interval(point: float, replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    alpha = (1 - level) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    return float(low), float(high)


def _two_sided_p(replicates: np.ndarray) -> float:
    tail = min(np.mean(replicates <= 0), np.mean(replicates >= 0))
    return float(min(1.0, 2 * tail))


def _normal_p(z: float) -> float:
    return math.erfc(abs(z) / math.sqrt(2))


def unpaired_gap(a: Cell, b: Cell, alpha: float) -> tuple[float, float | None, float | None, float | None]:
    """(delta, low, high, p) of a - b from the two 95% intervals, as independent normal errors.

    Scores of two models on the *same* items are positively correlated, so this overstates the noise of the
    gap: an unpaired verdict of "significant" is conservative.
    """
    delta = a.value - b.value
    if None in (a.low, a.high, b.low, b.high):
        return delta, None, None, None
    se = math.sqrt(((a.high - a.low) / (2 * Z95)) ** 2 + ((b.high - b.low) / (2 * Z95)) ** 2)
    if se == 0:
        return delta, delta, delta, (1.0 if delta == 0 else 0.0)
    return delta, delta - Z95 * se, delta + Z95 * se, _normal_p(delta / se)


def _aligned_diffs(a: ItemSet, b: ItemSet) -> dict[str, tuple[np.ndarray, np.ndarray | None]] | None:
    out = {}
    for subtask in sorted(set(a.subtasks) & set(b.subtasks)):
        ids_a, va, ga = a.subtasks[subtask]
        ids_b, vb, _ = b.subtasks[subtask]
        common, ia, ib = np.intersect1d(ids_a, ids_b, return_indices=True)
        if common.size:
            out[subtask] = (va[ia] - vb[ib], None if ga is None else ga[ia])
    return out or None


def compare(a: BoardRow, b: BoardRow, columns: Sequence[str], macro_columns: Sequence[str], alpha: float = 0.05,
            resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> list[Comparison]:
    """Gaps a - b for every column both rows have, and for the macro; paired over items where both have them."""
    out: list[Comparison] = []
    diffs_by_column: dict[str, dict[str, tuple[np.ndarray, np.ndarray | None]]] = {}
    for column in columns:
        if column not in a.cells or column not in b.cells:
            continue
        ca, cb = a.cells[column], b.cells[column]
        scoring = ca.scoring if ca.scoring == cb.scoring else f"{ca.scoring} vs {cb.scoring}"
        diffs = _aligned_diffs(ca.items, cb.items) if ca.items and cb.items else None
        if diffs is not None:
            diffs_by_column[column] = diffs
            point, reps = hierarchical_replicates({column: diffs}, resamples, seed)
            low, high = _percentile_interval(point, reps, 1 - alpha)
            p = _two_sided_p(reps)
            n = int(sum(d.size for d, _ in diffs.values()))
            out.append(Comparison(a.key, b.key, column, point, low, high, p, True, n, p < alpha, scoring))
        else:
            delta, low, high, p = unpaired_gap(ca, cb, alpha)
            out.append(Comparison(a.key, b.key, column, delta, low, high, p, False, 0,
                                  None if p is None else p < alpha, scoring))
    if a.macro is not None and b.macro is not None:
        if all(c in diffs_by_column for c in macro_columns):
            point, reps = hierarchical_replicates({c: diffs_by_column[c] for c in macro_columns}, resamples, seed)
            low, high = _percentile_interval(point, reps, 1 - alpha)
            p = _two_sided_p(reps)
            n = int(sum(d.size for c in macro_columns for d, _ in diffs_by_column[c].values()))
            out.append(Comparison(a.key, b.key, MACRO, point, low, high, p, True, n, p < alpha, "auto"))
        else:
            delta, low, high, p = unpaired_gap(a.macro, b.macro, alpha)
            out.append(Comparison(a.key, b.key, MACRO, delta, low, high, p, False, 0,
                                  None if p is None else p < alpha, "auto"))
    return out

