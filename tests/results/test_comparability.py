"""The one comparability rule (results.leaderboard.comparability): each difference of instrument is named by its
typed reason, and every reader (board, sweep decision, check) takes it from there."""

from __future__ import annotations

from dataclasses import replace

import pytest

from antlm_bench.results.leaderboard.comparability import (
    Incomparable,
    instrument_difference,
    macro_difference,
)
from antlm_bench.results.leaderboard.compare import compare_cells
from antlm_bench.results.leaderboard.model import Cell
from antlm_bench.sweep.rule import _same_instrument

KEY = ("antlm-babyllama", "tiny", "d" * 8)


def _cell(**changes) -> Cell:
    base = Cell(value=0.6, low=0.55, high=0.65, spread=0.01, n_seeds=3, scoring="clm", n=100, item_var=1e-4,
                seed_values=[0.59, 0.6, 0.61], seed_runs=["r1", "r2", "r3"], seed_labels=["1", "2", "3"],
                tokenizer_key=KEY)
    return replace(base, **changes)


@pytest.mark.parametrize(("changes", "reason"), [
    ({}, None),
    ({"scoring": "pll"}, Incomparable.SCORING),
    ({"limit": 50}, Incomparable.ITEMS),
    # a per-token loss: another tokenizer (or an unknown one) counts other tokens; an accuracy does not care
    ({"metric": "loss", "tokenizer_key": ("antlm-babyllama", "small", "d" * 8)}, Incomparable.TOKENIZATION),
    ({"metric": "accuracy", "tokenizer_key": None}, None),
])
def test_each_difference_has_its_reason_on_every_reader(changes, reason):
    a = _cell(metric=changes.get("metric", "accuracy"))
    b = _cell(**changes)
    different = instrument_difference(a, b)
    assert (None if different is None else different.reason) is reason
    comparison, _ = compare_cells(a, b)
    assert comparison.incomparable is reason
    # untested exactly when the rule says so: no p-value, no verdict
    assert (comparison.p_value is None and comparison.significant is None) if reason else comparison.p_value is not None
    # the sweep's decision reads the same rule (a missing side may still come: testable)
    assert _same_instrument(a, b) is (reason is None)
    assert _same_instrument(a, None)


def test_scoring_outranks_items_and_a_macro_names_its_tasks():
    a, b = _cell(), _cell(scoring="pll", limit=50)
    assert instrument_difference(a, b).reason is Incomparable.SCORING
    macro = macro_difference([instrument_difference(a, b)], _cell(), _cell())
    assert macro.reason is Incomparable.TASKS and "clm vs pll among its tasks" in macro.note
    assert macro_difference([], _cell(), _cell()) is None
    assert macro_difference([], _cell(), _cell(limit=5)).detail == "every item vs --limit 5"
