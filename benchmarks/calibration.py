"""Calibration of the seed-aware statistics, with more simulated comparisons than the tests run.

    python benchmarks/calibration.py --reps 2000

Prints, per design (seed SD, items), the A/A false-positive rate of each comparison design at alpha = 0.05, the
coverage of 95% intervals over 3 seeds, and the power for a gap of 3 seed SDs with 5 seeds a side; and, for the
old method (items bootstrapped after averaging seeds), its coverage. The simulator is tests/seed_simulation.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from seed_simulation import Design, draw_cell, draw_items, draw_matched_pair  # noqa: E402

from antlm_bench.results.stats import (  # noqa: E402
    bootstrap_macro,
    difference,
    estimate,
    item_variance,
    item_variance_of_difference,
    per_seed_scores,
)


def _rate(hits: int, reps: int) -> str:
    p = hits / reps
    return f"{100 * p:5.1f}% ±{100 * 1.96 * np.sqrt(p * (1 - p) / reps):.1f}"


def _test(a, b, design: str) -> float:
    return difference(per_seed_scores(a), per_seed_scores(b), item_variance_of_difference(a, b, design), design).p_value


def run(design: Design, reps: int, rng: np.random.Generator) -> dict[str, str]:
    cover = old_cover = aa_welch = aa_paired = aa_pooled = detected = 0
    sds = [np.std(per_seed_scores(draw_cell(rng, design, draw_items(rng, design), 5)), ddof=1) for _ in range(50)]
    gap = 3 * float(np.mean(sds))
    for _ in range(reps):
        q = draw_items(rng, design)
        a, b = draw_cell(rng, design, q, 3), draw_cell(rng, design, q, 3)
        e = estimate(per_seed_scores(a), item_variance(a))
        cover += e.low <= design.truth() <= e.high
        old = bootstrap_macro({n: m.correct.mean(axis=0) for n, m in a.items()}, resamples=200)
        old_cover += old.low <= design.truth() <= old.high
        aa_welch += _test(a, b, "welch") < 0.05
        pa, pb = draw_matched_pair(rng, design, q, 3)
        aa_paired += _test(pa, pb, "paired-seeds") < 0.05
        aa_pooled += _test(draw_cell(rng, design, q, 1), draw_cell(rng, design, q, 2), "pooled") < 0.05
        big_a, big_b = draw_cell(rng, design, q, 5, shift=gap), draw_cell(rng, design, q, 5)
        d = difference(per_seed_scores(big_a), per_seed_scores(big_b),
                       item_variance_of_difference(big_a, big_b, "welch"), "welch")
        detected += d.p_value < 0.05 and d.delta > 0
    return {"seed SD (pp)": f"{100 * np.mean(sds):.2f}", "coverage 95%, 3 seeds": _rate(cover, reps),
            "old method coverage": _rate(old_cover, reps), "A/A Welch 3v3": _rate(aa_welch, reps),
            "A/A paired seeds 3v3": _rate(aa_paired, reps), "A/A pooled 1v2": _rate(aa_pooled, reps),
            "power 3 SD, 5v5": _rate(detected, reps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    designs = [Design(seed_sd=0.005, items=800), Design(seed_sd=0.01, items=300), Design(seed_sd=0.012, items=150)]
    rows = [(d, run(d, args.reps, rng)) for d in designs]
    header = ["design", *rows[0][1]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for d, row in rows:
        print(f"| {d.subtasks}x{d.items} items, seed shift SD {100 * d.seed_sd:g} pp | " + " | ".join(row.values())
              + " |")
    print(f"\n{args.reps} simulated comparisons per cell; ± is the 95% binomial margin of the rate itself.")


if __name__ == "__main__":
    main()
