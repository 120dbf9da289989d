"""A ``sweep --until-decided`` decision in words: each comparison in one line, the controls' outcome, the endpoints'
sensitivity (printed by the sweep at each look, ``loop.run_sweep``), and the lines the leaderboard prints under a
board whose results a sweep decided on (:func:`decision_view`: read from ``decision_file`` and verified against the
tables first), with the sweep's verdict of each gap it compared (:func:`swept_gaps`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.results import results_reader
from antlm_bench.results.stats.sequential import DIFFERENCE, EQUIVALENT, UNDECIDED
from antlm_bench.results.store import StoreReader
from antlm_bench.sweep.decision_file import decision_files, read_decision, verify_decision
from antlm_bench.sweep.rule import (
    CHANCE_ROLE,
    FORCED,
    NEGATIVE_CONTROL_ROLE,
    NOT_TESTED,
    POSITIVE_CONTROL,
    SECONDARY,
    Decision,
    EndpointCheck,
    endpoint_checks,
    no_verdicts,
    outcome_words,
)

NO_VERDICT = "no verdict: this endpoint does not separate these models"


def comparison_text(c: Decision, no_verdict: str | None = None) -> str:
    """The comparison in one line; ``no_verdict``: why its endpoint may not speak (``endpoint_checks``), which
    replaces the interval's reading (the interval stays, descriptive)."""
    if c.role == CHANCE_ROLE:
        return _chance_text(c)
    if c.decision == NOT_TESTED:
        interval = "no interval"
    elif not math.isfinite(c.low):
        interval = "interval unbounded (too few seeds yet)"
    else:
        interval = f"[{c.low:+.3g}, {c.high:+.3g}]"
    verdict = {DIFFERENCE: f"decided: {'better' if c.is_better else 'worse'} than the baseline",
               EQUIVALENT: "decided: equivalent within the margin", UNDECIDED: "undecided",
               NOT_TESTED: "not tested: different instruments (scoring method, tokens or items)",
               SECONDARY: "secondary endpoint: interval at the family's per-comparison alpha, no verdict",
               FORCED: "forced by the objectives (one side trains this loss longer): out of the family, no verdict"
               }[c.decision]
    if no_verdict is not None and c.decision in (DIFFERENCE, EQUIVALENT, UNDECIDED):
        verdict = f"{NO_VERDICT} ({no_verdict}; the interval alone: {verdict.removeprefix('decided: ')})"
    first = (f", first decided at {c.first_decided_at} seeds"
             if c.first_decided_at is not None and c.decision in (DIFFERENCE, EQUIVALENT) else "")
    role = f"{c.role}, no share of alpha; " if c.role else ""
    return (f"{c.row} - baseline on {c.column}: {c.mean:+.3g} {c.unit} {interval}, {verdict} "
            f"({role}{len(c.seeds)} paired seeds{first}, {c.scoring})")


def _chance_text(c: Decision) -> str:
    interval = ("interval unbounded (too few seeds yet)" if not math.isfinite(c.low)
                else f"[{c.low:+.3g}, {c.high:+.3g}]")
    reading = "above chance" if c.is_better else "not shown above chance"
    return (f"baseline {c.schedule} - chance on {c.column}: {c.mean:+.3g} {c.unit} {interval}, "
            f"{reading} (sensitivity check of the above-chance rule, no share of alpha; {len(c.seeds)} seeds)")


def comparison_lines(comparisons: Sequence[Decision], checks: Sequence[EndpointCheck]) -> list[str]:
    """One line per comparison, each withheld where its endpoint may not speak."""
    silent = no_verdicts(checks)
    return [f"{c.recipe} {c.preset}: {comparison_text(c, silent.get((c.recipe, c.preset, c.column)))}"
            for c in comparisons]


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
    for path in decision_files(folders):
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
        return f"decided {'better' if c.is_better else 'worse'}"
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
    for path in decision_files(folders):
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
        outcomes = ", ".join(f"{c.column} {outcome_words(c)}" for c in tested) or "no primary endpoint tested"
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


__all__ = ["NOT_AN_ENDPOINT", "NO_VERDICT", "DecisionView", "comparison_lines", "comparison_text", "control_lines",
           "decision_lines", "decision_reference", "decision_view", "sensitivity_lines", "swept_gaps",
           "verdict_words"]
