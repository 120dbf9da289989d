"""Every statistic antlm-bench prints, in one place.

- ``bootstrap``: one run's intervals over items (stratified, clustered percentile bootstrap), GLUE's
  confusion-count bootstrap, and the item-paired bootstrap;
- ``variance``: the item-sampling variance of a score measured by several seeds on the same items (two-way
  crossed design), alone or of a difference;
- ``inference``: intervals and tests over seeds and items (Student-t on the seeds' df), comparison designs,
  one function per comparison design (same_seed, paired_seeds, welch, pooled, untested), Holm's correction,
  minimum detectable effect, the seed SD's chi-square interval and seeds needed for a given gap;
- ``sequential``: seeds until decided, an anytime-valid confidence sequence for paired per-seed differences
  (``sweep --until-decided``);
- ``planning``: what a design of that rule can decide (power, seeds at the stop), by simulating it (``plan``).

The formulas, and the simulations that check their calibration, are in docs/statistics.md.
"""

from antlm_bench.results.stats.bootstrap import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    PairedComparison,
    bootstrap_classification,
    bootstrap_macro,
    bootstrap_mean,
    bootstrap_p_value,
    paired_bootstrap,
    win_score,
)
from antlm_bench.results.stats.inference import (
    DESIGNS,
    MIN_SEEDS_FOR_RECORDED_SD,
    P_FLOOR,
    Difference,
    Estimate,
    SeedSD,
    choose_design,
    difference,
    estimate,
    holm,
    minimum_detectable_effect,
    paired_seeds,
    pooled,
    recorded_seed_sd,
    same_seed,
    satterthwaite_df,
    seed_sd_interval,
    seeds_needed,
    untested,
    welch,
)
from antlm_bench.results.stats.variance import (
    ItemMatrix,
    item_variance,
    item_variance_of_difference,
    per_seed_scores,
    shared_items,
)

__all__ = [
    "DEFAULT_RESAMPLES", "DEFAULT_SEED", "DESIGNS", "MIN_SEEDS_FOR_RECORDED_SD", "P_FLOOR", "Difference", "Estimate",
    "Interval", "ItemMatrix", "PairedComparison", "SeedSD", "bootstrap_classification",
    "bootstrap_macro", "bootstrap_mean", "bootstrap_p_value", "choose_design", "difference", "estimate", "holm",
    "item_variance", "item_variance_of_difference", "minimum_detectable_effect", "paired_bootstrap", "paired_seeds",
    "per_seed_scores", "pooled", "recorded_seed_sd", "same_seed", "satterthwaite_df", "seed_sd_interval",
    "seeds_needed", "shared_items", "untested", "welch", "win_score",
]
from antlm_bench.results.stats.sequential import SequentialInterval, confidence_sequence, decide, prior_precision  # noqa: E402,F401,I001  (seeds until decided: docs/statistics.md)
