"""Simulated benchmark cells where the truth is known, for the calibration tests of antlm_bench.results.stats.

Items: S subtasks, each with its own mean m_j; an item's probability of being won is q = m_j + U(-w, w), drawn
fresh in every simulated experiment (the eval set is a sample of items). A configuration adds a gap ``shift``
to every item; a training seed adds b_s ~ N(0, seed_sd) to every item of that run (a better or worse run), and
each (seed, item) outcome is a Bernoulli draw (which items a run happens to get right). The true configuration
mean is mean_j(m_j) + shift exactly: q is symmetric around m_j, b_s has mean 0, and nothing is clipped at the
sizes used (|b_s| < 0.15 always).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from antlm_bench.results.stats import ItemMatrix


@dataclass
class Design:
    subtasks: int = 10
    items: int = 300  # per subtask
    seed_sd: float = 0.01  # of the per-run shift b_s, in score units (0.01 = 1 point)
    width: float = 0.3
    means: tuple[float, float] = (0.35, 0.75)

    def subtask_means(self) -> np.ndarray:
        return np.linspace(*self.means, self.subtasks)

    def truth(self, shift: float = 0.0) -> float:
        return float(self.subtask_means().mean() + shift)


def draw_items(rng: np.random.Generator, design: Design) -> np.ndarray:
    """[S, n] item probabilities: one sample of the eval set."""
    m = design.subtask_means()[:, None]
    return m + rng.uniform(-design.width / 2, design.width / 2, size=(design.subtasks, design.items))


def draw_cell(rng: np.random.Generator, design: Design, q: np.ndarray, seeds: int, shift: float = 0.0,
              seed_shifts: np.ndarray | None = None, uniforms: np.ndarray | None = None) -> dict[str, ItemMatrix]:
    """One configuration's correctness on items ``q`` for ``seeds`` runs.

    ``seed_shifts`` [seeds] and ``uniforms`` [seeds, S, n] let two configurations share their seeds' luck (the
    same seed number: same initialisation and data order).
    """
    b = rng.normal(0, design.seed_sd, size=seeds) if seed_shifts is None else seed_shifts
    u = rng.random((seeds, *q.shape)) if uniforms is None else uniforms
    correct = (u < q[None] + shift + b[:, None, None]).astype(np.float64)
    ids = np.array([f"{i:05d}" for i in range(q.shape[1])])
    return {f"s{j:02d}": ItemMatrix(ids, correct[:, j, :]) for j in range(q.shape[0])}


def draw_matched_pair(rng: np.random.Generator, design: Design, q: np.ndarray, seeds: int, shift: float = 0.0,
                      correlation: float = 0.5) -> tuple[dict[str, ItemMatrix], dict[str, ItemMatrix]]:
    """Two configurations run with the same seed numbers: their seed shifts correlate (``correlation``) and that
    share of their per-item luck is common too (same initialisation and data order, different schedule)."""
    b_a = rng.normal(0, design.seed_sd, size=seeds)
    b_b = correlation * b_a + np.sqrt(1 - correlation**2) * rng.normal(0, design.seed_sd, size=seeds)
    u_a = rng.random((seeds, *q.shape))
    u_b = np.where(rng.random(u_a.shape) < correlation, u_a, rng.random(u_a.shape))
    return (draw_cell(rng, design, q, seeds, 0.0, b_a, u_a), draw_cell(rng, design, q, seeds, shift, b_b, u_b))
