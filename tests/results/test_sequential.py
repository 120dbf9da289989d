"""The anytime-valid confidence sequence of ``sweep --until-decided`` (antlm_bench.results.stats.sequential): its
closed form against the martingale it inverts, the decision rule, and a small calibration on simulated seeds
(benchmarks/sequential.py runs the full one)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from antlm_bench.results.stats import confidence_sequence, decide, prior_precision
from antlm_bench.results.stats.sequential import (
    DIFFERENCE,
    EQUIVALENT,
    UNDECIDED,
    SequentialInterval,
    calibrate,
    fewest_seeds,
    gaussian_pairs,
    half_width_factor,
)


def mixture_martingale(d: np.ndarray, mu: float, c: float) -> float:
    """Lai's M_n(mu), written as in the module docstring (the closed form must be its level set)."""
    y = d - mu
    n, s, v = y.size, y.sum(), (y**2).sum()
    return math.sqrt(c / (n + c)) * (1 - s**2 / ((n + c) * v)) ** (-n / 2)


@pytest.mark.parametrize("n", [5, 8, 12, 30])
def test_the_interval_is_the_level_set_of_the_martingale(n):
    rng = np.random.default_rng(n)
    d = rng.normal(0.3, 1.0, n)
    c, alpha = 0.7, 0.05
    interval = confidence_sequence(d, alpha, c)
    assert interval.bounded
    for bound in (interval.low, interval.high):
        assert mixture_martingale(d, bound, c) == pytest.approx(1 / alpha, rel=1e-9)
    assert mixture_martingale(d, interval.mean, c) < 1 / alpha
    width = interval.high - interval.low
    assert mixture_martingale(d, interval.low - 0.01 * width, c) > 1 / alpha
    assert mixture_martingale(d, interval.high + 0.01 * width, c) > 1 / alpha


def test_two_seeds_bound_nothing_useful_three_can():
    assert min(half_width_factor(2, 0.05, c) for c in np.exp(np.linspace(-20, 5, 5001))) > 39
    assert fewest_seeds(0.05) == 3 and half_width_factor(3, 0.05, prior_precision(3)) < 11
    assert fewest_seeds(0.001) > fewest_seeds(0.05)


def test_few_seeds_bound_nothing_and_one_seed_never_does():
    d = np.array([0.5, 0.6])
    assert not confidence_sequence(d, 0.05, 1.0).bounded
    assert not confidence_sequence([0.5], 0.05, 1e6).bounded
    assert half_width_factor(1, 0.05, 1.0) == math.inf
    assert decide(confidence_sequence(d, 0.05, 1.0), tolerance=10.0) == UNDECIDED


def test_the_sequence_is_wider_than_the_fixed_sample_t_and_narrows_with_seeds():
    from scipy import stats

    c = prior_precision(12)
    factors = [half_width_factor(n, 0.05, c) for n in range(6, 13)]
    assert all(a > b for a, b in zip(factors, factors[1:]))
    assert factors[-1] > stats.t.ppf(0.975, 11)
    # the tuned precision gives the narrowest interval at the planned seed count
    assert half_width_factor(12, 0.05, c) <= min(half_width_factor(12, 0.05, c * f) for f in (0.5, 0.8, 1.25, 2))


def test_decide_reads_difference_before_equivalence():
    def interval(low: float, high: float) -> SequentialInterval:
        return SequentialInterval(8, (low + high) / 2, low, high, 0.05, 1.0)

    assert decide(interval(0.1, 0.4), tolerance=1.0) == DIFFERENCE
    assert decide(interval(-0.4, -0.1)) == DIFFERENCE
    assert decide(interval(-0.4, 0.3), tolerance=0.5) == EQUIVALENT
    assert decide(interval(-0.4, 0.6), tolerance=0.5) == UNDECIDED
    assert decide(interval(-0.4, 0.3)) == UNDECIDED


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        confidence_sequence([1.0, math.nan, 2.0])
    with pytest.raises(ValueError):
        confidence_sequence([1.0, 2.0], alpha=1.5)
    with pytest.raises(ValueError):
        prior_precision(1)


def test_small_calibration_keeps_alpha_where_retesting_does_not():
    """A/A: the rule's false-positive rate stays below alpha while the fixed-sample t, re-tested after every
    round, exceeds it; the interval at the stop covers; a gap of 2 seed SDs is found, with fewer seeds than the
    maximum (the full table: benchmarks/sequential.py, docs/statistics.md)."""
    reps = 400
    aa, _, big = calibrate(gaussian_pairs(), 1.0, np.random.default_rng(7), reps=reps, gaps_sds=(0.0, 1.0, 2.0))
    margin = 1.96 * math.sqrt(0.05 * 0.95 / reps)
    assert aa.difference <= 0.05 + margin
    assert aa.naive_rejections > 0.05 + margin
    assert aa.coverage >= 0.95 - margin
    assert big.difference >= 0.9 and big.wrong_sign == 0
    assert big.mean_seeds < 9
    assert big.coverage >= 0.95 - margin
