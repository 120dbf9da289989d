"""``sweep --until-decided``: after each round of seeds, every schedule against the baseline, paired by seed, on each
task and the macro, with the anytime-valid confidence sequence of ``antlm_bench.results.stats.sequential``.

Controls (``--positive-control``, ``--negative-control``) are compared with the baseline the same way, at the family's
per-comparison alpha, but take no share of it and never keep the sweep running: they check the instrument. A
positive control (a configuration known to be worse, e.g. the baseline at a quarter of its epochs) passes when it is
decided worse on at least one primary endpoint and better on none; the negative control (the baseline's
configuration under another label: other seeds, a true gap of zero) passes when no primary endpoint is decided a
difference. Each says so at the stop and under the board (:func:`control_lines`).

The per-seed scores are the leaderboard's own (``build_leaderboard`` over the sweep's run folders: each run's final
checkpoint, one scoring method per column, the macro per seed), so the decision reads the numbers the board shows.
The family of comparisons (every schedule x every column, per recipe and preset) shares alpha by Bonferroni, so all
the intervals hold at once with probability >= 1 - alpha and "stop when all are decided" keeps that error rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from antlm_bench.data.readers import read_json_model
from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.comparability import instrument_difference
from antlm_bench.results.leaderboard.definition import chance_level, metric_kind
from antlm_bench.results.leaderboard.results import results_reader
from antlm_bench.results.stats.sequential import (
    DIFFERENCE,
    EQUIVALENT,
    UNDECIDED,
    confidence_sequence,
    decide,
    fewest_seeds,
    prior_precision,
)
from antlm_bench.results.store import StoreReader, store_digest
from antlm_bench.runs.identity import labelled_schedule
from antlm_bench.sweep.grid import NEGATIVE_CONTROL, GridCell
from antlm_bench.sweep.record import DECISION_FILE, SWEEP_DIR, SweepFolder

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
NO_VERDICT = "no verdict: this endpoint does not separate these models"
# the loss a scoring method measures on held-out text, and the objective that trains it
_LOSS_OBJECTIVE = {"clm": "CLM", "pll": "MLM"}
# 1: without the digests of the tables (still read: the board recomputes the decision either way); 2: without
# controls; 2 and 3: digests of the items' file bytes, which an export without the evaluation text changes (not
# compared; the decision is still recomputed from the tables); 4: digests of the tables' content
# (results.store.store_digest), the same on a run folder and on its export; 5: the sensitivity rule
# (``rule.sensitivity``, the ``endpoints`` it gave, and the baseline-vs-chance rows of the above-chance rule). A
# record before 5 is re-read with the default sensitivity rule, marked as applied after the decision was made
DECISION_SCHEMA_VERSION = 5
SENSITIVITY_SCHEMA = 5
CONTENT_DIGESTS = 4  # the first version whose table digests survive an export
METHOD = ("Lai (1976) confidence sequence for the mean of paired per-seed differences, Gaussian with unknown "
          "variance (anytime-valid: any stopping rule keeps the error rate); docs/statistics.md")


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

    def text(self, no_verdict: str | None = None) -> str:
        """The comparison in one line; ``no_verdict``: why its endpoint may not speak (``endpoint_checks``), which
        replaces the interval's reading (the interval stays, descriptive)."""
        if self.role == CHANCE_ROLE:
            return self._chance_text()
        if self.decision == NOT_TESTED:
            interval = "no interval"
        elif not math.isfinite(self.low):
            interval = "interval unbounded (too few seeds yet)"
        else:
            interval = f"[{self.low:+.3g}, {self.high:+.3g}]"
        better = (self.mean < 0) if self.lower_is_better else (self.mean > 0)
        verdict = {DIFFERENCE: f"decided: {'better' if better else 'worse'} than the baseline",
                   EQUIVALENT: "decided: equivalent within the margin", UNDECIDED: "undecided",
                   NOT_TESTED: "not tested: different instruments (scoring method, tokens or items)",
                   SECONDARY: "secondary endpoint: interval at the family's per-comparison alpha, no verdict",
                   FORCED: "forced by the objectives (one side trains this loss longer): out of the family, no "
                           "verdict"
                   }[self.decision]
        if no_verdict is not None and self.decision in (DIFFERENCE, EQUIVALENT, UNDECIDED):
            verdict = f"{NO_VERDICT} ({no_verdict}; the interval alone: {verdict.removeprefix('decided: ')})"
        first = (f", first decided at {self.first_decided_at} seeds"
                 if self.first_decided_at is not None and self.decision in (DIFFERENCE, EQUIVALENT) else "")
        role = f"{self.role}, no share of alpha; " if self.role else ""
        return (f"{self.row} - baseline on {self.column}: {self.mean:+.3g} {self.unit} {interval}, {verdict} "
                f"({role}{len(self.seeds)} paired seeds{first}, {self.scoring})")

    def _chance_text(self) -> str:
        interval = ("interval unbounded (too few seeds yet)" if not math.isfinite(self.low)
                    else f"[{self.low:+.3g}, {self.high:+.3g}]")
        above = self.decision == DIFFERENCE and ((self.mean < 0) if self.lower_is_better else (self.mean > 0))
        reading = "above chance" if above else "not shown above chance"
        return (f"baseline {self.schedule} - chance on {self.column}: {self.mean:+.3g} {self.unit} {interval}, "
                f"{reading} (sensitivity check of the above-chance rule, no share of alpha; {len(self.seeds)} seeds)")

    @property
    def is_worse(self) -> bool:
        """Decided a difference in the baseline's favour."""
        return self.decision == DIFFERENCE and ((self.mean > 0) if self.lower_is_better else (self.mean < 0))


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


def _outcome(c: Decision) -> str:
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
            evidence = "; ".join(f"{c.row} {_outcome(c)}, {_interval_words(c)}" for c in controls)
        else:
            rows = [c for c in here if c.role == CHANCE_ROLE]
            if not rows:
                speaks, why, evidence = False, "baseline against chance not recorded (a decision before the rule)", ""
            else:
                (row,) = rows
                speaks = row.decision == DIFFERENCE and ((row.mean < 0) if row.lower_is_better else (row.mean > 0))
                why = f"baseline {row.schedule} {'above' if speaks else 'not shown above'} chance"
                evidence = f"{row.schedule} - chance {_interval_words(row)}"
        checks.append(EndpointCheck(recipe, preset, column, which, speaks, why, evidence))
    return checks


def no_verdicts(checks: Sequence[EndpointCheck]) -> dict[tuple[str, str, str], str]:
    """(recipe, preset, column) -> why, for each endpoint that may not speak."""
    return {check.key: check.why for check in checks if not check.speaks}


def comparison_lines(comparisons: Sequence[Decision], checks: Sequence[EndpointCheck]) -> list[str]:
    """One line per comparison, each withheld where its endpoint may not speak."""
    silent = no_verdicts(checks)
    return [f"{c.recipe} {c.preset}: {c.text(silent.get((c.recipe, c.preset, c.column)))}" for c in comparisons]


def sensitivity_lines(checks: Sequence[EndpointCheck], after: bool) -> list[str]:
    """Per recipe and preset: on which primary endpoints the study has shown it can see a gap, and on which not
    (whose comparisons get no verdict), with the rule and when it was fixed."""
    groups: dict[tuple[str, str], list[EndpointCheck]] = {}
    for check in checks:
        groups.setdefault((check.recipe, check.preset), []).append(check)
    when = ("applied after this decision was made (its record predates the rule; no interval or decision of it "
            "changed, only which verdicts are shown)" if after else "declared before the first seed")
    lines = []
    for (recipe, preset), members in groups.items():
        rules = "; ".join(f"{rule} on {', '.join(c.column for c in members if c.rule == rule)}"
                          for rule in dict.fromkeys(c.rule for c in members))
        sees = [c.column for c in members if c.speaks]
        blind = [c for c in members if not c.speaks]
        text = (f"sensitivity {recipe} {preset} (rule: {rules}; {when}): the study has shown it can see a gap on "
                f"{', '.join(sees) if sees else 'no primary endpoint'}")
        if blind:
            text += ("; not on " + "; ".join(f"{c.column} ({c.why}: {c.evidence})" if c.evidence
                                             else f"{c.column} ({c.why})" for c in blind)
                     + f": {'its' if len(blind) == 1 else 'their'} comparisons get no verdict")
        lines.append(text)
    return lines


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
    # every arm but the baseline: the schedules, then the labelled ones (the negative control)
    arms = sorted({(cell.schedule, cell.label) for cell in cells} - {(rule.baseline, None)},
                  key=lambda arm: (arm[1] is not None, arm[1] or "", arm[0]))
    pairs = []
    for recipe, preset in keys:
        base = rows.get((recipe, preset, rule.baseline))
        for schedule, label in arms:
            row = rows.get((recipe, preset, labelled_schedule(schedule, label)))
            for column in [*board.columns, *(["macro"] if any(r.macro is not None for r in board.rows) else [])]:
                pairs.append((recipe, preset, schedule, label, column, row, base))
    cells_of = [(recipe, preset, schedule, label, column, _cell_of(row, column), _cell_of(base, column))
                for recipe, preset, schedule, label, column, row, base in pairs]
    # as on the board, two different instruments (comparability: scoring method, tokens, items) are not tested
    # against each other: such a gap leaves the family
    # only the primary endpoints' comparisons share alpha (all columns when none are declared)
    def forced(schedule: str, a: Any, b: Any) -> str | None:
        cell = a or b
        if not rule.forced_out or cell is None or a is None or b is None or a.scoring != b.scoring:
            return None
        return forced_reason(schedule, rule.baseline, cell.metric, cell.scoring)

    # controls are tested at the family's per-comparison alpha but are not members of it
    testable = sum(_same_instrument(a, b) and rule.is_primary(column) and forced(schedule, a, b) is None
                   and not rule.role(schedule, label) for _, _, schedule, label, column, a, b in cells_of)
    c = rule.prior_precision(testable)
    alpha_each = rule.alpha_each(testable)
    out = []
    for recipe, preset, schedule, label, column, a, b in cells_of:
        arm = {"label": label, "role": rule.role(schedule, label)}
        mine = _seed_values(a, seeds) if a is not None else {}
        theirs = _seed_values(b, seeds) if b is not None else {}
        paired = sorted(set(mine) & set(theirs))
        kind = metric_kind((a or b).metric if (a or b) is not None else None)
        units = {"unit": "pp" if kind.unit == "%" else kind.unit, "lower_is_better": kind.lower_is_better}
        differences = [kind.scale * (mine[s] - theirs[s]) for s in paired]
        scoring = f"{a.scoring if a else '-'} vs {b.scoring if b else '-'}"
        mean = float(sum(differences) / len(differences)) if differences else math.nan
        if not _same_instrument(a, b):
            out.append(Decision(recipe, preset, schedule, column, scoring, tuple(paired), mean, -math.inf,
                                  math.inf, NOT_TESTED, **units, **arm))
            continue
        interval = confidence_sequence(differences, alpha_each, c) if paired else None
        if interval is None:
            out.append(Decision(recipe, preset, schedule, column, scoring, (), math.nan, -math.inf, math.inf,
                                  UNDECIDED, **units, **arm))
            continue
        # the equivalence margin is in points: it decides percentages only (a margin or a loss, in nats, is decided
        # by a difference alone)
        tolerance = rule.margin_for(column, units["unit"])
        verdict = (FORCED if forced(schedule, a, b) is not None
                   else decide(interval, tolerance) if rule.is_primary(column) else SECONDARY)
        out.append(Decision(recipe, preset, schedule, column, scoring, tuple(paired), interval.mean, interval.low,
                              interval.high, verdict, **units, **arm))
    return out + _chance_rows(rows, keys, [*board.columns, "macro"], rule, seeds, alpha_each, c)


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
            units = {"unit": "pp" if kind.unit == "%" else kind.unit, "lower_is_better": kind.lower_is_better}
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


class RuleRecord(BaseModel):
    """decision.json's ``rule``: the stopping rule and how alpha was shared."""

    model_config = ConfigDict(extra="forbid")

    baseline: str
    alpha: float = Field(gt=0, lt=1)
    tolerance: float | None = Field(None, ge=0)
    max_seeds: int = Field(ge=1)
    round_seeds: int = Field(ge=1)
    comparisons: int = Field(ge=0)
    primary: list[str] = Field(default_factory=list)  # empty: every column (a record written before the key)
    margins: dict[str, float] = Field(default_factory=dict)  # per-column equivalence margins, the column's units
    forced_out: bool = False  # loss comparisons the objectives decide kept out (False: a record made before)
    positive_controls: list[str] = Field(default_factory=list)  # controls (empty: a record made before them)
    negative_control: bool = False
    # each primary endpoint's declared sensitivity rule (SENSITIVITY_RULES; a column not named takes the default,
    # Rule.sensitivity_for); None: a record made before the rule existed (schema < 5), re-read with the default
    sensitivity: dict[str, Literal["positive-control", "above-chance", "none"]] | None = None
    alpha_each: float
    correction: str
    prior_precision: float
    decided_when: str

    def rule(self) -> Rule:
        return Rule(self.baseline, self.alpha, self.tolerance, self.max_seeds, self.round_seeds,
                    tuple(self.primary), tuple(self.margins.items()), self.forced_out,
                    tuple(self.positive_controls), self.negative_control,
                    tuple((self.sensitivity or {}).items()), self.sensitivity is None)


class ComparisonRecord(BaseModel):
    """One comparison as decision.json stores it (non-finite numbers as null)."""

    model_config = ConfigDict(extra="forbid")

    recipe: str
    preset: str
    schedule: str
    column: str
    scoring: str
    seeds: list[int]
    mean: float | None
    low: float | None
    high: float | None
    decision: Literal["difference", "equivalent", "undecided", "not tested", "secondary", "forced"]
    unit: str = "pp"
    lower_is_better: bool = False
    first_decided_at: int | None = None
    label: str | None = None
    role: Literal["", "positive control", "negative control", "baseline vs chance"] = ""

    def comparison(self) -> Decision:
        return Decision(self.recipe, self.preset, self.schedule, self.column, self.scoring, tuple(self.seeds),
                          math.nan if self.mean is None else self.mean,
                          -math.inf if self.low is None else self.low, math.inf if self.high is None else self.high,
                          self.decision, self.unit, self.lower_is_better, self.first_decided_at, self.label,
                          self.role)

    @classmethod
    def of(cls, c: Decision) -> ComparisonRecord:
        return cls(**{**asdict(c), "seeds": list(c.seeds), "mean": None if math.isnan(c.mean) else c.mean,
                      "low": None if not math.isfinite(c.low) else c.low,
                      "high": None if not math.isfinite(c.high) else c.high})


class EndpointRecord(BaseModel):
    """One primary endpoint's sensitivity as decision.json stores it (``EndpointCheck``)."""

    model_config = ConfigDict(extra="forbid")

    recipe: str
    preset: str
    column: str
    rule: Literal["positive-control", "above-chance", "none"]
    speaks: bool
    why: str
    evidence: str = ""

    def check(self) -> EndpointCheck:
        return EndpointCheck(self.recipe, self.preset, self.column, self.rule, self.speaks, self.why, self.evidence)


class DecisionRecord(BaseModel):
    """``<output>/sweep/decision.json``, typed: written by :func:`write_decision` only, read by
    :func:`read_decision` only (every field checked: one line naming the file and the field otherwise)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1, 2, 3, 4, 5]
    status: str
    method: str
    rule: RuleRecord
    seeds: list[int]
    rounds: list[list[int]]
    comparisons: list[ComparisonRecord]
    # run folder name -> sha256 of its committed tables (results.store.store_digest) when the decision was made
    tables: dict[str, str] = Field(default_factory=dict)
    # each primary endpoint's sensitivity at the last look (schema 5; ``endpoint_checks`` of the comparisons)
    endpoints: list[EndpointRecord] = Field(default_factory=list)

    def cells(self) -> list[GridCell]:
        """The run folders the decision compared: every (recipe, preset) of its comparisons, their schedules and the
        baseline, at every seed it used."""
        keys = {(c.recipe, c.preset, c.schedule, c.label) for c in self.comparisons if c.role != CHANCE_ROLE}
        keys |= {(c.recipe, c.preset, self.rule.baseline, None) for c in self.comparisons}
        return [GridCell(recipe, preset, schedule, seed, label=label)
                for recipe, preset, schedule, label in sorted(keys, key=lambda k: (k[0], k[1], k[2], k[3] or ""))
                for seed in self.seeds]


def _table_digests(cells: Sequence[GridCell], output: Path, reader: StoreReader | None) -> dict[str, str]:
    digest = reader.digest if reader is not None else store_digest
    return {cell.name: digest(output / cell.name) for cell in sorted(set(cells), key=lambda c: c.name)}


def write_decision(folder: SweepFolder, rule: Rule, comparisons: Sequence[Decision], seeds: Sequence[int],
                   rounds: Sequence[Sequence[int]], status: str, cells: Sequence[GridCell] = (),
                   reader: StoreReader | None = None) -> DecisionRecord:
    """Store the rule, the seeds used, each comparison's decision and the digests of the tables of ``cells`` (the
    run folders it was computed from) in ``<output>/sweep/decision.json`` (atomically); ``status``: decided, max
    seeds reached, or stopped (a failed or interrupted round)."""
    n = sum(c.decision not in (NOT_TESTED, SECONDARY, FORCED) and not c.role for c in comparisons)
    record = DecisionRecord(
        schema_version=DECISION_SCHEMA_VERSION, status=status, method=METHOD,
        rule=RuleRecord(**{**{k: v for k, v in asdict(rule).items() if k != "sensitivity_after"},
                           "primary": list(rule.primary), "margins": dict(rule.margins),
                           "positive_controls": list(rule.positive_controls),
                           "sensitivity": dict(rule.sensitivity)},
                        comparisons=n,
                        alpha_each=rule.alpha_each(n),
                        correction=f"Bonferroni over {n} tested comparison(s)"
                        + (f" of the primary endpoints ({', '.join(rule.primary)})" if rule.primary else ""),
                        prior_precision=rule.prior_precision(max(1, n)),
                        decided_when="the interval excludes 0 (difference) or lies within +-tolerance (equivalent)"),
        seeds=list(seeds), rounds=[list(r) for r in rounds],
        comparisons=[ComparisonRecord.of(c) for c in comparisons],
        tables=_table_digests(cells, folder.output, reader),
        endpoints=[EndpointRecord(**asdict(check)) for check in endpoint_checks(comparisons, rule)],
    )
    folder.write_json(folder.decision_file, record.model_dump(mode="json"))
    return record


def read_decision(path: Path) -> DecisionRecord:
    """A decision.json read through its model: one line naming the file and the field when it is not one."""
    return read_json_model(path, DecisionRecord, "not a sweep decision file of this version",
                           "run the sweep again")


def verify_decision(path: Path, record: DecisionRecord, reader: StoreReader | None = None) -> str | None:
    """Whether the decision is what the tables beside it give: the digests of the tables it recorded (schema 2)
    are those of the tables now, and the comparisons recomputed from the tables (``compare_round``, the sweep's own
    code) are the recorded ones, decision for decision, with the recorded status. None when it holds; else why
    not, in a few words. ``reader``: the command's, whose reads the board and this share."""
    output = path.parent.parent
    reader = reader if reader is not None else results_reader()
    for name, digest in (record.tables.items() if record.schema_version >= CONTENT_DIGESTS else ()):
        if reader.digest(output / name) != digest:
            return f"the tables of {name} changed since the decision"
    if not record.comparisons:
        return None
    try:
        recomputed = compare_round(record.cells(), output, record.rule.rule(), record.seeds, reader)
    except UserError as err:
        return f"it cannot be recomputed from the tables ({err})"
    stored = [row.comparison() for row in record.comparisons]
    if [c.key for c in recomputed] != [c.key for c in stored]:
        return "the tables give other comparisons than it records"
    for mine, theirs in zip(recomputed, stored):
        same = (mine.decision, mine.seeds, mine.role) == (theirs.decision, theirs.seeds, theirs.role) and all(
            _close(getattr(mine, key), getattr(theirs, key)) for key in ("mean", "low", "high"))
        if not same:
            return (f"{theirs.schedule} on {theirs.column}: it records {theirs.decision} "
                    f"{_number(theirs.mean)}, the tables give {mine.decision} {_number(mine.mean)}")
    if record.status == "decided" and any(c.decision == UNDECIDED and not c.role for c in recomputed):
        return "it says decided, but the tables leave comparisons undecided"
    if record.schema_version >= SENSITIVITY_SCHEMA and \
            [e.check() for e in record.endpoints] != endpoint_checks(stored, record.rule.rule()):
        return "its endpoints' sensitivity is not what its comparisons give"
    return None


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _number(value: float) -> str:
    return "" if math.isnan(value) else f"({value:+.3g})"


def _decision_files(folders: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for folder in map(Path, folders):
        if folder.is_dir():
            # anything at the name, not only a regular file: a link (to a FIFO, a device, another sweep's record) or
            # a folder there is read by read_decision, which refuses it in one line, never left off without a word
            found.extend(sorted(p for p in folder.rglob(DECISION_FILE) if p.parent.name == SWEEP_DIR))
    return list(dict.fromkeys(found))


@dataclass
class DecisionView:
    """What the sweeps that decided on a board's results say: the lines printed under the board, and the sweep's
    verdict of each comparison it made, by (recipe, preset, row, column) with its baseline, so that the board's
    gaps table prints no second, fixed-sample verdict for them (``swept_gaps``)."""

    lines: list[str]
    verdicts: dict[tuple[str, str, str, str], tuple[str, str]]  # -> (baseline, the sweep's verdict in words)
    # (recipe, preset, row) -> baseline: the pairs a sweep compared (its seeds were chosen by the data, so no
    # column of theirs gets a fixed-sample verdict on the board, a column the sweep did not declare included)
    pairs: dict[tuple[str, str, str], str] = field(default_factory=dict)


def decision_view(folders: Sequence[Path], reader: StoreReader | None = None) -> DecisionView:
    """The decisions in ``folders`` or any folder below them (a study may hold one sweep per architecture; nothing
    where none did): per decision, the rule in one line, a reminder that the table assumed a fixed seed count, one
    line per comparison, the controls per endpoint and the endpoints' sensitivity. A decision that its tables do
    not give (edited, or the tables changed since) is never shown as decided: one line says so instead, and none of
    its verdicts replaces the board's."""
    view = DecisionView([], {}, {})
    reader = reader if reader is not None else results_reader()  # the board's, when it read these tables
    for path in _decision_files(folders):
        _decision_file_view(path, view, reader)
    return view


def decision_lines(folders: Sequence[Path], reader: StoreReader | None = None) -> list[str]:
    """The lines of :func:`decision_view`: what the leaderboard prints under the table."""
    return decision_view(folders, reader).lines


def verdict_words(c: Decision, no_verdict: str | None) -> str:
    """The sweep's verdict of one comparison in a few words, as the board's gaps table repeats it."""
    if no_verdict is not None and c.decision in (DIFFERENCE, EQUIVALENT, UNDECIDED):
        return "no verdict: endpoint does not separate these models"
    if c.decision == DIFFERENCE:
        better = (c.mean < 0) if c.lower_is_better else (c.mean > 0)
        return f"decided {'better' if better else 'worse'}"
    return {EQUIVALENT: "equivalent within the margin", UNDECIDED: "undecided",
            NOT_TESTED: "not tested", SECONDARY: "secondary endpoint, no verdict",
            FORCED: "forced by the objectives, no verdict"}[c.decision]


NOT_AN_ENDPOINT = "not a declared endpoint: no verdict"


def swept_gaps(group_by: Sequence[str], gaps: Sequence[tuple[tuple[str, ...], tuple[str, ...] | None, str]],
               view: DecisionView) -> dict[tuple[tuple[str, ...], str], str]:
    """The board's gaps (row key, reference key, column) between two rows a sweep compared (a row against the
    sweep's baseline of the same recipe and preset) -> the sweep's verdict in words, or :data:`NOT_AN_ENDPOINT`
    for a column the sweep did not compare (e.g. a board's own average): one comparison gets one verdict, and a
    fixed-sample test on seeds the sweep chose is not valid. Only on a board grouped by recipe, preset and
    schedule (another grouping compares other rows than the sweep did)."""
    if not {"recipe", "preset", "schedule"} <= set(group_by):
        return {}
    out = {}
    for row, reference, column in gaps:
        if reference is None:
            continue
        mine, theirs = dict(zip(group_by, row)), dict(zip(group_by, reference))
        baseline = view.pairs.get((mine["recipe"], mine["preset"], mine["schedule"]))
        if baseline is None or (theirs["recipe"], theirs["preset"], theirs["schedule"]) != \
                (mine["recipe"], mine["preset"], baseline):
            continue
        found = view.verdicts.get((mine["recipe"], mine["preset"], mine["schedule"], column))
        out[(row, column)] = found[1] if found is not None else NOT_AN_ENDPOINT
    return out


def decision_reference(folders: Sequence[Path], group_by: Sequence[str]) -> dict[str, str] | None:
    """The board row the sweeps that decided in ``folders`` compared every schedule with (their ``--baseline``),
    as a board reference, so that the board's gaps carry the sign of the decision lines under it: None unless the
    decisions name one baseline, one recipe and one preset, and the board groups by them."""
    baselines, recipes, presets = set(), set(), set()
    for path in _decision_files(folders):
        try:
            record = read_decision(path)
        except UserError:
            return None  # decision_lines names the damaged file
        baselines.add(record.rule.baseline)
        for row in record.comparisons:
            recipes.add(row.recipe)
            presets.add(row.preset)
    if len(baselines) != 1 or len(recipes) != 1 or len(presets) != 1:
        return None
    wanted = {"recipe": recipes.pop(), "preset": presets.pop(), "schedule": baselines.pop()}
    return wanted if all(key in group_by for key in wanted) else None


def _decision_file_view(path: Path, view: DecisionView, reader: StoreReader) -> None:
    record = read_decision(path)
    problem = verify_decision(path, record, reader)
    if problem is not None:
        view.lines.append(f"sweep decision NOT SHOWN: {path} does not match the tables beside it ({problem}); it is "
                          "not a decision of these results: run the sweep again to decide")
        return
    rule = record.rule
    lines = [f"sweep decision ({record.status}; seeds {_seed_text(record.seeds)} of at most "
             f"{rule.max_seeds}; baseline {rule.baseline}; alpha {rule.alpha}, "
             f"{rule.correction}; equivalence margin "
             f"{record.rule.rule().margins_text()}; {_shown_path(path)})",
             "  the sweep chose how many seeds to run from the results, so decide by these anytime-valid intervals: "
             "a fixed-sample interval or p-value on the same seeds assumes their number was fixed in advance (the "
             "board's gaps for these comparisons are descriptive, with neither a p-value nor a fixed-sample verdict)"]
    comparisons = [row.comparison() for row in record.comparisons]
    checks = endpoint_checks(comparisons, rule.rule())
    lines += [f"  {line}" for line in comparison_lines(comparisons, checks)]
    view.lines += lines + [f"  {line}" for line in [*control_lines(comparisons),
                                                    *sensitivity_lines(checks, rule.rule().sensitivity_after)]]
    silent = no_verdicts(checks)
    for c in comparisons:
        if c.role != CHANCE_ROLE:
            view.verdicts[(c.recipe, c.preset, c.row, c.column)] = (
                rule.baseline, verdict_words(c, silent.get((c.recipe, c.preset, c.column))))
            view.pairs[(c.recipe, c.preset, c.row)] = rule.baseline


def control_lines(comparisons: Sequence[Decision]) -> list[str]:
    """One line per control arm (recipe, preset, row): its outcome on each primary endpoint (secondary, forced and
    untested columns say nothing about the instrument), then what that shows. A positive control FAILS when it is
    decided better than the baseline anywhere, or worse nowhere; otherwise the line says on how many of the primary
    endpoints it showed its known gap (``sensitivity_lines`` says what that means for the verdicts). The negative
    control FAILS when any primary endpoint is decided a difference."""
    arms: dict[tuple[str, str, str, str], list[Decision]] = {}
    for c in comparisons:
        if c.role in (POSITIVE_CONTROL, NEGATIVE_CONTROL_ROLE):
            arms.setdefault((c.recipe, c.preset, c.row, c.role), []).append(c)
    lines = []
    for (recipe, preset, row, role), members in arms.items():
        tested = [c for c in members if c.decision in (DIFFERENCE, EQUIVALENT, UNDECIDED)]
        outcomes = ", ".join(f"{c.column} {_outcome(c)}" for c in tested) or "no primary endpoint tested"
        worse = [c.column for c in tested if c.is_worse]
        better = [c.column for c in tested if c.decision == DIFFERENCE and not c.is_worse]
        if role == POSITIVE_CONTROL:
            if better:
                verdict = f"FAILS: decided better than the baseline on {', '.join(better)}"
            elif worse:
                verdict = (f"shows its known gap on {len(worse)} of {len(tested)} primary endpoints "
                           f"({', '.join(worse)})")
            else:
                verdict = ("FAILS (so far): not decided worse on any primary endpoint; a design that cannot tell this "
                           "known gap cannot be read for the others")
        else:
            decided = worse + better
            verdict = (f"FAILS: decided a difference on {', '.join(decided)}, where the truth is none" if decided
                       else f"passes: no difference decided on any of {len(tested)} primary endpoints")
        lines.append(f"{role} {recipe} {preset} {row}: {outcomes}: {verdict}")
    return lines


def _shown_path(path: Path) -> str:
    """A decision's file as its board names it: relative to the working folder where it lies below it, so that a
    committed board names no one machine's folders (``-d NAME`` finds the results by an absolute path)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _seed_text(seeds: Sequence[int]) -> str:
    return ",".join(map(str, seeds)) or "none"


__all__ = ["ABOVE_CHANCE", "CHANCE_ROLE", "FORCED", "METHOD", "NEGATIVE_CONTROL_ROLE", "NO_CHECK", "NO_VERDICT",
           "POSITIVE_CONTROL", "SEES_POSITIVE_CONTROL", "SENSITIVITY_RULES", "EndpointCheck", "comparison_lines",
           "DecisionView", "NOT_AN_ENDPOINT", "decision_view", "swept_gaps", "verdict_words", "control_lines", "endpoint_checks", "no_verdicts", "sensitivity_lines", "NOT_TESTED", "SECONDARY", "forced_reason", "largest_family", "objective_epochs", "Decision", "DecisionRecord", "Rule", "compare_round", "decision_lines",
           "decision_reference", "read_decision", "require_enough_seeds", "verify_decision", "write_decision"]
