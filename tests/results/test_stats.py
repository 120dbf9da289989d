"""Bootstrap statistics: tie scoring, intervals that bracket their estimate, clusters, macro means, paired tests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from antlm_bench.results.stats import bootstrap_macro, bootstrap_mean, paired_bootstrap, win_score


def test_win_score_counts_a_tie_as_half_never_as_a_win():
    assert win_score(np.array([-1.0, -2.0, -3.0]), np.array([-2.0, -2.0, -1.0])).tolist() == [1.0, 0.5, 0.0]


outcomes = st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(outcomes)
def test_interval_brackets_the_mean(values):
    interval = bootstrap_mean(values, resamples=200)
    assert interval.value == pytest.approx(np.mean(values))
    assert interval.low <= interval.value <= interval.high
    assert 0.0 <= interval.low and interval.high <= 1.0


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), outcomes, min_size=1))
def test_macro_is_the_unweighted_mean_of_subtask_means_and_bracketed(subtasks):
    interval = bootstrap_macro(subtasks, resamples=200)
    assert interval.value == pytest.approx(np.mean([np.mean(v) for v in subtasks.values()]))
    assert interval.low <= interval.value <= interval.high


def test_macro_weighs_subtasks_equally_whatever_their_size():
    interval = bootstrap_macro({"big": [1.0] * 90, "small": [0.0] * 10})
    assert interval.value == pytest.approx(0.5)  # the item-weighted mean would be 0.9


def test_intervals_are_seeded_and_reproducible():
    values = np.random.default_rng(0).integers(0, 2, 200).astype(float)
    assert bootstrap_mean(values) == bootstrap_mean(values)
    assert bootstrap_mean(values, seed=1) != bootstrap_mean(values, seed=2)


def test_interval_narrows_with_more_items():
    rng = np.random.default_rng(0)
    small = bootstrap_mean(rng.integers(0, 2, 50).astype(float))
    large = bootstrap_mean(rng.integers(0, 2, 5000).astype(float))
    assert (large.high - large.low) < (small.high - small.low) / 4


def test_clusters_are_resampled_as_one():
    """Twins with identical outcomes carry no more information than one of each: same interval as the singles."""
    singles = np.random.default_rng(3).integers(0, 2, 60).astype(float)
    twins = np.repeat(singles, 2)
    groups = np.repeat(np.arange(60), 2)
    grouped = bootstrap_mean(twins, groups)
    alone = bootstrap_mean(singles)
    assert (grouped.low, grouped.high) == pytest.approx((alone.low, alone.high))
    naive = bootstrap_mean(twins)  # ignoring the clusters understates the uncertainty
    assert naive.high - naive.low < grouped.high - grouped.low


def test_macro_of_one_subtask_equals_its_own_interval():
    values = np.random.default_rng(5).integers(0, 2, 80).astype(float)
    groups = np.arange(80) // 2
    assert bootstrap_macro({"x": values}, {"x": groups}) == bootstrap_mean(values, groups)


def test_empty_input_gives_nan_not_an_error():
    assert np.isnan(bootstrap_mean([]).value) and np.isnan(bootstrap_macro({}).value)


def test_paired_comparison_of_a_run_with_itself_is_null():
    a = {"x": np.random.default_rng(1).integers(0, 2, 100).astype(float)}
    result = paired_bootstrap(a, a)
    assert result.delta == 0.0 and result.low == 0.0 == result.high and result.p_value == 1.0


def test_paired_comparison_detects_a_clear_difference():
    rng = np.random.default_rng(2)
    b = {"x": rng.integers(0, 2, 300).astype(float), "y": rng.integers(0, 2, 300).astype(float)}
    a = {name: np.minimum(1.0, v + (rng.random(300) < 0.3)) for name, v in b.items()}  # a fixes 30% of errors
    result = paired_bootstrap(a, b)
    assert result.delta > 0 and result.low > 0 and result.p_value < 0.01 and result.n_items == 600


def test_paired_interval_is_narrower_than_the_unpaired_one_for_correlated_runs():
    rng = np.random.default_rng(4)
    b = rng.integers(0, 2, 400).astype(float)
    a = b.copy()
    flip = rng.random(400) < 0.05
    a[flip] = 1 - a[flip]
    paired = paired_bootstrap({"x": a}, {"x": b})
    width_a, width_b = (bootstrap_mean(a).high - bootstrap_mean(a).low), (bootstrap_mean(b).high - bootstrap_mean(b).low)
    assert paired.high - paired.low < (width_a + width_b) / 2


def test_paired_comparison_needs_the_same_items():
    with pytest.raises(ValueError, match="same items"):
        paired_bootstrap({"x": [1.0, 0.0]}, {"x": [1.0]})
    with pytest.raises(ValueError, match="no subtask"):
        paired_bootstrap({"x": [1.0]}, {"y": [1.0]})
