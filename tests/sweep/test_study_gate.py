"""The committed mini study (leaderboards/mini-antlm/results/<arch>/, shipped with the repository): each sweep's
stored decision is what the committed tables give, and ``check`` gates on what the sweep decided.

The decision is recomputed here from the exported tables with the sweep's own code (``compare_round``): an export
that lost or altered a score, dropped a run, or a decision written from other numbers than the ones committed
fails, and so does a change to the board or the confidence sequence that would move a committed decision.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from antlm_bench.results.check import run_check
from antlm_bench.sweep.decision_file import read_decision
from antlm_bench.sweep.grid import GridCell
from antlm_bench.sweep.rule import compare_round

STUDY = Path(__file__).resolve().parents[2] / "leaderboards" / "mini-antlm" / "results"
ARCHS = ("babyllama", "ltgbert")
# each architecture recomputes its whole study (~25-50 s): BabyLlama in the default suite, LTG-BERT under -m slow
ARCHS_DEFAULT_FIRST = [ARCHS[0], pytest.param(ARCHS[1], marks=pytest.mark.slow)]


def _sweep(arch: str) -> tuple[dict, list[GridCell]]:
    folder = STUDY / arch / "sweep"
    decision = json.loads((folder / "decision.json").read_text(encoding="utf-8"))
    record = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    cells = [GridCell(c["recipe"], c["preset"], c["schedule"], c["seed"]) for c in record["cells"]]
    return decision, cells


@pytest.mark.parametrize("arch", ARCHS_DEFAULT_FIRST)
def test_the_stored_decision_is_what_the_committed_tables_give(arch):
    decision, cells = _sweep(arch)
    # the rule as the record holds it (a decision made before the sensitivity rule checked no endpoint against chance)
    rule = read_decision(STUDY / arch / "sweep" / "decision.json").rule.rule()
    seeds = decision["seeds"]
    assert decision["status"] in ("decided", "max seeds reached") and len(seeds) <= rule.max_seeds
    # paired: every schedule ran every seed label
    schedules = {c.schedule for c in cells}
    assert rule.baseline in schedules and len(schedules) == 2
    assert {(c.schedule, c.seed) for c in cells} == {(s, seed) for s in schedules for seed in seeds}
    recomputed = compare_round(cells, STUDY / arch, rule, seeds)
    stored = decision["comparisons"]
    assert [(c.schedule, c.column) for c in recomputed] == [(c["schedule"], c["column"]) for c in stored]
    for mine, theirs in zip(recomputed, stored, strict=True):
        assert mine.decision == theirs["decision"], (mine.column, mine.decision, theirs["decision"])
        # a decided comparison names the round that first decided it (the sweep's log of rounds)
        first = theirs["first_decided_at"]
        assert (first is None) == (theirs["decision"] == "undecided")
        assert first is None or len(decision["rounds"][0]) <= first <= len(seeds)
        assert list(mine.seeds) == theirs["seeds"] == seeds
        for key in ("mean", "low", "high"):
            value = getattr(mine, key)
            assert theirs[key] is not None and math.isfinite(value)
            assert value == pytest.approx(theirs[key], rel=1e-9, abs=1e-12), (mine.column, key)


@pytest.mark.parametrize("arch", ARCHS_DEFAULT_FIRST)
def test_check_fails_the_antlm_schedule_where_the_sweep_decided_it_worse(arch):
    """The sweep's anytime-valid interval is wider than check's fixed-sample test on the same seeds: a gap the sweep
    decided is a regression for the gate too, and a column the sweep left undecided is never a regression that the
    sweep decided the other way."""
    decision, cells = _sweep(arch)
    baseline = decision["rule"]["baseline"]
    folder = STUDY / arch
    antlm = sorted(folder / c.name for c in cells if c.schedule != baseline)
    clm = sorted(folder / c.name for c in cells if c.schedule == baseline)
    report = run_check(antlm, clm)
    status = {line.column: line.status for line in report.lines}
    worse = [c["column"] for c in decision["comparisons"]
             if c["decision"] == "difference" and (c["mean"] > 0) == c["lower_is_better"]]
    better = [c["column"] for c in decision["comparisons"]
              if c["decision"] == "difference" and (c["mean"] > 0) != c["lower_is_better"]]
    assert worse or better, "the study decided nothing: this test would test nothing"
    for column in worse:
        assert status[column] == "regression", (column, status[column])
    for column in better:
        assert status[column] != "regression", (column, status[column])
    if worse:
        assert report.exit_code == 1
