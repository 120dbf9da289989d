"""A sweep from start to end: the grid's cells (finished ones reused without a process), the executor, and with
``--until-decided`` the rounds of seeds until every comparison with the baseline is decided."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.results import results_reader
from antlm_bench.results.stats.sequential import DIFFERENCE, EQUIVALENT, UNDECIDED
from antlm_bench.results.store import StoreReader
from antlm_bench.sweep.decision_file import write_decision
from antlm_bench.sweep.decision_text import comparison_lines, control_lines, sensitivity_lines
from antlm_bench.sweep.executors import Executor
from antlm_bench.sweep.grid import Grid, GridCell, next_seeds
from antlm_bench.sweep.progress import Progress
from antlm_bench.sweep.record import FAILED, FINISHED, REUSED, SweepFolder, SweepRecord
from antlm_bench.sweep.rule import (
    FORCED,
    NOT_TESTED,
    SECONDARY,
    Decision,
    Rule,
    compare_round,
    endpoint_checks,
    no_verdicts,
)

# the cells that still have training or an evaluation to do (``plan.pending_check``: ``pipeline.pending_seeds``)
PendingCheck = Callable[[Sequence[GridCell]], list[GridCell]]


@dataclass
class SweepPlan:
    grid: Grid
    seeds: list[int]  # every seed (plain sweep), or the first round's (--until-decided)
    default_schedule: dict[str, str]  # recipe -> its default schedule (when --schedule is not given)
    output: Path
    rule: Rule | None = None  # --until-decided


@dataclass
class SweepOutcome:
    failed: list[GridCell]
    comparisons: list[Decision] = field(default_factory=list)
    status: str = "done"  # plain sweeps: done; --until-decided: decided, max seeds reached, stopped


def run_round(cells: Sequence[GridCell], record: SweepRecord, executor: Executor, progress: Progress,
              pending: PendingCheck, ahead: Sequence[GridCell] = ()) -> list[GridCell]:
    """Run what is left of ``cells``; the failed cells. ``ahead``: the next round's cells, which the executor may
    start on workers this round leaves idle (those already finished are left out here)."""
    record.add(list(cells))
    todo = pending(cells)
    for cell in cells:
        if cell not in todo and record.states[cell.name].status not in FINISHED:  # done in an earlier round: done
            record.set(cell, REUSED, returncode=None)
    progress.show(force=True)
    executor.run(todo, record, progress, pending(ahead) if ahead else [])
    progress.finish()
    return [cell for cell in cells if record.states[cell.name].status == FAILED]


def run_sweep(plan: SweepPlan, executor: Executor, record: SweepRecord, progress: Progress,
              pending: PendingCheck, say: Callable[[str], None]) -> SweepOutcome:
    """The plain grid, or rounds of seeds until decided (``plan.rule``); whatever the executor started ahead and
    no round took is stopped at the end (``Executor.session``)."""
    with executor.session(record):
        return _rounds(plan, executor, record, progress, pending, say)


def _rounds(plan: SweepPlan, executor: Executor, record: SweepRecord, progress: Progress,
            pending: PendingCheck, say: Callable[[str], None]) -> SweepOutcome:
    if plan.rule is None:
        record.rounds.append(list(plan.seeds))
        failed = run_round(plan.grid.cells(plan.seeds, plan.default_schedule), record, executor, progress, pending)
        return SweepOutcome(failed)
    rule = plan.rule
    if len(plan.seeds) > rule.max_seeds:
        raise UserError(f"--seeds: {len(plan.seeds)} seeds in the first round, more than --max-seeds {rule.max_seeds}")
    folder = record.folder
    seeds = list(plan.seeds)
    record.rounds.append(list(seeds))
    first_decided: dict[tuple[str, str, str, str], int] = {}
    while True:
        cells = plan.grid.cells(seeds, plan.default_schedule)
        # the next round's cells, for workers this round leaves idle: it runs only if this look adds it
        ahead = plan.grid.cells(next_seeds(seeds, rule.round_seeds, rule.max_seeds), plan.default_schedule) \
            if len(seeds) < rule.max_seeds else []
        failed = run_round(cells, record, executor, progress, pending, ahead)
        if failed:
            _store(folder, rule, [], seeds, record, "stopped: a cell failed", cells)
            return SweepOutcome(failed, [], "stopped: a cell failed")
        reader = results_reader()  # this look's reads: the comparisons and the digests the decision records share them
        comparisons = compare_round(cells, plan.output, rule, seeds, reader)
        for c in comparisons:
            if c.decision in (DIFFERENCE, EQUIVALENT):
                first_decided.setdefault(c.key, len(seeds))
        comparisons = [replace(c, first_decided_at=first_decided.get(c.key)) for c in comparisons]
        # controls check the instrument: they never keep the sweep running (control_lines says how they stand)
        studied = [c for c in comparisons if not c.role]
        # a comparison on an endpoint that has not (yet) shown it can see a gap is not settled, whatever its
        # interval reads: more seeds may qualify the endpoint (its positive control decided), so the sweep goes on
        # (sensitivity_lines says which endpoints and why; their comparisons are shown without a verdict)
        checks = endpoint_checks(comparisons, rule)
        silent = no_verdicts(checks)
        undecided = [c for c in studied if c.decision == UNDECIDED
                     or (c.decision in (DIFFERENCE, EQUIVALENT) and (c.recipe, c.preset, c.column) in silent)]
        for line in [*comparison_lines(comparisons, checks), *control_lines(comparisons),
                     *sensitivity_lines(checks, after=False)]:
            say(line)
        if all(c.decision == NOT_TESTED for c in studied):
            status = "nothing to decide: every comparison is scored by two methods"
        elif all(c.decision in (NOT_TESTED, FORCED, SECONDARY) for c in studied):
            status = ("nothing to decide: no comparison is in the family (scored by two methods, forced by the "
                      "objectives, or a secondary endpoint)")
        elif not undecided:
            status = "decided"
        elif len(seeds) >= rule.max_seeds:
            status = "max seeds reached"
        else:
            added = next_seeds(seeds, rule.round_seeds, rule.max_seeds)
            # of the family only: secondary, forced and untested comparisons get no verdict, so never "undecided"
            family = [c for c in studied if c.decision not in (NOT_TESTED, FORCED, SECONDARY)]
            blind = sum(c.decision != UNDECIDED for c in undecided)
            say(f"{len(undecided)} of the family's {len(family)} comparison(s) undecided"
                + (f" ({blind} of them decided by the interval alone, on an endpoint that has not shown it "
                   "can see a gap)" if blind else "")
                + f" after {len(seeds)} seeds: "
                f"adding seeds {','.join(map(str, added))}")
            _store(folder, rule, comparisons, seeds, record, "running", cells, reader)
            seeds += added
            record.rounds.append(added)
            continue
        _store(folder, rule, comparisons, seeds, record, status, cells, reader)
        return SweepOutcome([], comparisons, status)


def _store(folder: SweepFolder, rule: Rule, comparisons: list[Decision], seeds: list[int], record: SweepRecord,
           status: str, cells: list[GridCell], reader: StoreReader | None = None) -> None:
    write_decision(folder, rule, comparisons, seeds, record.rounds, status, cells, reader)
    record.save()


__all__ = ["PendingCheck", "SweepOutcome", "SweepPlan", "run_round", "run_sweep"]
