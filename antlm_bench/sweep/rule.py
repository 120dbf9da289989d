"""``sweep --until-decided``'s stopping rule and its arithmetic: after each round of seeds, every schedule against the
baseline, paired by seed, on each task and the macro, with the anytime-valid confidence sequence of
``antlm_bench.results.stats.sequential`` (:func:`compare_round`), and which primary endpoints may speak (the
sensitivity rule, :func:`endpoint_checks`).

Controls (``--positive-control``, ``--negative-control``) are compared with the baseline the same way, at the family's
per-comparison alpha, but take no share of it and never keep the sweep running: they check the instrument. A
positive control (a configuration known to be worse, e.g. the baseline at a quarter of its epochs) passes when it is
decided worse on at least one primary endpoint and better on none; the negative control (the baseline's
configuration under another label: other seeds, a true gap of zero) passes when no primary endpoint is decided a
difference. Each says so at the stop and under the board (``decision_text.control_lines``).

The per-seed scores are the leaderboard's own (``build_leaderboard`` over the sweep's run folders: each run's final
checkpoint, one scoring method per column, the macro per seed), so the decision reads the numbers the board shows.
The family of comparisons (every schedule x every column, per recipe and preset) shares alpha by Bonferroni, so all
the intervals hold at once with probability >= 1 - alpha and "stop when all are decided" keeps that error rate.

The decision's file is ``decision_file``, its words ``decision_text``; both build on this module, never the reverse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.comparability import instrument_difference
from antlm_bench.results.leaderboard.definition import chance_level, metric_kind
from antlm_bench.results.stats.sequential import (
    DIFFERENCE,
    EQUIVALENT,
    UNDECIDED,
    confidence_sequence,
    decide,
    fewest_seeds,
    prior_precision,
)
from antlm_bench.results.store import StoreReader
from antlm_bench.runs.identity import labelled_schedule
from antlm_bench.sweep.grid import NEGATIVE_CONTROL, GridCell

NOT_TESTED = "not tested"  # different instruments (results.leaderboard.comparability), as the board says
# a column outside the declared primary endpoints: an interval, no verdict, no share of alpha
SECONDARY = "secondary"
# a loss that one side trains for more epochs than the other: its direction is the objectives', not a finding
FORCED = "forced"
# the roles of a control arm (Rule.role); "" for a schedule the study asks about
POSITIVE_CONTROL = "positive control"
NEGATIVE_CONTROL_ROLE = "negative control"
# the role of a sensitivity row: the baseline's own per-seed scores against the column's chance level (the
# ``above-chance`` rule); it decides nothing about a schedule and takes no share of alpha
CHANCE_ROLE = "baseline vs chance"
# What lets a primary endpoint speak (Rule.sensitivity), declared before the first seed (docs/statistics.md,
# "Sensitivity"): a positive control decided worse on it (the endpoint has shown it sees a known gap), or the
# baseline's anytime-valid interval above the column's chance level, or no check (declared in so many words).
# An endpoint that does not qualify gets no verdict on any comparison, never "equivalent".
SEES_POSITIVE_CONTROL = "positive-control"
ABOVE_CHANCE = "above-chance"
NO_CHECK = "none"
SENSITIVITY_RULES = (SEES_POSITIVE_CONTROL, ABOVE_CHANCE, NO_CHECK)
# the loss a scoring method measures on held-out text, and the objective that trains it
_LOSS_OBJECTIVE = {"clm": "CLM", "pll": "MLM"}


@dataclass(frozen=True)
class Rule:
    """The stopping rule, fixed before the first seed: what is stored with the decision."""

    baseline: str
    alpha: float
    tolerance: float | None  # points; None: no equivalence decision
    max_seeds: int
    round_seeds: int
    # the primary endpoints (board columns: a task, ``task.margin``, ``macro``), declared before the first seed:
    # only their comparisons form the family, take alpha and must be decided; empty: every column is primary
    primary: tuple[str, ...] = ()
    # per-column equivalence margins in the column's own units (points, nats), over ``tolerance``
    margins: tuple[tuple[str, float], ...] = ()
    # keep out of the family the loss comparisons whose direction the objectives imply (``forced_reason``); False
    # in decisions recorded before the rule had it, so they recompute as they were made
    forced_out: bool = False
    # controls (see the module's text): schedules known to be worse than the baseline, and whether the baseline's
    # configuration runs again under the negative control's label
    positive_controls: tuple[str, ...] = ()
    negative_control: bool = False
    # what lets each primary endpoint speak (SENSITIVITY_RULES), per column; a column not named takes the default
    # (``sensitivity_for``)
    sensitivity: tuple[tuple[str, str], ...] = ()
    # True for a decision recorded before the sensitivity rule existed (schema < 5): the default rule is applied
    # when it is read, and every rendering says it was applied afterwards
    sensitivity_after: bool = False

    def sensitivity_for(self, column: str, chance: float | None) -> str:
        """The column's sensitivity rule: its declared one; else ``positive-control`` when the study has a positive
        control (the direct evidence: the endpoint saw a known gap); else ``above-chance`` where the column has a
        chance level; else ``none``."""
        declared = dict(self.sensitivity)
        if column in declared or "*" in declared:
            return declared.get(column, declared.get("*", NO_CHECK))
        if self.positive_controls:
            return SEES_POSITIVE_CONTROL
        return ABOVE_CHANCE if chance is not None else NO_CHECK

    def role(self, schedule: str, label: str | None) -> str:
        """``positive control``, ``negative control`` or "" (a comparison of the study's family)."""
        if label == NEGATIVE_CONTROL and schedule == self.baseline:
            return NEGATIVE_CONTROL_ROLE
        return POSITIVE_CONTROL if label is None and schedule in self.positive_controls else ""

    def is_primary(self, column: str) -> bool:
        return not self.primary or column in self.primary

    def margin_for(self, column: str, unit: str) -> float | None:
        """The column's equivalence margin: its own (``margins``), else ``tolerance`` for a percentage, else none
        (a margin or a loss in nats is then decided by a difference only)."""
        own = dict(self.margins)
        if column in own:
            return own[column]
        return self.tolerance if unit == "pp" else None

    def margins_text(self) -> str:
        parts = [f"{column} +-{value:g}" for column, value in self.margins]
        if self.tolerance is not None:
            parts.append(f"+-{self.tolerance:g} pp for the other percentages")
        return "; ".join(parts) or "none"

    def alpha_each(self, comparisons: int) -> float:
        return self.alpha / max(1, comparisons)

    def prior_precision(self, comparisons: int) -> float:
        return prior_precision(self.max_seeds, self.alpha_each(comparisons))


def objective_epochs(schedule: str, objective: str) -> float:
    """Epochs of ``schedule`` that train ``objective`` (a mixture's phase counts by the objective's weight)."""
    from antlm_bench.runs.schedule import parse_schedule

    total = 0.0
    for phase in parse_schedule(schedule).phases:
        if phase.weights:
            total += phase.epochs * phase.weights.get(objective, 0.0) / sum(phase.weights.values())
        elif phase.objective == objective:
            total += phase.epochs
    return total


def forced_reason(schedule: str, baseline: str, metric: str, scoring: str) -> str | None:
    """Why a comparison's direction is implied by the objectives, or None: a held-out loss (clm: the causal loss,
    pll: the masked one) that one schedule trains for more epochs than the other is won by that side by
    construction (the mini study's heldout verdicts), so deciding it spends alpha on nothing."""
    objective = _LOSS_OBJECTIVE.get(scoring)
    if metric != "loss" or objective is None:
        return None
    mine, theirs = objective_epochs(schedule, objective), objective_epochs(baseline, objective)
    if math.isclose(mine, theirs):
        return None
    return f"{objective} trained {mine:g} against {theirs:g} epochs"


def largest_family(recipes: int, presets: int, schedules: int, tasks: int, primary: Sequence[str] = ()) -> int:
    """The most comparisons the decision may test: every other schedule x every primary column (without declared
    primary endpoints: every task's accuracy and margin, and the macro), per recipe and preset. ``schedules``:
    the baseline and the schedules the study asks about (controls take no share of alpha)."""
    columns = len(primary) if primary else 2 * tasks + 1
    return recipes * presets * (schedules - 1) * columns


def require_enough_seeds(rule: Rule, recipes: int, presets: int, schedules: int, tasks: int) -> None:
    """Refuse, before anything runs, a --max-seeds below which the anytime-valid interval bounds nothing for the
    largest family the decision may test (:func:`largest_family`)."""
    family = largest_family(recipes, presets, schedules, tasks, rule.primary)
    needed = fewest_seeds(rule.alpha_each(family))
    if rule.max_seeds < needed:
        raise UserError(f"--max-seeds {rule.max_seeds}: the anytime-valid interval bounds nothing below {needed} "
                        f"seeds at alpha {rule.alpha} over up to {family} comparisons; allow more seeds")


@dataclass(frozen=True)
class Decision:
    """One schedule against the baseline on one column (a task, a task's margin, or ``macro``), in the column's
    shown units (``unit``: pp for a percentage, else the metric's own, e.g. nats)."""

    recipe: str
    preset: str
    schedule: str
    column: str
    scoring: str  # "<schedule's method> vs <baseline's>"
    seeds: tuple[int, ...]  # the paired seed labels
    mean: float
    low: float
    high: float
    decision: str  # difference, equivalent, undecided or not tested
    unit: str = "pp"
    lower_is_better: bool = False
    # the seeds a side of the first round whose interval decided it (``loop.run_sweep``); None: never decided
    first_decided_at: int | None = None
    label: str | None = None  # the compared cells' label (the negative control's); None for the others
    role: str = ""  # positive control, negative control, or "" (in the study's family)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.recipe, self.preset, self.row, self.column

    @property
    def row(self) -> str:
        """The compared row's schedule as the board names it (``2_CLM [negative-control]``)."""
        return labelled_schedule(self.schedule, self.label)

    @property
    def is_worse(self) -> bool:
        """Decided a difference in the baseline's favour."""
        return self.decision == DIFFERENCE and ((self.mean > 0) if self.lower_is_better else (self.mean < 0))

    @property
    def is_better(self) -> bool:
        """Decided a difference in the schedule's favour (on a chance row: the baseline above chance)."""
        return self.decision == DIFFERENCE and ((self.mean < 0) if self.lower_is_better else (self.mean > 0))


@dataclass(frozen=True)
class EndpointCheck:
    """Whether one primary endpoint (a column, per recipe and preset) may speak, by its sensitivity rule: ``why``
    says what the rule saw."""

    recipe: str
    preset: str
    column: str
    rule: str  # SENSITIVITY_RULES
    speaks: bool
    why: str  # in a few words, as each withheld comparison repeats it
    evidence: str = ""  # the intervals the rule read

    @property
    def key(self) -> tuple[str, str, str]:
        return self.recipe, self.preset, self.column


def _column_chance(c: Decision) -> float | None:
    """The chance level of a comparison's column (``definition.chance_level``), from its units."""
    metric = "accuracy" if c.unit == "pp" else "margin" if c.unit == "nats" else c.unit
    return chance_level(c.column, metric)


def outcome_words(c: Decision) -> str:
    """A control's raw outcome on one endpoint, in words. A control's interval within the margin is not called
    "equivalent": for a positive control it means the endpoint did not see its known gap, for the negative control
    that no difference was decided (a verdict of equivalence belongs to an endpoint that has shown it can see)."""
    if c.decision == DIFFERENCE:
        return "decided worse" if c.is_worse else "decided better"
    within = ("not decided worse (interval within the margin)" if c.role == POSITIVE_CONTROL
              else "no difference decided (interval within the margin)")
    return {EQUIVALENT: within, UNDECIDED: "undecided"}.get(c.decision, c.decision)


def _interval_words(c: Decision) -> str:
    if not math.isfinite(c.low):
        return f"{c.mean:+.3g} {c.unit}, interval unbounded"
    return f"{c.mean:+.3g} {c.unit} [{c.low:+.3g}, {c.high:+.3g}]"


def endpoint_checks(comparisons: Sequence[Decision], rule: Rule) -> list[EndpointCheck]:
    """Each primary endpoint's sensitivity (``Rule.sensitivity_for``), read from the comparisons of one look: with
    ``positive-control`` it speaks when a positive control is decided worse on it; with ``above-chance`` when the
    baseline's interval against chance (the ``baseline vs chance`` row) lies above chance; with ``none`` always.
    A check only withholds verdicts: it never changes an interval or what keeps the sweep running."""
    tested = (DIFFERENCE, EQUIVALENT, UNDECIDED)
    endpoints = dict.fromkeys((c.recipe, c.preset, c.column) for c in comparisons
                              if c.role != CHANCE_ROLE and c.decision in tested and rule.is_primary(c.column))
    first = {(c.recipe, c.preset, c.column): c for c in comparisons if c.role != CHANCE_ROLE}
    checks = []
    for recipe, preset, column in endpoints:
        which = rule.sensitivity_for(column, _column_chance(first[(recipe, preset, column)]))
        here = [c for c in comparisons if (c.recipe, c.preset, c.column) == (recipe, preset, column)]
        if which == NO_CHECK:
            speaks, why, evidence = True, "no sensitivity check declared", ""
        elif which == SEES_POSITIVE_CONTROL:
            controls = [c for c in here if c.role == POSITIVE_CONTROL]
            worse = [c for c in controls if c.is_worse]
            speaks = bool(worse)
            named = ", ".join(c.row for c in controls)
            why = (f"positive control {', '.join(c.row for c in worse)} decided worse" if worse
                   else f"positive control {named} not decided worse" if controls
                   else "no positive control compared on it")
            evidence = "; ".join(f"{c.row} {outcome_words(c)}, {_interval_words(c)}" for c in controls)
        else:
            rows = [c for c in here if c.role == CHANCE_ROLE]
            if not rows:
                speaks, why, evidence = False, "baseline against chance not recorded (a decision before the rule)", ""
            else:
                (row,) = rows
                speaks = row.is_better
                why = f"baseline {row.schedule} {'above' if speaks else 'not shown above'} chance"
                evidence = f"{row.schedule} - chance {_interval_words(row)}"
        checks.append(EndpointCheck(recipe, preset, column, which, speaks, why, evidence))
    return checks


def no_verdicts(checks: Sequence[EndpointCheck]) -> dict[tuple[str, str, str], str]:
    """(recipe, preset, column) -> why, for each endpoint that may not speak."""
    return {check.key: check.why for check in checks if not check.speaks}


def _board(cells: Sequence[GridCell], output: Path, reader: StoreReader | None) -> Any:
    """The board ``antlm-bench leaderboard`` shows for these cells' run folders (its columns: each task and each
    task's margin; the macro where the four AntLM tasks are there)."""
    from antlm_bench.results.leaderboard import leaderboard_from_paths

    return leaderboard_from_paths(sorted({output / cell.name for cell in cells}), family="none", reader=reader)


def _seed_values(cell: Any, seeds: Sequence[int]) -> dict[int, float]:
    wanted = {str(seed): seed for seed in seeds}
    return {wanted[label]: value for label, value in zip(cell.seed_labels, cell.seed_values) if label in wanted}


def compare_round(cells: Sequence[GridCell], output: Path, rule: Rule, seeds: Sequence[int],
                  reader: StoreReader | None = None) -> list[Decision]:
    """Every schedule against ``rule.baseline`` (same recipe and preset) on each column and the macro, over the
    seeds both sides finished (``reader``: the command's, when it read these tables already)."""
    board = _board(cells, output, reader)
    rows = {row.key: row for row in board.rows}
    keys = sorted({(cell.recipe, cell.preset) for cell in cells})
    pairs = _pairs(board, rows, keys, cells, rule.baseline)
    testable = sum(pair.in_family(rule) for pair in pairs)
    c, alpha_each = rule.prior_precision(testable), rule.alpha_each(testable)
    return ([_compare(pair, rule, seeds, alpha_each, c) for pair in pairs]
            + _chance_rows(rows, keys, [*board.columns, "macro"], rule, seeds, alpha_each, c))


@dataclass(frozen=True)
class _Pair:
    """One comparison of a round: an arm's board cell against the baseline's on one column (None: not there yet)."""

    recipe: str
    preset: str
    schedule: str
    label: str | None
    column: str
    mine: Any
    theirs: Any

    def forced(self, rule: Rule) -> str | None:
        """Why the objectives imply this comparison's direction (:func:`forced_reason`), where the rule keeps such
        comparisons out of the family; else None."""
        cell = self.mine or self.theirs
        if not rule.forced_out or cell is None or self.mine is None or self.theirs is None \
                or self.mine.scoring != self.theirs.scoring:
            return None
        return forced_reason(self.schedule, rule.baseline, cell.metric, cell.scoring)

    def in_family(self, rule: Rule) -> bool:
        """Whether the comparison takes a share of alpha. As on the board, two different instruments (comparability:
        scoring method, tokens, items) are not tested against each other: such a gap leaves the family; only the
        primary endpoints' comparisons share alpha (all columns when none are declared); controls are tested at the
        family's per-comparison alpha but are not members of it."""
        return (_same_instrument(self.mine, self.theirs) and rule.is_primary(self.column)
                and self.forced(rule) is None and not rule.role(self.schedule, self.label))


def _pairs(board: Any, rows: dict[Any, Any], keys: Sequence[tuple[str, str]], cells: Sequence[GridCell],
           baseline: str) -> list[_Pair]:
    """Every arm but the baseline (the schedules, then the labelled ones: the negative control) against the baseline
    of its recipe and preset, on each of the board's columns and the macro where the board has one."""
    arms = sorted({(cell.schedule, cell.label) for cell in cells} - {(baseline, None)},
                  key=lambda arm: (arm[1] is not None, arm[1] or "", arm[0]))
    columns = [*board.columns, *(["macro"] if any(r.macro is not None for r in board.rows) else [])]
    pairs = []
    for recipe, preset in keys:
        base = rows.get((recipe, preset, baseline))
        for schedule, label in arms:
            row = rows.get((recipe, preset, labelled_schedule(schedule, label)))
            pairs += [_Pair(recipe, preset, schedule, label, column, _cell_of(row, column), _cell_of(base, column))
                      for column in columns]
    return pairs


def _compare(pair: _Pair, rule: Rule, seeds: Sequence[int], alpha_each: float, c: float) -> Decision:
    """One comparison's interval over the seeds both sides finished, and its verdict."""
    a, b = pair.mine, pair.theirs
    arm = {"label": pair.label, "role": rule.role(pair.schedule, pair.label)}
    mine = _seed_values(a, seeds) if a is not None else {}
    theirs = _seed_values(b, seeds) if b is not None else {}
    paired = sorted(set(mine) & set(theirs))
    kind = metric_kind((a or b).metric if (a or b) is not None else None)
    units = _units(kind)
    differences = [kind.scale * (mine[s] - theirs[s]) for s in paired]
    scoring = f"{a.scoring if a else '-'} vs {b.scoring if b else '-'}"
    named = (pair.recipe, pair.preset, pair.schedule, pair.column, scoring)
    mean = float(sum(differences) / len(differences)) if differences else math.nan
    if not _same_instrument(a, b):
        return Decision(*named, tuple(paired), mean, -math.inf, math.inf, NOT_TESTED, **units, **arm)
    interval = confidence_sequence(differences, alpha_each, c) if paired else None
    if interval is None:
        return Decision(*named, (), math.nan, -math.inf, math.inf, UNDECIDED, **units, **arm)
    # the equivalence margin is in points: it decides percentages only (a margin or a loss, in nats, is decided by a
    # difference alone)
    tolerance = rule.margin_for(pair.column, units["unit"])
    verdict = (FORCED if pair.forced(rule) is not None
               else decide(interval, tolerance) if rule.is_primary(pair.column) else SECONDARY)
    return Decision(*named, tuple(paired), interval.mean, interval.low, interval.high, verdict, **units, **arm)


def _units(kind: Any) -> dict[str, Any]:
    """A metric kind's shown unit (pp for a percentage) and direction, as a Decision holds them."""
    return {"unit": "pp" if kind.unit == "%" else kind.unit, "lower_is_better": kind.lower_is_better}


def _chance_rows(rows: dict[Any, Any], keys: Sequence[tuple[str, str]], columns: Sequence[str], rule: Rule,
                 seeds: Sequence[int], alpha_each: float, c: float) -> list[Decision]:
    """The above-chance rule's evidence: for each primary column that declares it, the baseline's per-seed scores
    minus the column's chance level, in the same anytime-valid interval as every comparison (the family's
    per-comparison alpha, no share of it). None for a decision recorded before the rule (it holds no such rows)."""
    if rule.sensitivity_after:
        return []
    out = []
    for recipe, preset in keys:
        base = rows.get((recipe, preset, rule.baseline))
        for column in columns:
            cell = _cell_of(base, column)
            chance = None if cell is None else chance_level(column, cell.metric)
            if cell is None or not rule.is_primary(column) or rule.sensitivity_for(column, chance) != ABOVE_CHANCE \
                    or chance is None:
                continue
            kind = metric_kind(cell.metric)
            values = _seed_values(cell, seeds)
            differences = [kind.scale * (values[s] - chance) for s in sorted(values)]
            units = _units(kind)
            if not differences:
                out.append(Decision(recipe, preset, rule.baseline, column, cell.scoring, (), math.nan, -math.inf,
                                    math.inf, UNDECIDED, **units, role=CHANCE_ROLE))
                continue
            interval = confidence_sequence(differences, alpha_each, c)
            out.append(Decision(recipe, preset, rule.baseline, column, cell.scoring, tuple(sorted(values)),
                                interval.mean, interval.low, interval.high, decide(interval, None), **units,
                                role=CHANCE_ROLE))
    return out


def _cell_of(row: Any, column: str) -> Any:
    return None if row is None else (row.macro if column == "macro" else row.cells.get(column))


def _same_instrument(a: Any, b: Any) -> bool:
    """One instrument measured both sides (the board's rule); a cell that is missing yet may still come: it counts
    as testable."""
    return a is None or b is None or instrument_difference(a, b) is None


__all__ = ["ABOVE_CHANCE", "CHANCE_ROLE", "FORCED", "NEGATIVE_CONTROL_ROLE", "NO_CHECK", "NOT_TESTED",
           "POSITIVE_CONTROL", "SECONDARY", "SEES_POSITIVE_CONTROL", "SENSITIVITY_RULES", "Decision", "EndpointCheck",
           "Rule", "compare_round", "endpoint_checks", "forced_reason", "largest_family", "no_verdicts",
           "objective_epochs", "outcome_words", "require_enough_seeds"]
