"""How many seeds a gap needs: per configuration and task, from the observed seed SD and item variance.

The board tests two configurations with the same seeds by pairing them (``stats.paired_seeds``): the gap's
variance with k seeds a side is 2 s2_seeds / k + 2 V_items (matched seeds taken as uncorrelated and the items
unpaired: upper bounds, since both correlate positively), on k - 1 df. ``stats.minimum_detectable_effect`` gives
the MDE at the row's own seed count, ``stats.seeds_needed`` the seeds per side for a target gap at the given
power. A seed SD estimated on k seeds is itself uncertain: its chi-square interval (``stats.seed_sd_interval``)
turns the seed count into a range, printed beside it with the number of seeds the SD rests on.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

from antlm_bench.results.leaderboard.definition import MACRO, metric_kind
from antlm_bench.results.leaderboard.model import Cell, Leaderboard
from antlm_bench.results.stats import minimum_detectable_effect, seed_sd_interval, seeds_needed


@dataclass
class PowerLine:
    row: tuple[str, ...]
    column: str
    n_seeds: int
    seed_sd: float | None  # the seed SD used (fraction): the row's observed one, else the given one
    sd_seeds: int | None  # how many seeds the SD rests on; None when it was given (--seed-sd)
    item_se: float | None  # standard error from item sampling alone (fraction)
    mde_now: float | None  # MDE of a paired comparison with n_seeds a side (fraction)
    seeds_for_gap: int | None  # seeds per side to detect the target gap at seed_sd; None: not reachable
    reachable: bool
    # seeds per side at the low and high end of the seed SD's 95% interval (None: not reachable / no interval)
    seeds_low: int | None = None
    seeds_high: int | None = None
    sd_interval: tuple[float, float] | None = None
    # the seeds scored exactly alike (SD 0: a model that ties every item?): no seed variance was measured, so no
    # seed count can be read from it (zero variance would "need" 2 seeds for any gap)
    no_seed_variance: bool = False


def power_lines(board: Leaderboard, gap: float, alpha: float = 0.05, power: float = 0.8,
                seed_sd: float | None = None) -> list[PowerLine]:
    """One line per (row, column) of ``board`` whose metric is a percentage; ``gap`` and ``seed_sd`` are fractions
    (0.01 = one point). A margin or a loss (nats) has no points to read a gap of points against: left out."""
    out = []
    for row in board.rows:
        cells = [*row.cells.items(), *([(MACRO, row.macro)] if row.macro is not None else [])]
        for column, cell in cells:
            if metric_kind(cell.metric).unit != "%":
                continue
            observed = cell.spread is not None
            sd = cell.spread if observed else seed_sd
            item_var = cell.item_var
            item_se = None if item_var is None else math.sqrt(item_var)
            if sd is None or item_var is None:
                out.append(PowerLine(row.key, column, cell.n_seeds, sd, None, item_se, None, None, False))
                continue
            if observed and sd == 0.0:
                out.append(PowerLine(row.key, column, cell.n_seeds, sd, cell.n_seeds, item_se, None, None, False,
                                     no_seed_variance=True))
                continue
            k = cell.n_seeds
            mde = None
            if k >= 2:
                mde = minimum_detectable_effect(math.sqrt(2 * sd**2 / k + 2 * item_var), k - 1, alpha, power)
            needed = seeds_needed(gap, sd, 2 * item_var, alpha, power)
            line = PowerLine(row.key, column, k, sd, k if observed else None, item_se, mde, needed,
                             needed is not None)
            if observed:
                low, high = seed_sd_interval(sd, k)
                line.sd_interval = (low, high)
                line.seeds_low = seeds_needed(gap, low, 2 * item_var, alpha, power)
                line.seeds_high = seeds_needed(gap, high, 2 * item_var, alpha, power)
            out.append(line)
    return out


@dataclass(frozen=True)
class PilotEstimate:
    """What ``antlm-bench plan --pilot`` reads from a pilot's board for one column, in the column's shown units."""

    column: str
    seed_sd: float  # pooled over the rows with >= 2 seeds: sqrt(sum (k_r - 1) s_r^2 / sum (k_r - 1))
    sd_df: int  # sum (k_r - 1): the degrees of freedom the pooled SD rests on
    rows: int  # rows that gave it
    correlation: float | None  # mean same-seed correlation of each row with the reference row (Fisher z); None
    pairs: int  # seeds paired with the reference over all rows (each row needs >= 3 to count)
    # per row with >= 3 seeds shared with its reference: (its key, the SD of its same-seed differences to the
    # reference, in the column's shown units, and how many seeds): the noise of that one comparison, which the
    # pooled SD and the mean correlation only approximate
    paired_sds: tuple[tuple[tuple[str, ...], float, int], ...] = ()


def _seed_subset(cell: Cell, seeds: Collection[str] | None) -> Cell:
    """The cell with only the per-seed scores of ``seeds`` (labels; None: all): a frozen pilot."""
    if seeds is None:
        return cell
    kept = [(label, value) for label, value in zip(cell.seed_labels, cell.seed_values) if label in seeds]
    return replace(cell, seed_labels=[label for label, _ in kept], seed_values=[value for _, value in kept])


def pilot_estimate(board: Leaderboard, column: str,
                   reference_of: Callable[[tuple[str, ...]], tuple[str, ...] | None] | None = None,
                   seeds: Collection[str] | None = None) -> PilotEstimate | None:
    """The pooled seed SD of ``column`` over the board's rows, and (given ``reference_of``: a row's key -> the key
    of the row it is compared with, e.g. the baseline schedule of its recipe) the correlation of each row's
    same-seed scores with its reference's; None when no row has two seeds on that column. ``seeds``: only these
    seed labels count (a pilot frozen at the seeds a design was planned from, in a folder that has grown since)."""
    cells = [(row.key, row.macro if column == MACRO else row.cells.get(column)) for row in board.rows]
    cells = [(key, _seed_subset(cell, seeds)) for key, cell in cells if cell is not None]
    cells = [(key, cell) for key, cell in cells if len(cell.seed_values) >= 2]
    if not cells:
        return None
    scale = metric_kind(cells[0][1].metric).scale
    df = sum(len(cell.seed_values) - 1 for _, cell in cells)
    pooled = sum((len(c.seed_values) - 1) * statistics.variance(c.seed_values) for _, c in cells) / df
    by_key = dict(cells)
    zs, weights, pairs = [], [], 0
    paired: list[tuple[tuple[str, ...], float, int]] = []
    for key, cell in cells:
        reference = reference_of(key) if reference_of is not None else None
        base = by_key.get(reference) if reference is not None and reference != key else None
        if base is not None:
            theirs = dict(zip(base.seed_labels, base.seed_values))
            common = [(v, theirs[s]) for s, v in zip(cell.seed_labels, cell.seed_values) if s in theirs]
            if len(common) < 3:
                continue
            mine, other = zip(*common)
            paired.append((key, statistics.stdev(m - o for m, o in common) * scale, len(common)))
            if statistics.pstdev(mine) == 0 or statistics.pstdev(other) == 0:
                continue
            r = max(-0.999, min(0.999, statistics.correlation(mine, other)))
            zs.append(math.atanh(r))
            weights.append(len(common) - 3 if len(common) > 3 else 1)
            pairs += len(common)
    correlation = math.tanh(sum(w * z for w, z in zip(weights, zs)) / sum(weights)) if zs else None
    return PilotEstimate(column, math.sqrt(pooled) * scale, df, len(cells), correlation, pairs, tuple(paired))
