"""Simulated benchmark cells where the truth is known, for the calibration of antlm_bench.results.stats.

Items: S subtasks, each with its own mean m_j; an item's probability of being won is q = m_j + U(-w/2, w/2),
drawn fresh in every simulated experiment (the eval set is a sample of items). A configuration adds a gap
``shift`` to every item; a training seed adds an effect b_s to every item of that run (a better or worse run),
and each (seed, item) outcome is a Bernoulli draw (which items a run happens to get right).

That is the model the statistics assume. A ``Truth`` makes it harder, one way at a time, so that the calibration
is not circular:

- ``seed_effects="t3"``: heavy-tailed seed effects (Student t with 3 df, scaled to the same SD);
- ``seed_effects="failed"``: a share of runs fails (drops by ``failed_drop`` seed SDs): skewed, centred at 0;
- ``noise_ratio``: side b's seed SD is this many times side a's (two configurations with unequal seed SDs);
- ``interaction``: a seed-by-subtask effect (a seed that is lucky on one paradigm and not another);
- ``clusters``: the items of a subtask come in clusters (item i in cluster i mod C) that share a difficulty
  offset, and every seed has its own luck per cluster (it learned a construction or it did not).

Every effect is centred, so the true configuration mean is mean_j(m_j) + shift (nothing is clipped at these
sizes except, very rarely, a heavy-tailed draw).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from antlm_bench.results.stats import ItemMatrix


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Truth:
    """How the simulated world departs from the model the statistics assume (module docstring)."""

    name: str
    seed_effects: str = "normal"  # normal, t3 or failed
    noise_ratio: float = 1.0  # seed SD of side b over side a
    interaction: float = 0.0  # SD of the seed-by-subtask effect, in seed SDs
    clusters: int = 0  # clusters of items per subtask; 0: items independent
    failed_share: float = 0.15
    failed_drop: float = 4.0  # in seed SDs
    cluster_offset: float = 0.1  # half-width of a cluster's shared difficulty offset
    cluster_luck: float = 0.03  # SD of a seed's luck on one cluster

    def __str__(self) -> str:
        return self.name


MODEL = Truth("the statistics' own model")
TRUTHS = (
    MODEL,
    Truth("heavy-tailed seed effects (t3)", seed_effects="t3"),
    Truth("15% failed runs (skewed)", seed_effects="failed"),
    Truth("side b's seed SD 2x", noise_ratio=2.0),
    Truth("side b's seed SD 5x", noise_ratio=5.0),
    Truth("seed-by-subtask interaction", interaction=1.0),
    Truth("items in 15 clusters per subtask", clusters=15),
)


def draw_items(rng: np.random.Generator, design: Design, truth: Truth = MODEL) -> np.ndarray:
    """[S, n] item probabilities: one sample of the eval set."""
    m = design.subtask_means()[:, None]
    if not truth.clusters:
        return m + rng.uniform(-design.width / 2, design.width / 2, size=(design.subtasks, design.items))
    offsets = rng.uniform(-truth.cluster_offset, truth.cluster_offset, size=(design.subtasks, truth.clusters))
    within = design.width / 2 - truth.cluster_offset
    cluster_of = np.arange(design.items) % truth.clusters
    return m + offsets[:, cluster_of] + rng.uniform(-within, within, size=(design.subtasks, design.items))


def draw_seed_effects(rng: np.random.Generator, design: Design, truth: Truth, seeds: int,
                      scale: float = 1.0) -> np.ndarray:
    """[seeds, S] per-run, per-subtask shifts: the run's effect plus any seed-by-subtask interaction."""
    sd = design.seed_sd * scale
    if truth.seed_effects == "t3":
        run = rng.standard_t(3, size=seeds) / np.sqrt(3.0) * sd
    elif truth.seed_effects == "failed":
        failed = rng.random(seeds) < truth.failed_share
        run = rng.normal(0, sd, size=seeds) + truth.failed_drop * sd * (truth.failed_share - failed)
    elif truth.seed_effects == "normal":
        run = rng.normal(0, sd, size=seeds)
    else:
        raise ValueError(f"unknown seed_effects {truth.seed_effects!r}")
    effects = np.repeat(run[:, None], design.subtasks, axis=1)
    if truth.interaction:
        effects += rng.normal(0, truth.interaction * sd, size=(seeds, design.subtasks))
    return effects


def _cluster_luck(rng: np.random.Generator, truth: Truth, seeds: int, q: np.ndarray) -> np.ndarray:
    """[seeds, S, n] each run's luck on each cluster of items (zeros without clusters)."""
    if not truth.clusters:
        return np.zeros((seeds, *q.shape))
    luck = rng.normal(0, truth.cluster_luck, size=(seeds, q.shape[0], truth.clusters))
    return luck[:, :, np.arange(q.shape[1]) % truth.clusters]


def draw_cell(rng: np.random.Generator, design: Design, q: np.ndarray, seeds: int, shift: float = 0.0,
              seed_shifts: np.ndarray | None = None, uniforms: np.ndarray | None = None, truth: Truth = MODEL,
              noise: float = 1.0) -> dict[str, ItemMatrix]:
    """One configuration's correctness on items ``q`` for ``seeds`` runs (``noise``: its seed SD multiplier).

    ``seed_shifts`` ([seeds] or [seeds, S], with any cluster luck already in [seeds, S, n]) and ``uniforms``
    [seeds, S, n] let two configurations share their seeds' luck (the same seed number: the same training draws).
    """
    if seed_shifts is None:
        seed_shifts = draw_seed_effects(rng, design, truth, seeds, noise)[:, :, None] + _cluster_luck(
            rng, truth, seeds, q)
    b = np.asarray(seed_shifts, dtype=np.float64)
    b = b[:, None, None] if b.ndim == 1 else (b[:, :, None] if b.ndim == 2 else b)
    u = rng.random((seeds, *q.shape)) if uniforms is None else uniforms
    correct = (u < q[None] + shift + b).astype(np.float64)
    ids = np.array([f"{i:05d}" for i in range(q.shape[1])])
    return {f"s{j:02d}": ItemMatrix(ids, correct[:, j, :]) for j in range(q.shape[0])}


def draw_matched_pair(rng: np.random.Generator, design: Design, q: np.ndarray, seeds: int, shift: float = 0.0,
                      correlation: float = 0.5, truth: Truth = MODEL) -> tuple[dict[str, ItemMatrix],
                                                                               dict[str, ItemMatrix]]:
    """Two configurations run with the same seed numbers: their seed effects correlate (``correlation``) and that
    share of their per-item luck is common too (same initialisation and data order, different schedule). Side b's
    seed effects are ``truth.noise_ratio`` times larger."""
    e_a = draw_seed_effects(rng, design, truth, seeds)[:, :, None] + _cluster_luck(rng, truth, seeds, q)
    e_own = draw_seed_effects(rng, design, truth, seeds)[:, :, None] + _cluster_luck(rng, truth, seeds, q)
    e_b = truth.noise_ratio * (correlation * e_a + np.sqrt(1 - correlation**2) * e_own)
    u_a = rng.random((seeds, *q.shape))
    u_b = np.where(rng.random(u_a.shape) < correlation, u_a, rng.random(u_a.shape))
    return (draw_cell(rng, design, q, seeds, 0.0, e_a, u_a), draw_cell(rng, design, q, seeds, shift, e_b, u_b))


def same_networks(rng: np.random.Generator, design: Design, q: np.ndarray, seeds: int, truth: Truth = MODEL,
                  rescored: float = 0.1) -> tuple[dict[str, ItemMatrix], dict[str, ItemMatrix]]:
    """The same trained networks on both sides (equal training fingerprints), scored by two versions of the code
    that each settle a share ``rescored`` of the items by a coin flip: a change after training with no effect."""
    a = draw_cell(rng, design, q, seeds, truth=truth)
    b = {name: ItemMatrix(m.ids, m.correct.copy()) for name, m in a.items()}
    for side in (a, b):
        for m in side.values():
            flip = rng.random(m.correct.shape) < rescored
            m.correct = np.where(flip, (rng.random(m.correct.shape) < 0.5).astype(float), m.correct)
    return a, b


# ----------------------------------------------------------------------------------------------------------
# the calibration experiment: benchmarks/calibration.py prints it, tests/results/test_stats_calibration.py repeats it
# small

# what each column of the calibration table measures; "A/A" columns are false-positive rates at alpha 0.05
COLUMNS = {
    "coverage": "coverage of the 95% interval, 3 seeds",
    "welch": "A/A Welch 3v3",
    "paired": "A/A paired seeds 3v3",
    "pooled": "A/A pooled 1v3 (seed SD recorded from the 3)",
    "same_seed": "A/A same-seed 3v3, same networks",
    "same_seed_redrawn": "A/A same-seed 1v1, training re-drawn",
    "power_welch": "power Welch 5v5, gap 3 seed SDs",
    "power_paired": "power paired 5v5, gap 3 seed SDs",
}


def observed_seed_sd(design: Design, rng: np.random.Generator, draws: int = 40) -> float:
    """The SD of per-seed task scores the model truth produces (seed effect plus Bernoulli noise)."""
    from antlm_bench.results.stats import per_seed_scores

    return float(np.mean([np.std(per_seed_scores(draw_cell(rng, design, draw_items(rng, design), 5)), ddof=1)
                          for _ in range(draws)]))


def calibrate(design: Design, truth: Truth, reps: int, rng: np.random.Generator, gap: float,
              alpha: float = 0.05) -> dict[str, float]:
    """Rates over ``reps`` simulated experiments for each column of COLUMNS; ``gap`` (score units) for power."""
    from antlm_bench.results.stats import (
        difference,
        estimate,
        item_variance,
        item_variance_of_difference,
        per_seed_scores,
        recorded_seed_sd,
    )

    def test(a, b, design_name: str, seed_sd=None):
        return difference(per_seed_scores(a), per_seed_scores(b), item_variance_of_difference(
            a, b, "unpaired-seeds" if design_name in ("welch", "pooled") else design_name), design_name,
            alpha, seed_sd)

    hits = dict.fromkeys(COLUMNS, 0)
    for _ in range(reps):
        q = draw_items(rng, design, truth)
        cell = draw_cell(rng, design, q, 3, truth=truth)
        e = estimate(per_seed_scores(cell), item_variance(cell), alpha)
        hits["coverage"] += e.low <= design.truth() <= e.high
        a, b = draw_cell(rng, design, q, 3, truth=truth), draw_cell(rng, design, q, 3, truth=truth,
                                                                    noise=truth.noise_ratio)
        hits["welch"] += test(a, b, "welch").p_value < alpha
        a, b = draw_matched_pair(rng, design, q, 3, truth=truth)
        hits["paired"] += test(a, b, "paired-seeds").p_value < alpha
        # the one-seed side is the noisier one: with noise_ratio > 1 this borrows another configuration's SD
        one = draw_cell(rng, design, q, 1, truth=truth, noise=truth.noise_ratio)
        three = draw_cell(rng, design, q, 3, truth=truth)
        hits["pooled"] += test(one, three, "pooled", recorded_seed_sd(per_seed_scores(three))).p_value < alpha
        a, b = same_networks(rng, design, q, 3, truth)
        hits["same_seed"] += test(a, b, "same-seed").p_value < alpha
        a, b = draw_cell(rng, design, q, 1, truth=truth), draw_cell(rng, design, q, 1, truth=truth)
        hits["same_seed_redrawn"] += test(a, b, "same-seed").p_value < alpha
        a, b = draw_cell(rng, design, q, 5, gap, truth=truth), draw_cell(rng, design, q, 5, truth=truth,
                                                                         noise=truth.noise_ratio)
        d = test(a, b, "welch")
        hits["power_welch"] += d.p_value < alpha and d.delta > 0
        a, b = draw_matched_pair(rng, design, q, 5, -gap, truth=truth)
        d = test(a, b, "paired-seeds")
        hits["power_paired"] += d.p_value < alpha and d.delta > 0
    return {k: v / reps for k, v in hits.items()}


def used(truth: Truth, column: str) -> bool:
    """Whether antlm-bench uses this design in the situation the truth describes (docs/statistics.md).

    Same-seed runs only on equal training fingerprints (never on a re-drawn training); a seed SD is borrowed for
    a one-seed side only within one configuration fingerprint, whose seeds share one SD by definition.
    """
    if column == "same_seed_redrawn":
        return False
    return not (column == "pooled" and truth.noise_ratio != 1.0)
