"""Calibration of the seed-aware statistics under harder truths than the model they assume.

    python benchmarks/calibration.py --reps 1000

For every truth of tests/seed_simulation.py (the statistics' own model, heavy-tailed seed effects, failed runs,
unequal seed SDs, seed-by-subtask interaction, clustered items) and every comparison design, prints the A/A
false-positive rate at alpha = 0.05, the coverage of the 95% interval over 3 seeds and the power for a gap of 3
seed SDs with 5 seeds a side, as the Markdown table of docs/statistics.md. A design that antlm-bench does not use
in a truth's situation is marked "not used". tests/results/test_stats_calibration.py repeats a smaller version.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from seed_simulation import COLUMNS, TRUTHS, Design, calibrate, observed_seed_sd, used  # noqa: E402
from sequential import sequential_calibration  # noqa: E402  (benchmarks/sequential.py)


def _rate(p: float, reps: int) -> str:
    return f"{100 * p:.1f}% ±{100 * 1.96 * np.sqrt(p * (1 - p) / reps):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="simulated experiments per truth (default 1000)")
    parser.add_argument("--items", type=int, default=300, help="items per subtask (10 subtasks; default 300)")
    parser.add_argument("--seed-sd", type=float, default=1.0, help="seed effect SD in points (default 1)")
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    design = Design(items=args.items, seed_sd=args.seed_sd / 100)
    observed = observed_seed_sd(design, rng)
    gap = 3 * observed
    started = time.time()
    print("| truth | " + " | ".join(COLUMNS.values()) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for truth in TRUTHS:
        rates = calibrate(design, truth, args.reps, rng, gap)
        cells = [_rate(rates[c], args.reps) + ("" if used(truth, c) else " (not used)") for c in COLUMNS]
        print(f"| {truth.name} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n{design.subtasks} subtasks x {design.items} items, seed effect SD {args.seed_sd:g} pp (per-seed score "
          f"SD {100 * observed:.2f} pp under the model; the power gap is 3 x that = {100 * gap:.2f} pp); "
          f"{args.reps} simulated experiments per truth; ± is the 95% binomial margin of the rate itself; "
          f"{time.time() - started:.0f} s.")
    print("\n".join(["", "Seeds until decided (sweep --until-decided):", *sequential_calibration(args.reps, rng)]))


if __name__ == "__main__":
    main()
