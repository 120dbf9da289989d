"""How many seeds a gap needs: per configuration and task, from the observed seed SD and item variance.

For two configurations with k seeds each, scored on the same items, the gap's variance is taken as
2 s2_seeds / k + 2 V_items (the items unpaired: an upper bound, since two models' item errors correlate
positively), tested two-sided with Welch's t (2k - 2 df). ``stats.minimum_detectable_effect`` gives the MDE at the
row's own seed count, ``stats.seeds_needed`` the seeds per side for a target gap at the given power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from antlm_bench.results.leaderboard.definition import MACRO
from antlm_bench.results.leaderboard.model import Leaderboard
from antlm_bench.results.stats import minimum_detectable_effect, seeds_needed


@dataclass
class PowerLine:
    row: tuple[str, ...]
    column: str
    n_seeds: int
    seed_sd: float | None  # observed SD of the per-seed scores (fraction)
    item_se: float | None  # standard error from item sampling alone (fraction)
    mde_now: float | None  # MDE of a comparison with n_seeds a side (fraction)
    seeds_for_gap: int | None  # seeds per side to detect the target gap; None: not reachable (or unknown)
    reachable: bool


def power_lines(board: Leaderboard, gap: float, alpha: float = 0.05, power: float = 0.8,
                seed_sd: float | None = None) -> list[PowerLine]:
    """One line per (row, column) of ``board``; ``gap`` and ``seed_sd`` are fractions (0.01 = one point)."""
    out = []
    for row in board.rows:
        cells = [*row.cells.items(), *([(MACRO, row.macro)] if row.macro is not None else [])]
        for column, cell in cells:
            sd = cell.spread if cell.spread is not None else seed_sd
            item_var = cell.item_var
            if sd is None or item_var is None:
                out.append(PowerLine(row.key, column, cell.n_seeds, cell.spread,
                                     None if item_var is None else math.sqrt(item_var), None, None, False))
                continue
            k = cell.n_seeds
            mde = None
            if k >= 2:
                mde = minimum_detectable_effect(math.sqrt(2 * sd**2 / k + 2 * item_var), 2 * k - 2, alpha, power)
            needed = seeds_needed(gap, sd, 2 * item_var, alpha, power)
            out.append(PowerLine(row.key, column, k, cell.spread, math.sqrt(item_var), mde, needed,
                                 needed is not None))
    return out
