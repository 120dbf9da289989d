"""The sensitivity rule on simulated sweeps with a known truth (docs/statistics.md, "Sensitivity"): how often a
primary endpoint speaks, and which verdicts it then shows, when the instrument is blind (every arm at chance) and
when it can see a gap.

One endpoint of a sweep is simulated as the sweep reads it: per-seed scores of the baseline, one studied schedule
and one positive control (Gaussian, seed SD 1, arms sharing a seed component of correlation ``correlation``),
looks from ``first_seeds`` to ``max_seeds`` at the per-comparison alpha of a family of ``family`` comparisons, the
comparisons of each look built as ``compare_round`` builds them and read by the sweep's own
:func:`~antlm_bench.sweep.rule.endpoint_checks` under each rule, and the sweep's stop: the first look at which
the studied comparison is decided by its interval and its endpoint speaks, else the cap. ``benchmarks/sensitivity.py`` prints the table;
``tests/sweep/test_sensitivity.py`` asserts it at a smaller size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from antlm_bench.results.stats.sequential import DIFFERENCE, EQUIVALENT, confidence_sequence, decide, prior_precision
from antlm_bench.sweep.rule import (
    ABOVE_CHANCE,
    CHANCE_ROLE,
    POSITIVE_CONTROL,
    SEES_POSITIVE_CONTROL,
    Decision,
    Rule,
    endpoint_checks,
)


@dataclass(frozen=True)
class Truth:
    """One endpoint's truth in seed SDs: the baseline's distance above chance, the studied schedule's gap and the
    positive control's gap to the baseline."""

    name: str
    above_chance: float
    gap: float
    control_gap: float
    margin: float = 1.0  # the equivalence margin, in seed SDs


@dataclass(frozen=True)
class SensitivityRates:
    """What one rule did over ``reps`` simulated sweeps of one truth (shares of the sweeps)."""

    truth: Truth
    rule: str
    reps: int
    speaks: float  # the endpoint qualified at the stop
    raw_equivalent: float  # the interval alone read "equivalent" (what a board without the rule printed)
    shown_equivalent: float  # "equivalent" shown (the endpoint spoke)
    shown_difference_right: float  # a difference shown, in the truth's direction (A/A: never right)
    shown_difference_wrong: float  # a difference shown against the truth (A/A: any difference)
    raw_difference_wrong: float  # the same for the interval alone
    mean_seeds: float


def _decision(schedule: str, role: str, d: np.ndarray, alpha: float, c: float, tolerance: float | None,
              n: int) -> Decision:
    interval = confidence_sequence(d[:n], alpha, c)
    return Decision("sim", "sim", schedule, "endpoint", "clm vs clm", tuple(range(1, n + 1)), interval.mean,
                    interval.low, interval.high, decide(interval, tolerance), role=role)


def simulate_sensitivity(truth: Truth, rng: np.random.Generator, reps: int = 2000, family: int = 3,
                         first_seeds: int = 5, max_seeds: int = 10, correlation: float = 0.5,
                         alpha: float = 0.05) -> list[SensitivityRates]:
    """The rates of both rules (positive-control, above-chance) over ``reps`` sweeps of ``truth``."""
    alpha_each = alpha / family
    c = prior_precision(max_seeds, alpha_each)
    looks = [*range(first_seeds, max_seeds), max_seeds]
    rules = {which: Rule("base", alpha, truth.margin, max_seeds, 1, ("endpoint",), positive_controls=("control",),
                         sensitivity=(("endpoint", which),))
             for which in (SEES_POSITIVE_CONTROL, ABOVE_CHANCE)}
    counts = {which: np.zeros(6) for which in rules}
    seeds_used = dict.fromkeys(rules, 0)
    shared, own = math.sqrt(correlation), math.sqrt(1 - correlation)
    for _ in range(reps):
        seed_effect = rng.normal(size=max_seeds)
        base, mine, control = (shared * seed_effect + own * rng.normal(size=max_seeds) for _ in range(3))
        base = base + truth.above_chance
        mine = mine + truth.above_chance + truth.gap
        control = control + truth.above_chance + truth.control_gap

        arms = (mine - base, control - base, base)

        def look(n: int, arms: tuple[np.ndarray, ...] = arms) -> list[Decision]:
            return [_decision("mine", "", arms[0], alpha_each, c, truth.margin, n),
                    _decision("control", POSITIVE_CONTROL, arms[1], alpha_each, c, truth.margin, n),
                    _decision("base", CHANCE_ROLE, arms[2], alpha_each, c, None, n)]

        for which, rule in rules.items():
            # the sweep's stop (loop.run_sweep): the studied comparison decided by its interval and its endpoint
            # speaking, else the cap
            for n in looks:
                comparisons = look(n)
                (check,) = endpoint_checks(comparisons, rule)
                if comparisons[0].decision != "undecided" and check.speaks:
                    break
            seeds_used[which] += n
            studied = comparisons[0]
            wrong = studied.decision == DIFFERENCE and (truth.gap == 0 or (studied.mean > 0) != (truth.gap > 0))
            right = studied.decision == DIFFERENCE and not wrong
            shown = check.speaks
            counts[which] += [shown, studied.decision == EQUIVALENT, shown and studied.decision == EQUIVALENT,
                              shown and right, shown and wrong, wrong]
    return [SensitivityRates(truth, which, reps, *(float(v) / reps for v in counts[which]), seeds_used[which] / reps)
            for which in rules]


TRUTHS = (
    # EWoK in the reference study: every arm at 50%, seed SD about 0.2 points, margin 1 point (5 seed SDs)
    Truth("every arm at chance, margin 5 SD (EWoK in the reference study)", 0.0, 0.0, 0.0, 5.0),
    Truth("every arm at chance, margin 1 SD", 0.0, 0.0, 0.0),
    Truth("sees: baseline 8 SD above chance, control -3 SD, no gap", 8.0, 0.0, -3.0),
    Truth("sees: as above, a gap of -2 SD", 8.0, -2.0, -3.0),
    Truth("weak control: -1 SD, no gap", 8.0, 0.0, -1.0),
    Truth("just above chance: baseline 0.5 SD above, control at chance, no gap", 0.5, 0.0, -0.5),
)


def sensitivity_table(rows: list[SensitivityRates]) -> list[str]:
    """The simulation as Markdown lines (docs/statistics.md); rates with their 95% binomial margin."""

    def rate(p: float, reps: int) -> str:
        return f"{100 * p:.1f}% ±{100 * 1.96 * math.sqrt(p * (1 - p) / reps):.1f}"

    lines = ["| truth (seed SDs) | rule | endpoint speaks | 'equivalent' by the interval alone | 'equivalent' shown | "
             "difference shown, right sign | difference shown, wrong or A/A | mean seeds |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row.truth.name} | {row.rule} | {rate(row.speaks, row.reps)} | "
                     f"{rate(row.raw_equivalent, row.reps)} | {rate(row.shown_equivalent, row.reps)} | "
                     f"{rate(row.shown_difference_right, row.reps)} | {rate(row.shown_difference_wrong, row.reps)} | "
                     f"{row.mean_seeds:.1f} |")
    return lines


__all__ = ["TRUTHS", "SensitivityRates", "Truth", "sensitivity_table", "simulate_sensitivity"]
