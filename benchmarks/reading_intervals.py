"""Coverage of the reading task's interval methods on simulated reading times whose population gain is known.

    python benchmarks/reading_intervals.py --gain 0.01 --reps 300 [--boot 300] [--seed 21]

The simulation is tests/adapters/test_reading_intervals.py's (205 sentences of 4-14 words; surprisal and noise each
with a sentence effect). For each data set it draws one set of cluster-bootstrap replicates (sentences resampled) and
scores four 95% intervals from them: percentile (what the task reports), basic, bias-corrected (BC) and BCa
(acceleration from the leave-one-sentence-out jackknife). Prints the share of data sets whose interval covers the
population gain, for eye tracking and self-paced reading.

Recorded 2026-11-30 (seeds 21 and 22, B=300, 300 data sets per gain):

    gain 1%: percentile 0.920 / 0.937  basic 0.917 / 0.800  BC 0.923 / 0.923  BCa 0.930 / 0.920
    gain 3%: percentile 0.930 / 0.947  basic 0.913 / 0.900  BC 0.927 / 0.930  BCa 0.930 / 0.930
    (eye tracking / self-paced reading; binomial SE about 0.015)

Percentile, BC and BCa cover alike, a little short of 95%; the task reports the simplest of them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.stats import norm

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS / "adapters"), str(TESTS)]  # the simulation's test file, and the helpers it imports

from test_reading_intervals import N_SENTENCES, _simulate  # noqa: E402

from antlm_bench.adapters.babylm2025 import reading  # noqa: E402


def intervals(estimate: float, replicates: np.ndarray, jackknife: np.ndarray) -> dict[str, tuple[float, float]]:
    low, high = np.percentile(replicates, [2.5, 97.5])
    z = norm.ppf([0.025, 0.975])
    z0 = norm.ppf(np.clip(np.mean(replicates < estimate), 1 / len(replicates), 1 - 1 / len(replicates)))
    spread = jackknife.mean() - jackknife
    accel = (spread ** 3).sum() / (6 * ((spread ** 2).sum()) ** 1.5)
    bc = np.percentile(replicates, 100 * norm.cdf(2 * z0 + z))
    bca = np.percentile(replicates, 100 * norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z))))
    return {"percentile": (low, high), "basic": (2 * estimate - high, 2 * estimate - low), "BC": tuple(bc),
            "BCa": tuple(bca)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gain", type=float, default=0.01)
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--boot", type=int, default=300)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    hits: dict[str, np.ndarray] = {}
    leave_one_out = np.ones((N_SENTENCES, N_SENTENCES), dtype=int) - np.eye(N_SENTENCES, dtype=int)
    for _ in range(args.reps):
        data, pred, prev_pred, spr_gain = _simulate(rng, args.gain)
        _, cluster = np.unique(np.asarray(data.sentence), return_inverse=True)
        counts = np.stack([np.bincount(rng.integers(0, N_SENTENCES, N_SENTENCES), minlength=N_SENTENCES)
                           for _ in range(args.boot)])
        specs = reading._regressions(data, prev_pred)
        boot = {dv: reading._bootstrap_gain(*spec, pred, cluster, counts) for dv, spec in specs.items()}
        jack = {dv: reading._bootstrap_gain(*spec, pred, cluster, leave_one_out) for dv, spec in specs.items()}
        eye, spr, _ = reading.reading_scores(data, pred, prev_pred)
        metrics = [(args.gain, eye, np.mean([boot[d] for d in reading.EYE_TRACKING], 0),
                    np.mean([jack[d] for d in reading.EYE_TRACKING], 0)),
                   (spr_gain, spr, boot[reading.SELF_PACED], jack[reading.SELF_PACED])]
        for i, (truth, estimate, replicates, jackknife) in enumerate(metrics):
            for name, (low, high) in intervals(estimate, replicates, jackknife).items():
                hits.setdefault(name, np.zeros(2))[i] += low <= truth <= high
    print(f"gain {args.gain:g}, {args.reps} data sets, B={args.boot} (eye tracking / self-paced reading):")
    for name, count in hits.items():
        print(f"  {name:<10} {count[0] / args.reps:.3f} / {count[1] / args.reps:.3f}")


if __name__ == "__main__":
    main()
