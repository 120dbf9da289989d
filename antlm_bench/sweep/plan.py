"""From a sweep's settings to a sweep ready to run, decided before anything is trained: the grid resolved (canonical
schedules, presets decided, the run options every cell takes validated once as a typed ``RunConfig``),
``--until-decided``'s rule and the fewest seeds it needs, the executor, and the check that skips finished cells
(``pipeline.pending_seeds``).

Each cell is an ``antlm-bench run``: a sweep file's ``run:`` options (and ``--run-option``) are named by ``run``'s
flags and set on the cells' configuration through ``antlm_bench.config.flag_paths``, so a value ``run`` would refuse
is refused here, before the first cell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from antlm_bench.config import RunConfig, field_at, flag_paths, run_config
from antlm_bench.errors import UserError
from antlm_bench.locking import folder_lock
from antlm_bench.pipeline import default_preset, glue_options, pending_seeds
from antlm_bench.recipes import load_recipe
from antlm_bench.sweep.executors import Executor, SweepInterrupted, choose_executor
from antlm_bench.sweep.grid import GRID_FLAGS, NEGATIVE_CONTROL, Grid, GridCell, canonical_schedules
from antlm_bench.sweep.instruments import untestable_in_cells
from antlm_bench.sweep.loop import PendingCheck, SweepOutcome, SweepPlan, run_sweep
from antlm_bench.sweep.progress import Progress
from antlm_bench.sweep.record import SweepFolder, SweepRecord
from antlm_bench.sweep.rule import (
    ABOVE_CHANCE,
    SEES_POSITIVE_CONTROL,
    Rule,
    largest_family,
    require_enough_seeds,
)
from antlm_bench.sweep.settings import SweepSettings
from antlm_bench.tasks import resolve_tasks


def cells_base(options: Mapping[str, Any]) -> RunConfig:
    """The configuration every cell shares: ``options`` (a sweep file's ``run:``, ``--run-option``, the sweep's own
    --tasks ...: ``{"max-words": 20000, "probe": true}``, by ``run``'s flag names) over ``run``'s defaults. A name
    ``run`` lacks, an axis of the grid, or a value ``run`` would refuse is one line naming it."""
    paths = flag_paths()
    flags: dict[str, Any] = {}
    for raw_name, value in options.items():
        flag = "--" + str(raw_name).lstrip("-").replace("_", "-")
        if flag in GRID_FLAGS:
            raise UserError(f"run option {raw_name}: set by the sweep's grid; use the sweep's own {flag} (or its key "
                            "in the file)")
        if flag not in paths:
            known = ", ".join(sorted(f[2:] for f in paths if f not in GRID_FLAGS))
            raise UserError(f"run option {raw_name}: `antlm-bench run` has no such option (it has {known})")
        if field_at(paths[flag]).annotation is bool and not isinstance(value, bool):
            raise UserError(f"run option {raw_name}: a switch; give true or false (got {value!r})")
        flags[flag] = value
    try:
        return run_config(flags=flags)
    except UserError as err:
        raise UserError(f"run option {err}") from None


def pending_check(output: Path) -> PendingCheck:
    """The cells ``run`` would still train or evaluate (``pipeline.pending_seeds``), one check per configuration."""

    def pending(cells: Sequence[GridCell]) -> list[GridCell]:
        groups: dict[tuple[str, str, str, str | None], list[GridCell]] = {}
        for cell in cells:
            groups.setdefault((cell.recipe, cell.preset, cell.schedule, cell.label), []).append(cell)
        todo: set[str] = set()
        for group in groups.values():
            left = set(pending_seeds(group[0].config(output, [c.seed for c in group])))
            todo.update(c.name for c in group if c.seed in left)
        return [cell for cell in cells if cell.name in todo]

    return pending


def plan_sweep(settings: SweepSettings) -> tuple[SweepPlan, RunConfig]:
    """The resolved grid (canonical schedules, presets decided, run options validated) and the first cell's
    RunConfig (its tasks, device, threads and final scoring are every cell's). ``settings.output`` is the command
    layer's to check (as ``--output`` is)."""
    recipes = [load_recipe(name) for name in settings.models]
    if len({r.name for r in recipes}) != len(recipes):
        raise UserError(f"--model {','.join(settings.models)}: a recipe named twice")
    presets = settings.presets or [default_preset()[0]]
    for recipe in recipes:
        for preset in presets:
            recipe.resolve(preset)  # an unknown preset: one line now, not a failed cell later
    schedules = canonical_schedules(settings.schedules) if settings.schedules else None
    default_schedule = {r.name: canonical_schedules([r.default_schedule])[0] for r in recipes}
    controls, labelled = _controls(settings, schedules)
    if controls:  # a positive control not in the grid yet joins it
        schedules = (*(schedules or ()), *(s for s in controls if s not in (schedules or ())))
    output = settings.output.expanduser()
    grid = Grid(tuple(r.name for r in recipes), tuple(presets), schedules, cells_base(settings.run), labelled)
    config = grid.cells(settings.seeds[:1], default_schedule)[0].config(output)
    glue_options(config)  # a bad GLUE option: one line now, as `run` says it, not a failed cell later
    tasks = resolve_tasks(config.evaluation.tasks)  # an unknown task: one line now, not a failed cell later
    rule = None
    if settings.until_decided is not None:
        u = settings.until_decided
        baseline = canonical_schedules([u.baseline])[0]
        all_schedules = set(schedules or default_schedule.values())
        if baseline not in all_schedules:
            raise UserError(f"--baseline {u.baseline}: not among the sweep's schedules "
                            f"({', '.join(sorted(all_schedules))})")
        if len(all_schedules) < 2:
            raise UserError("--until-decided compares schedules with the baseline: give at least two schedules")
        columns = [c for r in tasks for c in (r.name, f"{r.name}.margin")] + ["macro"]
        for option, named in (("--primary", u.primary), ("--margin", list(u.margins))):
            unknown = [c for c in named if c not in columns]
            if unknown:
                raise UserError(f"{option} {unknown[0]}: not a column this sweep's board can show; its columns: "
                                f"{', '.join(columns)} (a task's margin only where the task has one)")
        rule = Rule(baseline, u.alpha, u.tolerance, u.max_seeds, u.round_seeds, tuple(dict.fromkeys(u.primary)),
                    tuple(u.margins.items()), forced_out=True, positive_controls=controls,
                    negative_control=u.negative_control, sensitivity=tuple(u.sensitivity.items()))
        _check_sensitivity(rule, tasks, columns)
        require_enough_seeds(rule, len(grid.recipes), len(presets), len(all_schedules - set(controls)), len(tasks))
    return SweepPlan(grid, list(settings.seeds), default_schedule, output, rule), config


def _column_metric(column: str, tasks: Sequence[Any]) -> str:
    """The metric a board column of these tasks measures: ``task.margin`` a margin, a task its spec's metric."""
    task, _, suffix = column.partition(".")
    if suffix:
        return suffix
    return next((t.spec.metric for t in tasks if t.name == task), "accuracy")


def _check_sensitivity(rule: Rule, tasks: Sequence[Any], columns: Sequence[str]) -> None:
    """Refuse, before anything runs, a sensitivity rule that cannot be read: a column that is not a primary
    endpoint, ``positive-control`` without a positive control, ``above-chance`` where the column has no chance
    level (GLUE, a loss, the macro)."""
    from antlm_bench.results.leaderboard.definition import chance_level

    primary = list(rule.primary) or list(columns)
    for column, which in rule.sensitivity:
        targets = primary if column == "*" else [column]
        if column != "*" and column not in primary:
            raise UserError(f"--sensitivity {column}={which}: {column} is not a primary endpoint of this sweep "
                            f"({', '.join(primary)})")
        if which == SEES_POSITIVE_CONTROL and not rule.positive_controls:
            raise UserError(f"--sensitivity {column}={which}: the sweep has no --positive-control to read it from; "
                            "add one, or choose above-chance")
        for target in targets:
            if rule.sensitivity_for(target, None) == ABOVE_CHANCE \
                    and chance_level(target, _column_metric(target, tasks)) is None:
                raise UserError(f"--sensitivity {column}={which}: {target} has no chance level (a two-way choice "
                                "task's accuracy has 50%, its margin 0 nats); choose positive-control or none")


def _controls(settings: SweepSettings,
              schedules: tuple[str, ...] | None) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The positive controls (canonical) and the labelled arms (the negative control: the baseline under its
    label) of ``--until-decided``; a control without it, or one that is the baseline, is one line."""
    u = settings.until_decided
    if u is None:
        return (), ()
    controls = canonical_schedules(u.positive_controls) if u.positive_controls else ()
    baseline = canonical_schedules([u.baseline])[0]
    if baseline in controls:
        raise UserError(f"--positive-control {baseline}: the baseline itself; a positive control is a configuration "
                        "known to be worse than the baseline (e.g. the baseline at a quarter of its epochs)")
    if controls and (schedules is None or len(set(schedules) - set(controls)) < 2):
        raise UserError("--positive-control: the controls check the comparison of a schedule with the baseline; "
                        "give --schedule with the baseline and at least one schedule besides the controls")
    return controls, ((baseline, NEGATIVE_CONTROL),) if u.negative_control else ()


@dataclass
class PreparedSweep:
    """A sweep planned, its executor chosen, nothing written yet."""

    settings: SweepSettings
    plan: SweepPlan
    first_config: RunConfig  # the first cell's: tasks, device, threads and final scoring are every cell's
    folder: SweepFolder
    cells: list[GridCell]  # every cell of a plain sweep; the first round's with --until-decided
    executor: Executor
    pending: PendingCheck

    def describe(self) -> list[str]:
        """What will run, said before anything runs: the grid, the executor, the stopping rule, and the
        comparisons the board will not test."""
        plan, rule = self.plan, self.plan.rule
        grid_text = (f"{len(plan.grid.recipes)} recipe(s) x {len(plan.grid.presets)} preset(s) x "
                     f"{len({c.schedule for c in self.cells})} schedule(s) x {len(plan.seeds)} seed(s)")
        lines = [f"sweep: {len(self.cells)} cells ({grid_text}) into {plan.output}; {self.executor.describe()}"]
        if rule is not None:
            lines.append(f"until decided: every schedule against {rule.baseline}, first round seeds "
                         f"{','.join(map(str, plan.seeds))}, +{rule.round_seeds} a round, at most {rule.max_seeds}; "
                         f"alpha {rule.alpha} for the whole family; equivalence margins "
                         f"{rule.margins_text()}; primary endpoints "
                         f"{', '.join(rule.primary) if rule.primary else 'every column'}")
            if rule.positive_controls or rule.negative_control:
                named = [f"positive {', '.join(rule.positive_controls)} (must be decided worse)"
                         if rule.positive_controls else "",
                         f"negative {rule.baseline} [{NEGATIVE_CONTROL}] (the baseline again on other seeds: must "
                         "not be decided a difference)" if rule.negative_control else ""]
                lines.append(f"controls: {'; '.join(n for n in named if n)}; at the family's per-comparison "
                             "alpha, no share of it, never keeping the sweep running")
            lines.append(self._sensitivity_text())
            lines.extend(self._power_notes())
        baseline = rule.baseline if rule is not None else None
        return lines + [f"note: {line}" for line in untestable_in_cells(self.cells, self.first_config, baseline)]

    def _sensitivity_text(self) -> str:
        """What lets each primary endpoint speak, said before the first seed (docs/statistics.md, "Sensitivity")."""
        from antlm_bench.results.leaderboard.definition import chance_level
        from antlm_bench.tasks import resolve_tasks

        rule = self.plan.rule
        assert rule is not None
        tasks = resolve_tasks(self.first_config.evaluation.tasks)
        columns = list(rule.primary) or [c for t in tasks for c in (t.name, f"{t.name}.margin")]
        rules = {column: rule.sensitivity_for(column, chance_level(column, _column_metric(column, tasks)))
                 for column in columns}
        text = "; ".join(f"{which} on {', '.join(c for c in columns if rules[c] == which)}"
                         for which in dict.fromkeys(rules.values()))
        return (f"sensitivity: {text} (an endpoint speaks only when this holds at the stop: positive-control, a "
                "positive control decided worse on it; above-chance, the baseline's interval above chance; otherwise "
                "its comparisons get no verdict, never 'equivalent')")

    def _power_notes(self) -> list[str]:
        """What the stopping rule can decide at all: looks that cannot bound any interval, and the command that
        simulates the design's power (``antlm-bench plan``) for the family this sweep may test."""
        from antlm_bench.results.stats.planning import Design
        from antlm_bench.tasks import resolve_tasks

        plan, rule = self.plan, self.plan.rule
        assert rule is not None
        schedules = len({c.schedule for c in self.cells} - set(rule.positive_controls))
        family = largest_family(len(plan.grid.recipes), len(plan.grid.presets), schedules,
                                len(resolve_tasks(self.first_config.evaluation.tasks)), rule.primary)
        design = Design(family, rule.max_seeds, len(plan.seeds), rule.round_seeds, rule.alpha, rule.tolerance)
        first = design.first_decidable()
        notes = []
        if first is not None and first > len(plan.seeds):
            notes.append(f"warning: up to {family} comparisons share alpha {rule.alpha}: no interval is bounded "
                         f"before {first} seeds a side, so the looks at {len(plan.seeds)}-{first - 1} seeds cannot "
                         f"decide anything; start with --seeds 1-{first} to save those rounds")
        notes.append(f"power: `antlm-bench plan -k {family} --max-seeds {rule.max_seeds} --first-seeds "
                     f"{len(plan.seeds)} --round-seeds {rule.round_seeds} --alpha {rule.alpha:g}"
                     + (f" --tolerance {rule.tolerance:g}" if rule.tolerance else "")
                     + " --seed-sd SD --gap GAP` simulates this rule: the chance it decides a gap of GAP points "
                     "within the cap, from a seed SD of SD points (a pilot's board shows it as ±SD)")
        return notes

    def run(self, command: Sequence[str], say: Callable[[str], None],
            progress_stream: TextIO) -> tuple[SweepRecord, SweepOutcome | SweepInterrupted]:
        """Run it, recorded in ``<output>/sweep/`` under that folder's lock (one live sweep per output folder): the
        record and the outcome, or SweepInterrupted once a SIGINT or SIGTERM has stopped every running cell."""
        self.executor.check_ready()
        self.folder.make()
        with folder_lock(self.folder.folder, "sweep"):
            record = SweepRecord.continuing(self.folder, {"command": list(command),
                                                          "settings": self.settings.model_dump(mode="json")})
            progress = Progress(record, self.executor.parallel, stream=progress_stream)
            try:
                return record, run_sweep(self.plan, self.executor, record, progress, self.pending, say)
            except SweepInterrupted as stop:
                progress.finish()
                return record, stop


def prepare_sweep(settings: SweepSettings, python: str) -> PreparedSweep:
    """The sweep of ``settings``, each cell run by the interpreter ``python``."""
    plan, first_config = plan_sweep(settings)
    folder = SweepFolder(plan.output)
    cells = plan.grid.cells(plan.seeds, plan.default_schedule)
    executor = choose_executor(settings, plan.grid, plan.output, folder, first_config, python)
    return PreparedSweep(settings, plan, first_config, folder, cells, executor, pending_check(plan.output))


__all__ = ["PreparedSweep", "cells_base", "pending_check", "plan_sweep", "prepare_sweep"]
