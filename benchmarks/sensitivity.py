"""The sensitivity rule (docs/statistics.md, "Sensitivity") on simulated sweeps with a known truth.

    python benchmarks/sensitivity.py --reps 2000

For every truth of ``antlm_bench.sweep.calibration.TRUTHS`` (an endpoint at chance, one that sees a gap, a weak
control, a baseline barely above chance) and both rules (positive-control, above-chance), prints how often the
endpoint speaks, what the interval alone would have said and what is shown, as the Markdown table of
docs/statistics.md. tests/sweep/test_sensitivity.py asserts a smaller version.
"""

from __future__ import annotations

import argparse

import numpy as np

from antlm_bench.sweep.calibration import TRUTHS, sensitivity_table, simulate_sensitivity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000, help="simulated sweeps per truth")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = [row for truth in TRUTHS for row in simulate_sensitivity(truth, rng, reps=args.reps)]
    print("\n".join(sensitivity_table(rows)))
    print(f"\n{args.reps} sweeps per truth, seed {args.seed}: a family of 3 endpoints at alpha 0.05, looks at 5-10 "
          "seeds, arms correlated 0.5 at the same seed")


if __name__ == "__main__":
    main()
