"""Every statistic antlm-bench prints, in one place.

- ``bootstrap``: one run's intervals over items (stratified, clustered percentile bootstrap), GLUE's
  confusion-count bootstrap, and the item-paired bootstrap;
- ``variance``: the item-sampling variance of a score measured by several seeds on the same items (two-way
  crossed design), alone or of a difference;
- ``inference``: intervals and tests over seeds and items (Student-t, Satterthwaite df), comparison designs,
  Holm's correction, minimum detectable effect and seeds needed for a given gap.

The formulas, and the simulations that check their calibration, are in docs/statistics.md.
"""

from antlm_bench.results.stats.bootstrap import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    PairedComparison,
    _replicate_means,
    bootstrap_classification,
    bootstrap_macro,
    bootstrap_mean,
    bootstrap_p_value,
    paired_bootstrap,
    win_score,
)
from antlm_bench.results.stats.inference import (
    P_FLOOR,
    Difference,
    Estimate,
    choose_design,
    difference,
    estimate,
    holm,
    minimum_detectable_effect,
    satterthwaite_df,
    seeds_needed,
)
from antlm_bench.results.stats.variance import (
    ItemMatrix,
    item_variance,
    item_variance_of_difference,
    per_seed_scores,
    shared_items,
)

__all__ = [
    "DEFAULT_RESAMPLES", "DEFAULT_SEED", "P_FLOOR", "Difference", "Estimate", "Interval", "ItemMatrix",
    "PairedComparison", "_replicate_means", "bootstrap_classification", "bootstrap_macro", "bootstrap_mean",
    "bootstrap_p_value", "choose_design", "difference", "estimate", "holm", "item_variance",
    "item_variance_of_difference", "minimum_detectable_effect", "paired_bootstrap", "per_seed_scores", "satterthwaite_df",
    "seeds_needed", "shared_items", "win_score",
]
