"""``antlm-bench check``: the CI regression gate.

Scores of a fresh run are compared with a baseline table, task by task and for the macro over the tasks both
sides share. A score is a *regression* when it dropped by more than ``tolerance`` percentage points AND the
drop is statistically significant at ``alpha`` after Holm's correction over the group's comparisons:

- the same configuration and the same seeds on both sides (a code change under deterministic training): a
  same-seed test, paired by item (only the items vary);
- seeds on both sides that are not the same: seed-aware (paired by seed where the seeds match, Welch over seeds
  otherwise, paired by item within seeds), the seed SD pooled from a side with >= 2 seeds when the other has one;
- one seed a side with different seeds: the seed variance is unknown; nothing is called significant unless
  ``--seed-sd`` gives it;
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

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard import (
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

RULES = ("auto", "tolerance")


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
    tolerance: float
    alpha: float
    rule: str
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what the baseline has and the results lack
    allow_missing: bool = False
    holm: bool = True
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


def _status(comparison: Comparison, tolerance: float, rule: str) -> tuple[str, str]:
    change = 100 * comparison.delta  # percentage points, current - baseline
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


def _validate(tolerance: float, alpha: float, rule: str, seed_sd: float | None) -> None:
    if not math.isfinite(tolerance) or tolerance < 0:
        raise UserError(f"--tolerance {tolerance}: must be >= 0 (percentage points)")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha}: must be between 0 and 1")
    if rule not in RULES:
        raise UserError(f"--rule {rule}: choose one of {', '.join(RULES)}")
    if seed_sd is not None and (not math.isfinite(seed_sd) or seed_sd <= 0):
        raise UserError(f"--seed-sd {seed_sd}: must be > 0 (percentage points)")


def _boards(results: Sequence[str | Path], baseline: Sequence[str | Path],
            group_by: Sequence[str] | None) -> tuple[Leaderboard, Leaderboard]:
    current_results = read_results(results)
    baseline_results = read_results(baseline)
    tasks = sorted({r["task"] for r in current_results.rows} | {r["task"] for r in baseline_results.rows})
    # one evaluation set on both sides: the full one where the results have it, else the fast one; a baseline
    # without rows of that set is then missing them (a failure), never compared across sets
    sets = {r.get("eval_set") or "full" for r in current_results.rows}
    eval_set = "full" if "full" in sets or not sets else "fast"
    definition = LeaderboardDefinition(name="check", tasks=tasks, macro_tasks=[], filters={"eval_set": [eval_set]})
    if group_by:
        definition.group_by = list(group_by)
    return (build_leaderboard(current_results, definition, gaps=False),
            build_leaderboard(baseline_results, definition, gaps=False))


def _pairs(current: Leaderboard, base: Leaderboard, notes: list[str],
           missing: list[str]) -> list[tuple[BoardRow, BoardRow, bool]]:
    """(results row, baseline row, same configuration?) for every group to check."""
    base_by_key = {row.key: row for row in base.rows}
    pairs = [(row, base_by_key[row.key], True) for row in current.rows if row.key in base_by_key]
    if not pairs:
        if len(current.rows) == 1 and len(base.rows) == 1:
            notes.append(f"no group in common: comparing {_key(current, current.rows[0])} "
                         f"with baseline {_key(base, base.rows[0])} as different configurations")
            return [(current.rows[0], base.rows[0], False)]
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
    tolerance: float = 0.5,
    alpha: float = 0.05,
    rule: str = "auto",
    group_by: Sequence[str] | None = None,
    seed_sd: float | None = None,
    holm: bool = True,
    allow_missing: bool = False,
) -> CheckReport:
    """Compare ``results`` with ``baseline``; raises UserError for unusable input.

    ``seed_sd`` (percentage points) is the training-seed SD of a task score, for one-seed-a-side comparisons.
    """
    _validate(tolerance, alpha, rule, seed_sd)
    sd = None if seed_sd is None else seed_sd / 100
    current, base = _boards(results, baseline, group_by)
    notes: list[str] = []
    missing: list[str] = []
    lines: list[CheckLine] = []
    for row, base_row, same_configuration in _pairs(current, base, notes, missing):
        group = _key(current, row)
        missing.extend(_missing_in(group, row, base_row))
        columns = [c for c in current.columns if c in row.cells and c in base_row.cells]
        macro_columns = [c for c in columns if ":" not in c]
        if len(macro_columns) >= 2:
            row.macro, base_row.macro = macro_cell(row, macro_columns), macro_cell(base_row, macro_columns)
            notes.append(f"{group}: macro = mean of {', '.join(macro_columns)} (the tasks both sides scored)")
        else:
            row.macro = base_row.macro = None
        comparisons = compare(row, base_row, columns, macro_columns, alpha, same_configuration, sd)
        if holm:
            apply_holm(comparisons, alpha)
        for comparison in comparisons:
            cur = row.macro if comparison.column == MACRO else row.cells[comparison.column]
            old = base_row.macro if comparison.column == MACRO else base_row.cells[comparison.column]
            test, status = _status(comparison, tolerance, rule)
            lines.append(CheckLine(group, comparison.column, old, cur, comparison, test, status))
        notes.extend(_design_notes(group, comparisons, seed_sd))
    if not lines:
        raise UserError("no task in common between the results and the baseline "
                        f"(results: {', '.join(current.columns) or 'none'}; "
                        f"baseline: {', '.join(base.columns) or 'none'})")
    return CheckReport(lines, tolerance, alpha, rule, notes, missing, allow_missing, holm, seed_sd)


def _design_notes(group: str, comparisons: Sequence[Comparison], seed_sd: float | None) -> list[str]:
    designs = sorted({c.design for c in comparisons if c.design})
    out = [f"{group}: test = {', '.join(design_text_of(d) for d in designs)}"] if designs else []
    if "unknown" in designs:
        out.append(f"{group}: one seed a side with different seeds: seed variance unknown, so no drop can be called "
                   "significant; give --seed-sd (points) or a baseline with >= 2 seeds")
    elif "pooled" in designs and seed_sd is not None:
        out.append(f"{group}: seed SD {seed_sd} pp from --seed-sd")
    return out


def design_text_of(design: str) -> str:
    return design_text(Comparison((), (), "", 0.0, None, None, None, False, 0, None, design=design))


def _key(board: Leaderboard, row: BoardRow) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(board.group_by, row.key) if v) or "(all runs)"


def report_markdown(report: CheckReport) -> str:
    """The delta table as Markdown, e.g. for ``$GITHUB_STEP_SUMMARY`` (user text HTML-escaped)."""
    import html

    def esc(text: str) -> str:
        return html.escape(text, quote=False).replace("|", "\\|")

    head = "REGRESSION" if report.regressions else ("MISSING" if report.failed_missing else "no regression")
    correction = "Holm-adjusted" if report.holm else "not adjusted"
    out = [f"### antlm-bench check: {head}", "",
           f"tolerance {report.tolerance} pp, alpha {report.alpha} (p {correction}), rule {report.rule}", "",
           (f"| group | task | baseline | current | delta (pp) | {100 * (1 - report.alpha):g}% CI | p | MDE (pp) "
            "| test | items | status |"),
           "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for line in report.lines:
        c = line.comparison
        ci = f"[{100 * c.low:+.2f}, {100 * c.high:+.2f}]" if c.low is not None else "-"
        p = "-" if c.p_value is None else ("<0.001" if c.p_value < 0.001 else f"{c.p_value:.4f}")
        mde = "-" if c.mde is None else f"{100 * c.mde:.2f}"
        items = str(c.n_items) if c.paired else "-"
        status = f"**{line.status}**" if line.status == "regression" else line.status
        out.append(f"| {esc(line.group)} | {esc(line.column)} | {100 * line.baseline.value:.2f} | "
                   f"{100 * line.current.value:.2f} | {100 * c.delta:+.2f} | {ci} | {p} | {mde} | "
                   f"{esc(design_text(c))} | {items} | {status} |")
    out += [""] + [f"- missing: {esc(m)}" for m in report.missing]
    out += [f"- {esc(note)}" for note in report.notes]
    return "\n".join(out) + "\n"
