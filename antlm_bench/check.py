"""``antlm-bench check``: the CI regression gate.

Scores of a fresh run are compared with a baseline table, task by task and for the macro over the tasks both
sides share. A score is a *regression* when it dropped by more than ``tolerance`` percentage points AND the
drop is statistically significant at ``alpha``:

- item tables on both sides (``--log-samples``): paired bootstrap over the shared items (the same resampled
  items on both sides; seeds averaged per item first);
- no items, but 95% intervals on both rows: an unpaired test from the two intervals (normal approximation).
  Scores of two models on the same items are positively correlated, so this test is conservative: it flags
  fewer drops than the paired one would;
- no interval at all (or ``--rule tolerance``): the tolerance alone decides.

Exit status: 0 no regression, 1 at least one regression, 2 unusable input (missing files, schema mismatch,
nothing in common). The table of deltas is printed either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from antlm_bench.errors import UserError
from antlm_bench.leaderboard import (
    MACRO,
    BoardRow,
    Cell,
    Comparison,
    LeaderboardDefinition,
    build_leaderboard,
    compare,
    macro_cell,
    read_results,
)
from antlm_bench.stats import DEFAULT_RESAMPLES, DEFAULT_SEED

RULES = ("auto", "tolerance")


@dataclass
class CheckLine:
    group: str
    column: str
    baseline: Cell
    current: Cell
    comparison: Comparison
    test: str  # "paired", "unpaired", "tolerance"
    status: str  # "regression", "drop, not significant", "improved", "ok"


@dataclass
class CheckReport:
    lines: list[CheckLine]
    tolerance: float
    alpha: float
    rule: str
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[CheckLine]:
        return [line for line in self.lines if line.status == "regression"]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0


def _status(comparison: Comparison, tolerance: float, rule: str) -> tuple[str, str]:
    change = 100 * comparison.delta  # percentage points, current - baseline
    if rule == "tolerance" or comparison.significant is None:
        test = "tolerance"
        significant = True
    else:
        test = "paired" if comparison.paired else "unpaired"
        significant = comparison.significant
    if change < -tolerance:
        return test, "regression" if significant else "drop, not significant"
    if change > tolerance and significant:
        return test, "improved"
    return test, "ok"


def _tasks_in(rows: Sequence[dict]) -> list[str]:
    return sorted({r["task"] for r in rows})


def run_check(
    results: Sequence[str | Path],
    baseline: Sequence[str | Path],
    tolerance: float = 0.5,
    alpha: float = 0.05,
    rule: str = "auto",
    group_by: Sequence[str] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> CheckReport:
    """Compare ``results`` with ``baseline``; raises UserError for unusable input."""
    if tolerance < 0:
        raise UserError(f"--tolerance {tolerance}: must be >= 0 (percentage points)")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha}: must be between 0 and 1")
    if rule not in RULES:
        raise UserError(f"--rule {rule}: choose one of {', '.join(RULES)}")
    current_results = read_results(results)
    baseline_results = read_results(baseline)
    tasks = sorted(set(_tasks_in(current_results.rows)) | set(_tasks_in(baseline_results.rows)))
    definition = LeaderboardDefinition(name="check", tasks=tasks, macro_tasks=[])
    if group_by:
        definition.group_by = list(group_by)
    current = build_leaderboard(current_results, definition, gaps=False, resamples=resamples, seed=seed)
    base = build_leaderboard(baseline_results, definition, gaps=False, resamples=resamples, seed=seed)
    notes: list[str] = []

    base_by_key = {row.key: row for row in base.rows}
    pairs: list[tuple[BoardRow, BoardRow]] = [(row, base_by_key[row.key]) for row in current.rows
                                              if row.key in base_by_key]
    for row in current.rows:
        if pairs and row.key not in base_by_key:
            notes.append(f"{_key(current, row)}: not in the baseline, not checked")
    if not pairs:
        if len(current.rows) == 1 and len(base.rows) == 1:
            pairs = [(current.rows[0], base.rows[0])]
            notes.append(f"no group in common: comparing {_key(current, current.rows[0])} "
                         f"with baseline {_key(base, base.rows[0])}")
        else:
            raise UserError(f"no ({', '.join(current.group_by)}) in common between the results "
                            f"({len(current.rows)} groups) and the baseline ({len(base.rows)} groups); "
                            "check --baseline or group with --by")

    lines: list[CheckLine] = []
    for row, base_row in pairs:
        columns = [c for c in current.columns if c in row.cells and c in base_row.cells]
        if not columns:
            continue
        # macro over the tasks both sides scored (probe columns stay out, as on the leaderboard)
        macro_columns = [c for c in columns if ":" not in c]
        if len(macro_columns) >= 2:
            row.macro = macro_cell(row, macro_columns, resamples, seed)
            base_row.macro = macro_cell(base_row, macro_columns, resamples, seed)
        else:
            row.macro = base_row.macro = None
        for comparison in compare(row, base_row, columns, macro_columns, alpha, resamples, seed):
            cur = row.macro if comparison.column == MACRO else row.cells[comparison.column]
            old = base_row.macro if comparison.column == MACRO else base_row.cells[comparison.column]
            test, status = _status(comparison, tolerance, rule)
            lines.append(CheckLine(_key(current, row), comparison.column, old, cur, comparison, test, status))
        if row.macro is not None:
            notes.append(f"{_key(current, row)}: macro = mean of {', '.join(macro_columns)} (the tasks both sides "
                         "scored)")
        limits = {str(row.cells[c].n) for c in columns} != {str(base_row.cells[c].n) for c in columns}
        if limits:
            notes.append(f"{_key(current, row)}: item counts differ from the baseline (--limit?); "
                         "paired tests use the shared items only")
    if not lines:
        raise UserError("no task in common between the results and the baseline "
                        f"(results: {', '.join(current.columns) or 'none'}; "
                        f"baseline: {', '.join(base.columns) or 'none'})")
    return CheckReport(lines, tolerance, alpha, rule, notes)


def _key(board, row: BoardRow) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(board.group_by, row.key) if v) or "(all runs)"


def report_markdown(report: CheckReport) -> str:
    """The delta table as Markdown, e.g. for ``$GITHUB_STEP_SUMMARY``."""
    head = "REGRESSION" if report.regressions else "no regression"
    out = [f"### antlm-bench check: {head}", "",
           f"tolerance {report.tolerance} pp, alpha {report.alpha}, rule {report.rule}", "",
           (f"| group | task | baseline | current | delta (pp) | {100 * (1 - report.alpha):g}% CI | p | test "
            "| items | status |"),
           "|---|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for line in report.lines:
        c = line.comparison
        ci = f"[{100 * c.low:+.2f}, {100 * c.high:+.2f}]" if c.low is not None else "-"
        p = f"{c.p_value:.4f}" if c.p_value is not None else "-"
        items = str(c.n_items) if c.paired else "-"
        status = f"**{line.status}**" if line.status == "regression" else line.status
        out.append(f"| {line.group} | {line.column} | {100 * line.baseline.value:.2f} | "
                   f"{100 * line.current.value:.2f} | {100 * c.delta:+.2f} | {ci} | {p} | {line.test} | {items} | {status} |")
    out += [""] + [f"- {note}" for note in report.notes]
    return "\n".join(out) + "\n"
