"""``sweep --until-decided``: after each round of seeds, every schedule against the baseline, paired by seed, on each
task and the macro, with the anytime-valid confidence sequence of ``antlm_bench.results.stats.sequential``.

The per-seed scores are the leaderboard's own (``build_leaderboard`` over the sweep's run folders: each run's final
checkpoint, one scoring method per column, the macro per seed), so the decision reads the numbers the board shows.
The family of comparisons (every schedule x every column, per recipe and preset) shares alpha by Bonferroni, so all
the intervals hold at once with probability >= 1 - alpha and "stop when all are decided" keeps that error rate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.definition import metric_kind
from antlm_bench.results.stats.sequential import (
    DIFFERENCE,
    EQUIVALENT,
    UNDECIDED,
    confidence_sequence,
    decide,
    prior_precision,
)
from antlm_bench.sweep.grid import Cell
from antlm_bench.sweep.record import DECISION_FILE, SCHEMA_VERSION, SWEEP_DIR, SweepFolder

NOT_TESTED = "not tested"  # scored by two methods (pll vs clm): different instruments, as the board says
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

    def alpha_each(self, comparisons: int) -> float:
        return self.alpha / max(1, comparisons)

    def prior_precision(self, comparisons: int) -> float:
        return prior_precision(self.max_seeds, self.alpha_each(comparisons))


@dataclass(frozen=True)
class Comparison:
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

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.recipe, self.preset, self.schedule, self.column

    def text(self) -> str:
        if self.decision == NOT_TESTED:
            interval = "no interval"
        elif not math.isfinite(self.low):
            interval = "interval unbounded (too few seeds yet)"
        else:
            interval = f"[{self.low:+.3g}, {self.high:+.3g}]"
        better = (self.mean < 0) if self.lower_is_better else (self.mean > 0)
        verdict = {DIFFERENCE: f"decided: {'better' if better else 'worse'} than the baseline",
                   EQUIVALENT: "decided: equivalent within the margin", UNDECIDED: "undecided",
                   NOT_TESTED: "not tested: different scoring methods, different instruments"}[self.decision]
        first = (f", first decided at {self.first_decided_at} seeds"
                 if self.first_decided_at is not None and self.decision in (DIFFERENCE, EQUIVALENT) else "")
        return (f"{self.schedule} - baseline on {self.column}: {self.mean:+.3g} {self.unit} {interval}, {verdict} "
                f"({len(self.seeds)} paired seeds{first}, {self.scoring})")


def _board(cells: Sequence[Cell], output: Path) -> Any:
    """The board ``antlm-bench leaderboard`` shows for these cells' run folders (its columns: each task and each
    task's margin; the macro where the four AntLM tasks are there)."""
    from antlm_bench.results.leaderboard import leaderboard_from_paths

    return leaderboard_from_paths(sorted({output / cell.name for cell in cells}), family="none")


def _seed_values(cell: Any, seeds: Sequence[int]) -> dict[int, float]:
    wanted = {str(seed): seed for seed in seeds}
    return {wanted[label]: value for label, value in zip(cell.seed_labels, cell.seed_values) if label in wanted}


def compare_round(cells: Sequence[Cell], output: Path, rule: Rule, seeds: Sequence[int]) -> list[Comparison]:
    """Every schedule against ``rule.baseline`` (same recipe and preset) on each column and the macro, over the
    seeds both sides finished."""
    board = _board(cells, output)
    rows = {row.key: row for row in board.rows}
    keys = sorted({(cell.recipe, cell.preset) for cell in cells})
    schedules = sorted({cell.schedule for cell in cells} - {rule.baseline})
    pairs = []
    for recipe, preset in keys:
        base = rows.get((recipe, preset, rule.baseline))
        for schedule in schedules:
            row = rows.get((recipe, preset, schedule))
            for column in [*board.columns, *(["macro"] if any(r.macro is not None for r in board.rows) else [])]:
                pairs.append((recipe, preset, schedule, column, row, base))
    cells_of = [(recipe, preset, schedule, column, _cell_of(row, column), _cell_of(base, column))
                for recipe, preset, schedule, column, row, base in pairs]
    # as on the board, two scoring methods (pll against clm) are different instruments: such a gap is not tested
    # and leaves the family
    testable = sum(_same_instrument(a, b) for *_, a, b in cells_of)
    c = rule.prior_precision(testable)
    alpha_each = rule.alpha_each(testable)
    out = []
    for recipe, preset, schedule, column, a, b in cells_of:
        mine = _seed_values(a, seeds) if a is not None else {}
        theirs = _seed_values(b, seeds) if b is not None else {}
        paired = sorted(set(mine) & set(theirs))
        kind = metric_kind((a or b).metric if (a or b) is not None else None)
        units = {"unit": "pp" if kind.unit == "%" else kind.unit, "lower_is_better": kind.lower_is_better}
        differences = [kind.scale * (mine[s] - theirs[s]) for s in paired]
        scoring = f"{a.scoring if a else '-'} vs {b.scoring if b else '-'}"
        mean = float(sum(differences) / len(differences)) if differences else math.nan
        if not _same_instrument(a, b):
            out.append(Comparison(recipe, preset, schedule, column, scoring, tuple(paired), mean, -math.inf,
                                  math.inf, NOT_TESTED, **units))
            continue
        interval = confidence_sequence(differences, alpha_each, c) if paired else None
        if interval is None:
            out.append(Comparison(recipe, preset, schedule, column, scoring, (), math.nan, -math.inf, math.inf,
                                  UNDECIDED, **units))
            continue
        # the equivalence margin is in points: it decides percentages only (a margin or a loss, in nats, is decided
        # by a difference alone)
        tolerance = rule.tolerance if units["unit"] == "pp" else None
        out.append(Comparison(recipe, preset, schedule, column, scoring, tuple(paired), interval.mean, interval.low,
                              interval.high, decide(interval, tolerance), **units))
    return out


def _cell_of(row: Any, column: str) -> Any:
    return None if row is None else (row.macro if column == "macro" else row.cells.get(column))


def _same_instrument(a: Any, b: Any) -> bool:
    """Both sides scored, by the same method (a cell that is missing yet may still come: it counts as testable)."""
    return a is None or b is None or a.scoring == b.scoring


def write_decision(folder: SweepFolder, rule: Rule, comparisons: Sequence[Comparison], seeds: Sequence[int],
                   rounds: Sequence[Sequence[int]], status: str) -> dict[str, Any]:
    """Store the rule, the seeds used and each comparison's decision in ``<output>/sweep/decision.json``
    (atomically); ``status``: decided, max seeds reached, or stopped (a failed or interrupted round)."""
    n = sum(c.decision != NOT_TESTED for c in comparisons)
    payload = {
        "schema_version": SCHEMA_VERSION, "status": status, "method": METHOD,
        "rule": {**asdict(rule), "comparisons": n, "alpha_each": rule.alpha_each(n),
                 "correction": f"Bonferroni over {n} tested comparison(s)",
                 "prior_precision": rule.prior_precision(max(1, n)),
                 "decided_when": "the interval excludes 0 (difference) or lies within +-tolerance (equivalent)"},
        "seeds": list(seeds), "rounds": [list(r) for r in rounds],
        "comparisons": [{**asdict(c), "seeds": list(c.seeds), "mean": None if math.isnan(c.mean) else c.mean,
                         "low": None if not math.isfinite(c.low) else c.low,
                         "high": None if not math.isfinite(c.high) else c.high} for c in comparisons],
    }
    folder.write_json(folder.decision_file, payload)
    return payload


def _decision_files(folders: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for folder in map(Path, folders):
        if folder.is_dir():
            found.extend(sorted(p for p in folder.rglob(DECISION_FILE) if p.parent.name == SWEEP_DIR and p.is_file()))
    return list(dict.fromkeys(found))


def decision_lines(folders: Sequence[Path]) -> list[str]:
    """What the leaderboard prints under the table for the sweeps that decided in ``folders`` or any folder below
    them (a study may hold one sweep per architecture; nothing where none did): per decision, the rule in one line,
    a reminder that the table assumed a fixed seed count, then one line per comparison."""
    return [line for path in _decision_files(folders) for line in _decision_file_lines(path)]


def decision_reference(folders: Sequence[Path], group_by: Sequence[str]) -> dict[str, str] | None:
    """The board row the sweeps that decided in ``folders`` compared every schedule with (their ``--baseline``),
    as a board reference, so that the board's gaps carry the sign of the decision lines under it: None unless the
    decisions name one baseline, one recipe and one preset, and the board groups by them."""
    baselines, recipes, presets = set(), set(), set()
    for path in _decision_files(folders):
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            baselines.add(payload["rule"]["baseline"])
            for row in payload["comparisons"]:
                recipes.add(row["recipe"])
                presets.add(row["preset"])
        except (OSError, ValueError, KeyError, TypeError):
            return None  # decision_lines names the damaged file
    if len(baselines) != 1 or len(recipes) != 1 or len(presets) != 1:
        return None
    wanted = {"recipe": recipes.pop(), "preset": presets.pop(), "schedule": baselines.pop()}
    return wanted if all(key in group_by for key in wanted) else None


def _decision_file_lines(path: Path) -> list[str]:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        rule, rows = payload["rule"], payload["comparisons"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"{path}: not a sweep decision file ({type(err).__name__}); run the sweep again") from None
    tolerance = rule.get("tolerance")
    lines = [f"sweep decision ({payload.get('status')}; seeds {_seed_text(payload.get('seeds', []))} of at most "
             f"{rule.get('max_seeds')}; baseline {rule.get('baseline')}; alpha {rule.get('alpha')}, "
             f"{rule.get('correction')}; equivalence margin "
             f"{'none' if tolerance is None else f'+-{tolerance:g} pp (percentages only)'}; {path})",
             "  the sweep chose how many seeds to run from the results, so decide by these anytime-valid intervals: "
             "a fixed-sample interval or p-value on the same seeds assumes their number was fixed in advance"]
    for row in rows:
        low = -math.inf if row.get("low") is None else row["low"]
        high = math.inf if row.get("high") is None else row["high"]
        comparison = Comparison(row["recipe"], row["preset"], row["schedule"], row["column"], row["scoring"],
                                tuple(row["seeds"]), row["mean"] if row["mean"] is not None else math.nan, low, high,
                                row["decision"], row.get("unit", "pp"), bool(row.get("lower_is_better", False)),
                                row.get("first_decided_at"))
        lines.append(f"  {row['recipe']} {row['preset']}: {comparison.text()}")
    return lines


def _seed_text(seeds: Sequence[int]) -> str:
    return ",".join(map(str, seeds)) or "none"


__all__ = ["METHOD", "NOT_TESTED", "Comparison", "Rule", "compare_round", "decision_lines", "decision_reference",
           "write_decision"]
