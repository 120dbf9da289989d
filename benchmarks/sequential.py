"""Calibration of ``sweep --until-decided``'s stopping rule (antlm_bench.results.stats.sequential) on simulated
seeds with a known truth.

    python benchmarks/sequential.py --reps 1000     (benchmarks/calibration.py prints it too)

For true gaps of 0 (A/A), 1 and 2 seed SDs: how often the rule decides a difference (and with which sign), an
equivalence (within +-1 seed SD), how often the interval at the stop holds the truth, the mean number of seeds a
side at the stop, and how often the fixed-sample paired t test, re-run after every round, is ever "significant"
(the optional-stopping error the rule avoids). Rounds of one seed from 3 to 12 seeds, alpha 0.05. Truths: Gaussian
per-seed scores, the item-level simulator of tests/seed_simulation.py (Bernoulli items, seed effects shared by the
same seed labels), and two harder ones from it (heavy-tailed seed effects, 15% failed runs).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from seed_simulation import MODEL, TRUTHS, Design, Truth, draw_items, draw_matched_pair, observed_seed_sd  # noqa: E402

from antlm_bench.results.stats import per_seed_scores  # noqa: E402
from antlm_bench.results.stats.sequential import PairedDraw, calibrate, calibration_table, gaussian_pairs  # noqa: E402


def simulated_pairs(design: Design, truth: Truth = MODEL) -> PairedDraw:
    """Per-seed task scores of a baseline and a schedule with the same seed labels, from the item-level simulator:
    a fresh item sample per experiment, seed effects correlated 0.5 across the two sides."""

    def draw(rng: np.random.Generator, seeds: int, gap: float) -> tuple[np.ndarray, np.ndarray]:
        a, b = draw_matched_pair(rng, design, draw_items(rng, design, truth), seeds, gap, truth=truth)
        return np.asarray(per_seed_scores(a)), np.asarray(per_seed_scores(b))

    return draw


def sequential_calibration(reps: int, rng: np.random.Generator, items: int = 300, seed_sd: float = 0.01,
                           max_seeds: int = 12) -> list[str]:
    """The Markdown lines of docs/statistics.md's sequential table, one block per truth."""
    design = Design(items=items, seed_sd=seed_sd)
    observed = observed_seed_sd(design, rng)
    truths = {truth.name: truth for truth in TRUTHS}
    worlds: list[tuple[str, PairedDraw, float]] = [
        ("Gaussian per-seed scores, seed SD 1, correlation 0.5", gaussian_pairs(), 1.0),
        (f"item simulator: {MODEL.name}", simulated_pairs(design), observed),
        ("item simulator: heavy-tailed seed effects (t3)",
         simulated_pairs(design, truths["heavy-tailed seed effects (t3)"]), observed),
        ("item simulator: 15% failed runs", simulated_pairs(design, truths["15% failed runs (skewed)"]), observed),
    ]
    lines = []
    for name, draw, sd in worlds:
        started = time.time()
        rows = calibrate(draw, sd, rng, reps=reps, max_seeds=max_seeds)
        lines += [f"\n{name} ({reps} experiments per gap, {time.time() - started:.0f} s):", ""]
        lines += calibration_table(rows)
    lines.append(f"\nRounds of 1 seed from 3 to {max_seeds} seeds a side, alpha 0.05, equivalence margin +-1 seed SD, "
                 f"prior precision tuned for {max_seeds} seeds; item simulator: {design.subtasks} subtasks x "
                 f"{design.items} items, per-seed score SD {100 * observed:.2f} pp; ± is the 95% binomial margin.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="simulated experiments per gap (default 1000)")
    parser.add_argument("--max-seeds", type=int, default=12, help="most seeds a side (default 12)")
    args = parser.parse_args()
    print("\n".join(sequential_calibration(args.reps, np.random.default_rng(2025), max_seeds=args.max_seeds)))


if __name__ == "__main__":
    main()
