"""Which of a sweep's comparisons its board cannot test, said before the sweep starts.

A minimal-pair score is measured by a scoring method (clm or pll, ...): the board and ``--until-decided`` never
test a gap between two methods (different instruments). Under ``--final-scoring auto`` each cell's final
evaluation takes its last phase's method, so a schedule ending in MLM (pll) and one ending in CLM (clm) are
measured by different instruments on every minimal-pair task; ``--final-scoring clm`` (or ``pll``) scores every
cell alike. This module finds those pairs from the grid alone, before anything is trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import TYPE_CHECKING

from antlm_bench.pipeline.evaluations import final_method

if TYPE_CHECKING:
    from antlm_bench.config import RunConfig
    from antlm_bench.sweep.grid import GridCell


def untestable_comparisons(schedules: Sequence[str], final_scoring: str, scored_tasks: Sequence[str],
                           baseline: str | None = None) -> list[str]:
    """One line per pair of schedules whose minimal-pair gaps the board will not test (each against ``baseline``
    when given, else every pair); none when every cell is scored by one method or no task scores minimal pairs."""
    if not scored_tasks:
        return []
    methods = {schedule: final_method(schedule, final_scoring) for schedule in schedules}
    if len(set(methods.values())) < 2:
        return []
    pairs = ([(s, baseline) for s in schedules if s != baseline] if baseline is not None
             else list(combinations(schedules, 2)))
    tasks = ", ".join(scored_tasks)
    lines = []
    for a, b in pairs:
        if methods[a] != methods[b]:
            lines.append(f"cannot test {a} against {b} on {tasks}: scored by {methods[a]} vs {methods[b]} "
                         "(--final-scoring auto: each by its last phase), different instruments; "
                         "--final-scoring clm (or pll) scores every cell alike")
    return lines


def untestable_in_cells(cells: Sequence[GridCell], config: RunConfig, baseline: str | None = None) -> list[str]:
    """:func:`untestable_comparisons` of a sweep's cells, whose tasks and final scoring are ``config``'s (every cell
    shares them; only the grid's axes differ)."""
    from antlm_bench.tasks import resolve_tasks

    scored = [r.name for r in resolve_tasks(config.evaluation.tasks) if r.adapter().needs_scoring_model]
    schedules = list(dict.fromkeys(cell.schedule for cell in cells))
    return untestable_comparisons(schedules, config.evaluation.final_scoring, scored, baseline)


__all__ = ["untestable_comparisons", "untestable_in_cells"]
