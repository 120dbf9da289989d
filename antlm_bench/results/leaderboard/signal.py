"""Signal and noise per column: does a metric separate the board's configurations more than the seeds scatter them?

Signal and Noise (Heineman et al., arXiv 2508.13144) ranks benchmarks by the ratio of the spread between models
(signal) to the spread of one model's scores (noise); DataDecide (Magnusson et al., arXiv 2504.11393) asks how
often a comparison at small scale orders two configurations as the full one does. Per column of the board:

- **noise**: the pooled seed SD of the rows with >= 2 seeds, ``sqrt(sum_r (k_r - 1) s_r^2 / sum_r (k_r - 1))``;
- **signal**: the SD (ddof 1) of the rows' means (every row with the column). The paper's relative dispersion
  divides the largest gap by the mean score; a margin or a loss has no meaningful zero, so both stay in the
  metric's own units here, and their ratio is unit-free;
- **agreement**, per pair of rows: the share of the k_a x k_b pairs (seed of a, seed of b) whose two values order
  the rows as their means do (a tie counts half). 1.0: any single seed of each would have ranked them right;
  0.5: one seed each is a coin flip.

All three are descriptive: they say where more seeds (or a continuous metric) are needed, not whether a gap is
real (that is the gaps table's test).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from antlm_bench.results.leaderboard.definition import MACRO
from antlm_bench.results.leaderboard.model import BoardRow, Cell, SignalNoise


def pooled_seed_sd(cells: Sequence[Cell]) -> float | None:
    """The seed SD pooled over the cells with >= 2 seeds (each weighted by its k - 1 df); None without one."""
    seeded = [c for c in cells if len(c.seed_values) >= 2]
    if not seeded:
        return None
    df = sum(len(c.seed_values) - 1 for c in seeded)
    return float(np.sqrt(sum((len(c.seed_values) - 1) * np.var(c.seed_values, ddof=1) for c in seeded) / df))


def seed_order_agreement(a: Sequence[float], b: Sequence[float]) -> float:
    """The share of (seed of a, seed of b) pairs that order a and b as their means do (ties count half); 0.5
    when the means are equal (no order to agree with)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    direction = np.sign(x.mean() - y.mean())
    if direction == 0:
        return 0.5
    signs = np.sign(x[:, None] - y[None, :]) * direction
    return float(np.mean(np.where(signs > 0, 1.0, np.where(signs == 0, 0.5, 0.0))))


def column_signal_noise(column: str, rows: Sequence[BoardRow]) -> SignalNoise | None:
    """One column's signal, noise and pairwise agreement over the rows that have it; None when none has."""
    present = [(row, row.macro if column == MACRO else row.cells.get(column)) for row in rows]
    present = [(row, cell) for row, cell in present if cell is not None and cell.seed_values]
    if not present:
        return None
    cells = [cell for _, cell in present]
    means = [float(np.mean(cell.seed_values)) for cell in cells]
    noise = pooled_seed_sd(cells)
    signal = float(np.std(means, ddof=1)) if len(means) >= 2 else None
    ratio = signal / noise if signal is not None and noise else None
    agreement = [(ra.key, rb.key, seed_order_agreement(ca.seed_values, cb.seed_values))
                 for (ra, ca), (rb, cb) in itertools.combinations(present, 2)]
    return SignalNoise(column, cells[0].metric if column != MACRO else "accuracy", len(present), noise, signal, ratio,
                       agreement)


def signal_noise(rows: Sequence[BoardRow], columns: Sequence[str]) -> list[SignalNoise]:
    """Every column's (and the macro's) signal and noise, in column order."""
    found = [column_signal_noise(column, rows) for column in [*columns, MACRO]]
    return [entry for entry in found if entry is not None]
