"""``antlm-bench check``: the CI regression gate.

Scores of a fresh run are compared with a baseline table, task by task and for the macro over the tasks both
sides share. A score is a *regression* when it dropped by more than its unit's tolerance (``Tolerances``:
percentage points for a percentage, nats for a margin, nats per token for a loss, where a rise is the drop:
``definition.METRICS``; one number in three units would wave a 30% rise in perplexity through) AND the
drop is statistically significant at ``alpha`` after Holm's correction over the stated family (``--family``:
each group's comparisons by default, or every comparison of the check):

- one instrument: both sides must be scored under one convention, on one evaluation set, and each task by one
  scoring method; anything else is refused (exit 2), naming both;
- the same networks on both sides (equal weights digests, seed for seed: a change after training): a
  same-seed test, paired by item (only the items vary). The same seed *number* is not enough, and neither is a
  ``--by`` key that merges two configurations;
- seeds on both sides: paired by seed where the seed labels match, Welch over seeds otherwise (paired by item
  within seeds);
- a one-seed side: tested only with a seed SD of its own configuration: ``--seed-sd``, or the baseline's own
  >= 3 seeds when both sides record the same configuration fingerprint; otherwise the seed variance is unknown
  and no drop is called significant;
- ``--rule tolerance``: the tolerance alone decides.

Nothing is passed that was not compared: a task, subtask or metric of the baseline that the results lack, fewer
items (a smaller ``--limit``), or a baseline group without results is a failure (exit 1) unless
``--allow-missing``. Exit status: 0 no regression, 1 a regression or something missing, 2 unusable input.
The method is written out in docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard import (
    FAMILIES,
    MACRO,
    BoardRow,
    Cell,
    Comparison,
    Leaderboard,
    LeaderboardDefinition,
    apply_holm,
    build_leaderboard,
    compare,
    design_text,
    macro_cell,
    read_results,
)
from antlm_bench.results.leaderboard.comparability import Incomparable, instrument_difference
from antlm_bench.results.leaderboard.definition import macro_label, metric_kind, separate_metric_columns
from antlm_bench.results.leaderboard.results import Results, results_reader
from antlm_bench.results.leaderboard.text import DESIGN_TEXT
from antlm_bench.results.stats import SeedSD
from antlm_bench.results.tables import eval_set_population

# check matches a run with its baseline by name; the configuration fingerprint then decides what may be borrowed
CHECK_GROUP_BY = ("recipe", "preset", "schedule")

RULES = ("auto", "tolerance")


@dataclass(frozen=True)
class Tolerances:
    """The largest change the gate ignores, in each metric's shown unit (``definition.METRICS``)."""

    points: float = 0.5  # a percentage: accuracy, F1, GLUE's score
    nats: float = 0.05  # a margin, log P(good) - log P(bad) per pair
    nats_per_token: float = 0.01  # a loss: 0.01 nats/token is a 1% change in perplexity

    OPTIONS: ClassVar[dict[str, str]] = {"points": "--tolerance", "nats": "--margin-tolerance",
                                         "nats_per_token": "--loss-tolerance"}

    def of(self, metric: str | None) -> float:
        unit = metric_kind(metric).unit
        by_unit = {"%": self.points, "nats": self.nats, "nats/token": self.nats_per_token}
        if unit not in by_unit:
            raise ValueError(f"metric {metric!r}: unit {unit!r} has no tolerance (add it to check.Tolerances)")
        return by_unit[unit]

    def text(self) -> str:
        return f"{self.points:g} pp, {self.nats:g} nats (margin), {self.nats_per_token:g} nats/token (loss)"

    def as_dict(self) -> dict[str, float]:
        return {"pp": self.points, "nats": self.nats, "nats/token": self.nats_per_token}


@dataclass
class CheckLine:
    group: str
    column: str
    baseline: Cell
    current: Cell
    comparison: Comparison
    test: str  # a design of stats.inference (same-seed, paired-seeds, welch, pooled, unknown) or "tolerance"
    status: str  # "regression", "drop, not significant", "drop, seed variance unknown", "improved", "ok"


@dataclass
class CheckReport:
    lines: list[CheckLine]
    tolerances: Tolerances
    alpha: float
    rule: str
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what the baseline has and the results lack
    allow_missing: bool = False
    family: str = "row"
    seed_sd: float | None = None

    @property
    def regressions(self) -> list[CheckLine]:
        return [line for line in self.lines if line.status == "regression"]

    @property
    def failed_missing(self) -> bool:
        return bool(self.missing) and not self.allow_missing

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions or self.failed_missing else 0


def _status(comparison: Comparison, tolerances: Tolerances, rule: str) -> tuple[str, str]:
    """(test, status). The tolerance is the metric's unit's (percentage points; nats for a margin, nats/token for
    a loss), and a change counts in the metric's direction: a loss that rises is a drop."""
    kind = metric_kind(comparison.metric)
    tolerance = tolerances.of(comparison.metric)
    change = kind.scale * comparison.delta * (-1 if kind.lower_is_better else 1)  # + is better, shown units
    if rule == "tolerance" or (comparison.significant is None and not comparison.design):
        # no interval on either side (rows without ci_low/ci_high, one seed): the tolerance alone can decide
        test, significant = "tolerance", True
    else:
        test, significant = comparison.design or "none", comparison.significant
    if change < -tolerance:
        if significant is None:
            return test, "drop, seed variance unknown" if comparison.design == "unknown" else "drop, not tested"
        return test, "regression" if significant else "drop, not significant"
    if change > tolerance and significant:
        return test, "improved"
    return test, "ok"


def _validate(tolerances: Tolerances, alpha: float, rule: str, seed_sd: float | None, family: str) -> None:
    for name, option in Tolerances.OPTIONS.items():
        value = getattr(tolerances, name)
        if not math.isfinite(value) or value < 0:
            raise UserError(f"{option} {value}: must be >= 0")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha}: must be between 0 and 1")
    if rule not in RULES:
        raise UserError(f"--rule {rule}: choose one of {', '.join(RULES)}")
    if seed_sd is not None and not 0 < seed_sd <= 100:  # NaN and inf fail too
        raise UserError(f"--seed-sd {seed_sd}: must be > 0 and at most 100 (percentage points)")
    if family not in FAMILIES:
        raise UserError(f"--family {family}: choose one of {', '.join(FAMILIES)}")


def _one_value(results: Results, tasks: set[str], column: str, default: str) -> set[str]:
    return {str(r.get(column) or default) for r in results.rows if r["task"] in tasks and r["value"] is not None}


def _one_instrument(current: Results, baseline: Results, tasks: set[str]) -> tuple[str, str]:
    """(evaluation set, convention) both sides share; UserError naming both when they do not."""
    from antlm_bench.conventions import DEFAULT_CONVENTION

    conventions = _one_value(current, tasks, "convention", DEFAULT_CONVENTION)
    base_conventions = _one_value(baseline, tasks, "convention", DEFAULT_CONVENTION)
    for option, found in (("--results", conventions), ("--baseline", base_conventions)):
        if len(found) > 1:
            raise UserError(f"{option} holds scores of {len(found)} conventions ({', '.join(sorted(found))}); "
                            "give the folders of one convention")
    if conventions and base_conventions and conventions != base_conventions:
        raise UserError(f"--results are scored under the {next(iter(conventions))} convention, --baseline under "
                        f"{next(iter(base_conventions))}: two conventions are never compared (a leading space alone "
                        f"moves BLiMP by about a point); re-score one side with --convention")
    # the full evaluation set where the results have it, else the fast one; the baseline must have that set
    sets = {eval_set_population(s) for s in _one_value(current, tasks, "eval_set", "full")}
    eval_set = "full" if "full" in sets or not sets else "fast"
    base_sets = {eval_set_population(s) for s in _one_value(baseline, tasks, "eval_set", "full")}
    if base_sets and eval_set not in base_sets:
        raise UserError(f"--results are scored on the {eval_set} evaluation set, --baseline on the "
                        f"{'/'.join(sorted(base_sets))} one: two evaluation sets are never compared; score both "
                        "sides the same way (with or without --fast)")
    return eval_set, next(iter(conventions or base_conventions or {DEFAULT_CONVENTION}))


def _boards(results: Sequence[str | Path], baseline: Sequence[str | Path],
            group_by: Sequence[str] | None) -> tuple[Leaderboard, Leaderboard]:
    reader = results_reader()  # a folder on both sides (a run checked against itself) is read once
    current_results = read_results(results, reader)
    baseline_results = read_results(baseline, reader)
    for option, side in (("--baseline", baseline_results), ("--results", current_results)):
        _all_finite(option, side)
    tasks = sorted({r["task"] for r in current_results.rows} | {r["task"] for r in baseline_results.rows})
    eval_set, convention = _one_instrument(current_results, baseline_results, set(tasks))
    rows = [*current_results.rows, *baseline_results.rows]
    tasks = [*tasks, *separate_metric_columns(rows, tasks)]  # each task's margin beside its accuracy
    definition = LeaderboardDefinition(name="check", tasks=tasks, macro_tasks=[],
                                       filters={"eval_set": [eval_set], "convention": [convention]},
                                       group_by=list(group_by or CHECK_GROUP_BY))
    return (build_leaderboard(current_results, definition, gaps=False, family="none"),
            build_leaderboard(baseline_results, definition, gaps=False, family="none"))


def _all_finite(option: str, side: Results) -> None:
    """A task-level value that is no finite number (a loss of +inf, a NaN accuracy) cannot be compared: the gate
    refuses it instead of leaving it out (an inf baseline loss would otherwise pass as "no regression")."""
    for row in side.rows:
        value = row["value"]
        if row["subtask"] == "" and value is not None and not math.isfinite(value):
            raise UserError(f"{option}: run {row['run_id']}, {row['task']} {row['metric']} is {value}, no finite "
                            "number; nothing can be compared with it: re-evaluate that run, or leave it out")


def _one_instrument_per_task(group: str, row: BoardRow, base_row: BoardRow, columns: Sequence[str]) -> None:
    """Each task scored by one method on both sides (``comparability``); UserError naming both otherwise.

    The gate refuses two scoring methods outright (a user's --scoring mistake); the other differences of instrument
    (tokens of a per-token loss, other items) reach the comparison, which shows them untested, and ``_missing_in``
    fails a smaller --limit."""
    for column in columns:
        different = instrument_difference(row.cells[column], base_row.cells[column])
        if different is not None and different.reason is Incomparable.SCORING:
            current, base = row.cells[column].scoring, base_row.cells[column].scoring
            raise UserError(f"{group}: {column} is scored by {current} in --results and by {base} in --baseline: "
                            "two scoring methods are never compared; score both sides with the same --scoring")


def _pairs(current: Leaderboard, base: Leaderboard, notes: list[str],
           missing: list[str]) -> list[tuple[BoardRow, BoardRow]]:
    """(results row, baseline row) for every group to check."""
    base_by_key = {row.key: row for row in base.rows}
    pairs = [(row, base_by_key[row.key]) for row in current.rows if row.key in base_by_key]
    if not pairs:
        if len(current.rows) == 1 and len(base.rows) == 1:
            notes.append(f"no group in common: comparing {_key(current, current.rows[0])} "
                         f"with baseline {_key(base, base.rows[0])} as different configurations")
            return [(current.rows[0], base.rows[0])]
        raise UserError(f"no ({', '.join(current.group_by)}) in common between the results "
                        f"({len(current.rows)} groups) and the baseline ({len(base.rows)} groups); "
                        "check --baseline or group with --by")
    current_keys = {row.key for row in current.rows}
    for row in current.rows:
        if row.key not in base_by_key:
            notes.append(f"{_key(current, row)}: not in the baseline, not checked")
    missing.extend(f"{_key(base, row)}: a baseline group with no results" for row in base.rows
                   if row.key not in current_keys)
    return pairs


def _missing_in(group: str, row: BoardRow, base_row: BoardRow) -> list[str]:
    """What the baseline row has that the results row lacks: tasks, subtasks, metrics, items."""
    out = []
    for column, base_cell in base_row.cells.items():
        cell = row.cells.get(column)
        if cell is None:
            out.append(f"{group}: task {column} is in the baseline but not in the results")
            continue
        lost = sorted(set(base_cell.subtasks) - set(cell.subtasks))
        if lost:
            shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
            out.append(f"{group}: {column} lacks {len(lost)} subtask(s) of the baseline ({shown})")
        metrics = sorted({f"{s}:{m}" for s, m in base_cell.subtasks.items()
                          if s in cell.subtasks and cell.subtasks[s] != m})
        if metrics:
            out.append(f"{group}: {column} reports other metrics than the baseline ({', '.join(metrics[:3])})")
        if cell.n < base_cell.n:
            out.append(f"{group}: {column} scored {cell.n} items, the baseline {base_cell.n} (a smaller --limit?)")
    return out


def run_check(
    results: Sequence[str | Path],
    baseline: Sequence[str | Path],
    tolerances: Tolerances = Tolerances(),
    alpha: float = 0.05,
    rule: str = "auto",
    group_by: Sequence[str] | None = None,
    seed_sd: float | None = None,
    family: str = "row",
    allow_missing: bool = False,
) -> CheckReport:
    """Compare ``results`` with ``baseline``; raises UserError for unusable input.

    ``seed_sd`` (percentage points) is the training-seed SD of a task score, for a one-seed side; ``family``
    the Holm family (``row``: each group's comparisons, ``board``: all of the check's, ``none``).
    """
    _validate(tolerances, alpha, rule, seed_sd, family)
    given = None if seed_sd is None else SeedSD(seed_sd / 100, math.inf, "given with --seed-sd")
    current, base = _boards(results, baseline, group_by)
    notes: list[str] = []
    missing: list[str] = []
    checked: list[tuple[str, BoardRow, BoardRow, list[Comparison]]] = []
    for row, base_row in _pairs(current, base, notes, missing):
        group = _key(current, row)
        missing.extend(_missing_in(group, row, base_row))
        columns = [c for c in current.columns if c in row.cells and c in base_row.cells]
        _one_instrument_per_task(group, row, base_row, columns)
        # the macro averages percentages only: never a margin or a loss
        macro_columns = [c for c in columns if ":" not in c and metric_kind(row.cells[c].metric).in_macro]
        if len(macro_columns) >= 2:
            row.macro, base_row.macro = macro_cell(row, macro_columns), macro_cell(base_row, macro_columns)
            notes.append(f"{group}: {macro_label(macro_columns)} = mean of {', '.join(macro_columns)} (the tasks "
                         "both sides scored; \"macro\" names the AntLM paper's four-task mean only)")
        else:
            row.macro = base_row.macro = None
        comparisons = compare(row, base_row, columns, macro_columns, alpha, given, family)
        checked.append((group, row, base_row, comparisons))
        notes.extend(_design_notes(group, row, base_row, comparisons, seed_sd))
    if family == "board":
        apply_holm([c for *_, comparisons in checked for c in comparisons], alpha)
    lines: list[CheckLine] = []
    for group, row, base_row, comparisons in checked:
        macro_name = macro_label([c for c in row.cells if c in base_row.cells and ":" not in c
                                  and metric_kind(row.cells[c].metric).in_macro])
        for comparison in comparisons:
            cur = row.macro if comparison.column == MACRO else row.cells[comparison.column]
            old = base_row.macro if comparison.column == MACRO else base_row.cells[comparison.column]
            test, status = _status(comparison, tolerances, rule)
            shown = macro_name if comparison.column == MACRO else comparison.column  # one meaning of "macro"
            lines.append(CheckLine(group, shown, old, cur, comparison, test, status))
    if not lines:
        raise UserError("no task in common between the results and the baseline "
                        f"(results: {', '.join(current.columns) or 'none'}; "
                        f"baseline: {', '.join(base.columns) or 'none'})")
    return CheckReport(lines, tolerances, alpha, rule, notes, missing, allow_missing, family, seed_sd)


def family_note(report: CheckReport) -> str:
    """The Holm family the report's p-values were adjusted over, in words (printed under every table)."""
    tested = sum(line.comparison.p_raw is not None for line in report.lines)
    if report.family == "none":
        return f"p-values not adjusted for multiplicity ({tested} tests; --family none)"
    if report.family == "board":
        return f"p-values Holm-adjusted over all {tested} tests of the check (--family board)"
    groups = len({line.group for line in report.lines})
    return (f"p-values Holm-adjusted over each group's tasks and macro (--family row; {groups} group(s), "
            f"{tested} tests in all)")


def detectable_notes(report: CheckReport) -> list[str]:
    """What the gate can see, from each line's minimum detectable effect (80% power at alpha): one line per group,
    e.g. "this gate detects drops >= 16.5 points on blimp, 31.8 on blimp_supplement, 14.3 on macro at alpha 0.05
    ...". A drop smaller than that passes unseen more often than not."""
    by_group: dict[str, list[str]] = {}
    for line in report.lines:
        c = line.comparison
        if c.mde is None:
            continue
        kind = metric_kind(c.metric)
        unit = "points" if kind.unit == "%" else kind.unit
        shown_mde = f"{kind.scale * c.mde:.1f}" if kind.unit == "%" else f"{kind.scale * c.mde:.3f}"
        parts = by_group.setdefault(line.group, [])
        parts.append(f"{shown_mde} {unit} on {line.column}" if not parts or unit != "points"
                     else f"{shown_mde} on {line.column}")
    several = len({line.group for line in report.lines}) > 1
    direction = "rises" if all(metric_kind(line.comparison.metric).lower_is_better for line in report.lines) else "drops"
    return [(f"{group}: " if several else "") + f"this gate detects {direction} >= {', '.join(parts)} at alpha "
            f"{report.alpha} (80% power); smaller ones pass unseen. Sharper with more seeds (a baseline of more seeds "
            "of the configuration, seeds on both sides), more items (a larger --limit), and items-only tests of the "
            "same networks (equal training fingerprints)" for group, parts in by_group.items()]


def _design_notes(group: str, row: BoardRow, base_row: BoardRow, comparisons: Sequence[Comparison],
                  seed_sd: float | None) -> list[str]:
    designs = sorted({c.design for c in comparisons if c.design})
    out = [f"{group}: test = {', '.join(design_text_of(d) for d in designs)}"] if designs else []
    if "unknown" in designs:
        if row.configuration is None or base_row.configuration is None:
            why = "the runs do not record one configuration fingerprint, so no seed SD can be borrowed"
        elif row.configuration != base_row.configuration:
            why = "the two sides are different configurations (fingerprints differ), so no seed SD can be borrowed"
        else:
            why = "the baseline has fewer than 3 seeds of the configuration"
        out.append(f"{group}: a one-seed side: seed variance unknown ({why}), so no drop can be called "
                   "significant; give --seed-sd (points) or a baseline with >= 3 seeds of the same configuration")
    elif "pooled" in designs:
        source = "--seed-sd" if seed_sd is not None else "the baseline's own seeds (same configuration fingerprint)"
        out.append(f"{group}: the one-seed side is tested with the seed SD from {source}")
    if any(line.mixed_configurations for line in (row, base_row)):
        out.append(f"{group}: runs of more than one configuration fingerprint are pooled on a side")
    return out


def design_text_of(design: str) -> str:
    """A design's name in the report's words (without the item pairing, which differs task by task)."""
    return DESIGN_TEXT.get(design, design)


def _key(board: Leaderboard, row: BoardRow) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(board.group_by, row.key) if v) or "(all runs)"


def shown(value: float | None, metric: str, sign: bool = False) -> str:
    """A check line's number in its metric's shown units: percentage points to 2 decimals, nats to 4."""
    if value is None:
        return "-"
    kind = metric_kind(metric)
    return f"{kind.scale * value:{'+' if sign else ''}.{2 if kind.unit == '%' else 4}f}"


def task_text(line: CheckLine) -> str:
    """The line's column, with its unit where it is not a percentage (``blimp.margin (nats)``)."""
    unit = metric_kind(line.comparison.metric).unit
    return line.column if unit == "%" else f"{line.column} ({unit})"


def report_markdown(report: CheckReport) -> str:
    """The delta table as Markdown, e.g. for ``$GITHUB_STEP_SUMMARY`` (user text HTML-escaped)."""
    import html

    def esc(text: str) -> str:
        return html.escape(text, quote=False).replace("|", "\\|")

    head = "REGRESSION" if report.regressions else ("MISSING" if report.failed_missing else "no regression")
    out = [f"### antlm-bench check: {head}", "",
           f"tolerance {report.tolerances.text()}, alpha {report.alpha}, rule "
           f"{report.rule}; {family_note(report)}", "",
           (f"| group | task | baseline | current | delta (pp) | {100 * (1 - report.alpha):g}% CI | p | MDE (pp) "
            "| test | items | status |"),
           "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for line in report.lines:
        c = line.comparison
        ci = f"[{shown(c.low, c.metric, True)}, {shown(c.high, c.metric, True)}]" if c.low is not None else "-"
        p = "-" if c.p_value is None else ("<0.001" if c.p_value < 0.001 else f"{c.p_value:.4f}")
        mde = shown(c.mde, c.metric)
        items = str(c.n_items) if c.paired else "-"
        status = f"**{line.status}**" if line.status == "regression" else line.status
        out.append(f"| {esc(line.group)} | {esc(task_text(line))} | {shown(line.baseline.value, c.metric)} | "
                   f"{shown(line.current.value, c.metric)} | {shown(c.delta, c.metric, True)} | {ci} | {p} | {mde} | "
                   f"{esc(design_text(c))} | {items} | {status} |")
    out += [""] + [f"- {esc(note)}" for note in detectable_notes(report)]
    out += [f"- missing: {esc(m)}" for m in report.missing]
    out += [f"- {esc(note)}" for note in report.notes]
    return "\n".join(out) + "\n"
