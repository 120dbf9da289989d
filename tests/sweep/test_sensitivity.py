"""The sensitivity rule (issue #50; docs/statistics.md, "Sensitivity"): an endpoint that has not shown it can see a
gap gets no verdict, never "equivalent"; an endpoint that can see keeps its verdicts; the family's error rates stay
under alpha (the rule only withholds verdicts). Simulated with the sweep's own ``endpoint_checks`` on sweeps of a
known truth (``antlm_bench.sweep.calibration``), small and seeded; ``benchmarks/sensitivity.py`` prints the table."""

from __future__ import annotations

import numpy as np
import pytest

from antlm_bench.sweep.calibration import Truth, simulate_sensitivity
from antlm_bench.sweep.decision_text import comparison_lines, sensitivity_lines
from antlm_bench.sweep.rule import (
    ABOVE_CHANCE,
    CHANCE_ROLE,
    POSITIVE_CONTROL,
    SEES_POSITIVE_CONTROL,
    Decision,
    Rule,
    endpoint_checks,
)

REPS = 400
ALPHA_EACH = 0.05 / 3


def _rates(truth: Truth, seed: int) -> dict[str, object]:
    return {row.rule: row for row in simulate_sensitivity(truth, np.random.default_rng(seed), reps=REPS)}


def test_an_endpoint_at_chance_gets_no_verdict_where_its_interval_alone_would_say_equivalent():
    """EWoK in the reference study: every arm at 50%, a margin five seed SDs wide. The interval alone reads
    'equivalent' in nearly every sweep; under either rule the endpoint speaks at most at the per-comparison alpha
    (its positive control, or its baseline against chance, is a null comparison)."""
    rates = _rates(Truth("blind", 0.0, 0.0, 0.0, margin=5.0), 1)
    for rule in (SEES_POSITIVE_CONTROL, ABOVE_CHANCE):
        row = rates[rule]
        assert row.raw_equivalent > 0.9, rule
        assert row.speaks <= ALPHA_EACH + 0.01 and row.shown_equivalent <= ALPHA_EACH + 0.01, rule
        assert row.mean_seeds == 10.0, rule  # never settled: it runs to the cap


def test_an_endpoint_that_sees_keeps_its_verdicts_and_the_error_rate():
    """A baseline well above chance and a positive control 3 seed SDs worse: the endpoint speaks in nearly every
    sweep, a real gap of 2 SDs is shown decided with the right sign as often as the interval alone decides it, and
    under no gap no difference is shown beyond the per-comparison alpha."""
    gap = _rates(Truth("gap", 8.0, -2.0, -3.0), 2)
    null = _rates(Truth("null", 8.0, 0.0, -3.0), 3)
    for rule in (SEES_POSITIVE_CONTROL, ABOVE_CHANCE):
        assert gap[rule].speaks >= 0.97 and null[rule].speaks >= 0.97, rule
        assert gap[rule].shown_difference_right >= 0.8 and gap[rule].shown_difference_wrong == 0.0, rule
        assert null[rule].shown_difference_wrong <= null[rule].raw_difference_wrong <= ALPHA_EACH + 0.01, rule
        assert null[rule].shown_equivalent == null[rule].raw_equivalent, rule  # nothing withheld that could speak


def test_the_rules_differ_where_documented():
    """A positive control only 1 SD worse rarely qualifies the endpoint (the price of the stronger rule), where a
    baseline far above chance qualifies it always; a baseline barely above chance qualifies it rarely either way."""
    weak = _rates(Truth("weak", 8.0, 0.0, -1.0), 4)
    assert weak[SEES_POSITIVE_CONTROL].speaks < 0.4 and weak[ABOVE_CHANCE].speaks >= 0.97
    barely = _rates(Truth("barely", 0.5, 0.0, -0.5), 5)
    assert barely[SEES_POSITIVE_CONTROL].speaks < 0.2 and barely[ABOVE_CHANCE].speaks < 0.2


def _comparisons(control: str = "difference", chance: str = "difference") -> list[Decision]:
    seeds = tuple(range(1, 11))
    return [
        Decision("r", "p", "antlm", "ewok", "clm vs clm", seeds, -0.18, -0.54, 0.18, "equivalent"),
        Decision("r", "p", "quarter", "ewok", "clm vs clm", seeds, -3.0 if control == "difference" else -0.08,
                 -4.0 if control == "difference" else -0.39, -2.0 if control == "difference" else 0.22, control,
                 role=POSITIVE_CONTROL),
        Decision("r", "p", "base", "ewok", "clm", seeds, 0.12, 0.05 if chance == "difference" else -0.15, 0.4,
                 chance, role=CHANCE_ROLE),
    ]


@pytest.mark.parametrize("which", [SEES_POSITIVE_CONTROL, ABOVE_CHANCE])
def test_a_blind_endpoint_reads_no_verdict_and_says_why(which):
    rule = Rule("base", 0.05, 1.0, 10, 1, ("ewok",), positive_controls=("quarter",), sensitivity=(("ewok", which),))
    comparisons = _comparisons(control="equivalent", chance="undecided")
    (check,) = endpoint_checks(comparisons, rule)
    assert not check.speaks and check.rule == which
    line = comparison_lines(comparisons[:1], [check])[0]
    assert "no verdict: this endpoint does not separate these models" in line
    assert "decided: equivalent" not in line and "the interval alone: equivalent within the margin" in line
    (summary,) = sensitivity_lines([check], after=False)
    assert "can see a gap on no primary endpoint; not on ewok" in summary and "declared before the first seed" in summary
    (seeing,) = endpoint_checks(_comparisons(), rule)
    assert seeing.speaks
    assert "decided: equivalent within the margin" in comparison_lines(_comparisons()[:1], [seeing])[0]


def test_the_default_rule_follows_the_design():
    """positive-control where the sweep has a positive control, else above-chance where the column has a chance
    level, else none; a declared rule (or '*') wins."""
    assert Rule("b", 0.05, 1, 10, 1, positive_controls=("q",)).sensitivity_for("ewok", 0.5) == SEES_POSITIVE_CONTROL
    assert Rule("b", 0.05, 1, 10, 1).sensitivity_for("ewok", 0.5) == ABOVE_CHANCE
    assert Rule("b", 0.05, 1, 10, 1).sensitivity_for("heldout", None) == "none"
    declared = Rule("b", 0.05, 1, 10, 1, positive_controls=("q",), sensitivity=(("*", ABOVE_CHANCE),))
    assert declared.sensitivity_for("blimp", 0.5) == ABOVE_CHANCE


def test_a_controls_interval_within_the_margin_is_never_called_equivalent():
    """Issue #50 items 1-2: the controls are listed per endpoint; a control inside the margin (EWoK at chance) reads
    'not decided worse' (positive) or 'no difference decided' (negative), never 'equivalent'."""
    from antlm_bench.sweep.decision_text import control_lines
    from antlm_bench.sweep.rule import NEGATIVE_CONTROL_ROLE

    positive = Decision("r", "p", "q", "ewok", "clm vs clm", (1, 2, 3), -0.1, -0.4, 0.2, "equivalent",
                        role=POSITIVE_CONTROL)
    seen = Decision("r", "p", "q", "blimp", "clm vs clm", (1, 2, 3), -3.0, -4.0, -2.0, "difference",
                    role=POSITIVE_CONTROL)
    negative = Decision("r", "p", "b", "ewok", "clm vs clm", (1, 2, 3), 0.0, -0.3, 0.3, "equivalent",
                        label="negative-control", role=NEGATIVE_CONTROL_ROLE)
    lines = control_lines([seen, positive, negative])
    assert lines[0] == ("positive control r p q: blimp decided worse, ewok not decided worse (interval within the "
                        "margin): shows its known gap on 1 of 2 primary endpoints (blimp)")
    assert "ewok no difference decided (interval within the margin): passes" in lines[1]
    assert not any("equivalent" in line for line in lines)
