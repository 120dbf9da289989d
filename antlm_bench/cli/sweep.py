"""``antlm-bench sweep``: a grid of ``run`` cells (recipes x presets x schedules x seeds) on local worker processes
or a SLURM job array, and ``--until-decided``: seeds added in rounds until each schedule is decided against the
baseline. The options (or a YAML file) are validated and resolved here; ``antlm_bench.sweep`` runs the sweep."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from antlm_bench.cli.app import IncludePathOption, app, console, err_console
from antlm_bench.cli.paths import check_output_folder, input_file, output_folder
from antlm_bench.errors import UserError
from antlm_bench.registry import add_include_path

if TYPE_CHECKING:
    from antlm_bench.pipeline import RunConfig
    from antlm_bench.sweep import Cell, Executor, PendingCheck, SweepFolder, SweepInterrupted, SweepOutcome, SweepPlan
    from antlm_bench.sweep.record import SweepRecord
    from antlm_bench.sweep.settings import SweepSettings

# ``run`` options the grid sets for each cell: they are axes of the sweep, not pass-through options
GRID_OPTIONS = {"model", "preset", "schedule", "seeds", "output", "quiet"}


# ----------------------------------------------------------------------------------------------------------
# the cells' `run` options, parsed by `run` itself


def _run_command() -> Any:
    import typer.main

    return typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]


def run_words(options: dict[str, Any]) -> tuple[str, ...]:
    """``{"max-words": 20000, "probe": true}`` -> ``("--max-words", "20000", "--probe")``, each name checked
    against ``run``'s options (a bad one is one line naming it)."""
    params = {p.name: p for p in _run_command().params}
    words: list[str] = []
    for raw_name, value in options.items():
        name = str(raw_name).lstrip("-").replace("-", "_")
        if name in GRID_OPTIONS:
            raise UserError(f"run option {raw_name}: set by the sweep's grid; use the sweep's own --"
                            f"{'model' if name == 'model' else name.replace('_', '-')} (or its key in the file)")
        param = params.get(name)
        if param is None or not param.opts:
            known = ", ".join(sorted(p.name.replace("_", "-") for p in params.values() if p.opts
                                     and p.name not in GRID_OPTIONS))
            raise UserError(f"run option {raw_name}: `antlm-bench run` has no such option (it has {known})")
        flag = max(param.opts, key=len)
        if getattr(param, "is_flag", False):
            if not isinstance(value, bool):
                raise UserError(f"run option {raw_name}: a switch; give true or false (got {value!r})")
            if value:
                words.append(flag)
            continue
        for item in value if isinstance(value, list) else [value]:
            words += [flag, str(item)]
    return tuple(words)


def run_params(argv: list[str]) -> dict[str, Any]:
    """``run``'s own parse of a cell's words (types and choices checked as ``run`` checks them)."""
    import click

    try:
        context = _run_command().make_context("run", list(argv))
    except click.exceptions.UsageError as err:
        raise UserError(f"run option: {err.format_message()}") from None
    return context.params


def pending_check(output: Path) -> PendingCheck:
    """The cells ``run`` would still train or evaluate (``pipeline.pending_seeds``), one check per configuration."""
    from antlm_bench.pipeline import pending_seeds, run_config_of_options

    def pending(cells: list[Cell]) -> list[Cell]:
        groups: dict[tuple[str, str, str, tuple[str, ...]], list[Cell]] = {}
        for cell in cells:
            groups.setdefault((cell.recipe, cell.preset, cell.schedule, cell.run_args), []).append(cell)
        todo: set[str] = set()
        for group in groups.values():
            argv = group[0].argv(output)[3:]
            argv[argv.index("--seeds") + 1] = ",".join(str(c.seed) for c in group)
            left = set(pending_seeds(run_config_of_options(run_params(argv))))
            todo.update(c.name for c in group if c.seed in left)
        return [cell for cell in cells if cell.name in todo]

    return pending


# ----------------------------------------------------------------------------------------------------------
# the command


@app.command("sweep")
def sweep_command(
    config_file: Path | None = typer.Option(None, "--config", "-c", callback=input_file,
                                            help="A sweep file (YAML: models, schedules, "
                                            "seeds, presets, output, run, executor, jobs, slurm, until_decided; "
                                            "docs/sweep.md). The options below override its values."),
    model: str | None = typer.Option(None, "--model", "-m", help="Trainer recipes, comma-separated (default "
                                     "antlm-babyllama)."),
    schedule: str | None = typer.Option(None, "--schedule", help="Schedules, comma-separated at the top level "
                                        "(commas inside MIX(...) belong to it); default: each recipe's."),
    seeds: str | None = typer.Option(None, "--seeds", help="Seeds: 1-8, 1,2,5-7 (default 1-3); with "
                                     "--until-decided, the first round's."),
    preset: str | None = typer.Option(None, "--preset", help="Presets, comma-separated (default: paper with "
                                      "CUDA, tiny otherwise)."),
    tasks: str | None = typer.Option(None, "--tasks", "-t", help="`run --tasks` for every cell (default babylm)."),
    max_words: int | None = typer.Option(None, "--max-words", help="`run --max-words` for every cell."),
    limit: int | None = typer.Option(None, "--limit", help="`run --limit` for every cell."),
    device: str | None = typer.Option(None, "--device", help="`run --device`: auto (default), cpu or cuda."),
    threads: int | None = typer.Option(None, "--threads", help="`run --threads`: CPU threads per cell."),
    final_scoring: str | None = typer.Option(None, "--final-scoring", help="`run --final-scoring` for every cell: "
                                             "auto (default: each cell by its last phase), clm or pll (every cell "
                                             "alike, so schedules ending in CLM and in MLM are compared on one "
                                             "instrument)."),
    run_option: list[str] | None = typer.Option(None, "--run-option", help="Any other `run` option for every "
                                                "cell, as NAME=VALUE (repeat it): --run-option eval-every=none."),
    output: Path | None = typer.Option(None, "--output", "-o", callback=output_folder,
                                       help="Folder of the run folders (as `run "
                                       "--output`) and of the sweep's own files in <output>/sweep/ (default "
                                       "results)."),
    executor: str | None = typer.Option(None, "--executor", help="local (worker processes, default) or slurm "
                                        "(a job array through submitit)."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="local: cells at once (default: the cores over "
                                    "the threads a cell uses; on CUDA, the visible GPUs x --per-device)."),
    per_device: int | None = typer.Option(None, "--per-device", help="local, CUDA: cells per GPU (default 1)."),
    partition: str | None = typer.Option(None, "--partition", help="slurm: partition."),
    time_min: int | None = typer.Option(None, "--time-min", help="slurm: time limit per task, minutes "
                                        "(default 60)."),
    cpus_per_task: int | None = typer.Option(None, "--cpus-per-task", help="slurm: CPUs per task (default 1)."),
    gpus_per_task: int | None = typer.Option(None, "--gpus-per-task", help="slurm: GPUs per task (default 0)."),
    mem_gb: float | None = typer.Option(None, "--mem-gb", help="slurm: memory per task, GB."),
    array_parallelism: int | None = typer.Option(None, "--array-parallelism", help="slurm: tasks of the "
                                                 "array running at once."),
    submitit_cluster: str | None = typer.Option(None, "--submitit-cluster", help="slurm: slurm (default) or local "
                                                "(submitit's local executor runs the same array on this machine: "
                                                "try a sweep before the cluster)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would run (slurm: the array job submitit "
                                 "would submit) and exit."),
    until_decided: bool = typer.Option(False, "--until-decided", help="Add seeds in rounds until every "
                                       "schedule is decided against --baseline (docs/statistics.md)."),
    baseline: str | None = typer.Option(None, "--baseline", help="--until-decided: the schedule the others are "
                                        "compared with."),
    max_seeds: int | None = typer.Option(None, "--max-seeds", help="--until-decided: at most this many seeds a "
                                         "schedule (default 12)."),
    tolerance: float | None = typer.Option(None, "--tolerance", help="--until-decided: equivalence margin in "
                                           "points: an interval within +-T decides 'no difference larger than T' "
                                           "(default: none, only differences decide)."),
    round_seeds: int | None = typer.Option(None, "--round-seeds", help="--until-decided: seeds added per round "
                                           "(default 1)."),
    alpha: float | None = typer.Option(None, "--alpha", help="--until-decided: error rate of the whole family "
                                       "of comparisons (default 0.05, Bonferroni over them)."),
    include_path: list[Path] | None = IncludePathOption,
) -> None:
    """Run a grid of `antlm-bench run` cells (recipes x presets x schedules x seeds) on local worker processes or a SLURM job array; finished cells are reused, unfinished ones resumed.

    Each cell is exactly the `run` cell of the same options: the same run folder under --output, the same content
    hashes, so a second sweep (or a `run` by hand) reuses what is finished. Compare the results with
    `antlm-bench leaderboard OUTPUT`."""
    from antlm_bench.locking import folder_lock
    from antlm_bench.sweep import SweepFolder, SweepInterrupted, SweepRecord, load_sweep_file, settings_of

    for folder in include_path or []:
        add_include_path(folder)
    file_values = load_sweep_file(config_file) if config_file is not None else {}
    source = str(config_file) if config_file is not None else "command line"
    if until_decided and baseline is None and not (file_values.get("until_decided") or {}).get("baseline"):
        raise UserError("--until-decided needs --baseline SCHEDULE (the schedule the others are compared with)")
    decided = {k: v for k, v in {"baseline": baseline, "max_seeds": max_seeds, "tolerance": tolerance,
                                 "round_seeds": round_seeds, "alpha": alpha}.items() if v is not None}
    if decided and not until_decided and "until_decided" not in file_values:
        raise UserError(f"--{next(iter(decided)).replace('_', '-')} is an option of --until-decided; add it")
    run_values = _run_option_pairs(run_option or [])
    run_values.update({k: v for k, v in {"tasks": tasks, "max_words": max_words, "limit": limit, "device": device,
                                         "threads": threads, "final_scoring": final_scoring}.items()
                       if v is not None})
    if include_path:
        run_values["include_path"] = [str(p) for p in include_path]
    slurm_values = {k: v for k, v in {"partition": partition, "time_min": time_min, "cpus_per_task": cpus_per_task,
                                      "gpus_per_task": gpus_per_task, "mem_gb": mem_gb,
                                      "array_parallelism": array_parallelism,
                                      "cluster": submitit_cluster}.items() if v is not None}
    settings = settings_of(file_values, {
        "models": model, "schedules": schedule, "seeds": seeds, "presets": preset, "output": output,
        "run": run_values, "executor": executor, "jobs": jobs, "per_device": per_device, "slurm": slurm_values,
        "until_decided": decided if until_decided or decided else None}, source)

    plan, run_config_of_first = _plan(settings)
    sweep_folder = SweepFolder(plan.output)
    cells = plan.grid.cells(plan.seeds, plan.default_schedule)
    chosen = _executor(settings, plan, sweep_folder, run_config_of_first)
    grid_text = (f"{len(plan.grid.recipes)} recipe(s) x {len(plan.grid.presets)} preset(s) x "
                 f"{len({c.schedule for c in cells})} schedule(s) x {len(plan.seeds)} seed(s)")
    console.print(f"sweep: {len(cells)} cells ({grid_text}) into {plan.output}; {chosen.describe()}",
                  highlight=False, markup=False, soft_wrap=True)
    if plan.rule is not None:
        r = plan.rule
        console.print(f"until decided: every schedule against {r.baseline}, first round seeds "
                      f"{','.join(map(str, plan.seeds))}, +{r.round_seeds} a round, at most {r.max_seeds}; alpha "
                      f"{r.alpha} for the whole family; equivalence margin "
                      f"{'none' if r.tolerance is None else f'+-{r.tolerance:g} pp'}", highlight=False, markup=False,
                      soft_wrap=True)
    for line in _untestable(plan, cells, run_config_of_first):
        console.print(f"note: {line}", highlight=False, markup=False, soft_wrap=True)
    if dry_run:
        _dry_run(chosen, cells, plan)
        return

    chosen.check_ready()
    sweep_folder.make()
    with folder_lock(sweep_folder.folder, "sweep"):
        record = SweepRecord.continuing(sweep_folder, {"command": sys.argv,
                                                       "settings": settings.model_dump(mode="json")})
        outcome = _run(plan, chosen, record)
        if isinstance(outcome, SweepInterrupted):
            left = record.unfinished()
            console.print(f"sweep stopped ({outcome}): {len(left)} cell(s) left to do: "
                          + ", ".join(state.cell.name for state in left), highlight=False, markup=False,
                          soft_wrap=True)
            console.print("run the same command again to resume them (finished cells are reused, interrupted ones "
                          "resume from their resume point)", highlight=False, markup=False)
            raise typer.Exit(outcome.exit_code)
    from antlm_bench.sweep.record import DONE, REUSED

    console.print(f"sweep: {record.count(DONE)} cell(s) run, {record.count(REUSED)} reused, {len(outcome.failed)} "
                  f"failed; record {sweep_folder.record_file}", highlight=False, markup=False, soft_wrap=True)
    for cell in outcome.failed:
        state = record.states[cell.name]
        err_console.print(f"failed: {cell.name} (exit status {state.returncode}); log {sweep_folder.log_of(cell)}",
                          highlight=False, markup=False, soft_wrap=True)
    if plan.rule is not None and not outcome.failed:
        console.print(f"decision: {outcome.status}; stored in {sweep_folder.decision_file}", highlight=False,
                      markup=False, soft_wrap=True)
    console.print(f"compare: antlm-bench leaderboard {plan.output}", highlight=False, markup=False)
    if outcome.failed:
        raise typer.Exit(1)


def _run_option_pairs(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--run-option {pair}: write NAME=VALUE, e.g. --run-option eval-every=none")
        lowered = value.strip().lower()
        out[name.strip()] = True if lowered == "true" else False if lowered == "false" else value.strip()
    return out


def _plan(settings: SweepSettings) -> tuple[SweepPlan, RunConfig]:
    """The resolved grid (canonical schedules, presets decided, run options checked by `run`'s own parser) and the
    first cell's RunConfig (for the thread and device decisions)."""
    from antlm_bench.pipeline import default_preset, run_config_of_options
    from antlm_bench.recipes import load_recipe
    from antlm_bench.sweep import Grid, Rule, SweepPlan, canonical_schedules
    from antlm_bench.tasks import resolve_tasks

    recipes = [load_recipe(name) for name in settings.models]
    if len({r.name for r in recipes}) != len(recipes):
        raise UserError(f"--model {','.join(settings.models)}: a recipe named twice")
    presets = settings.presets or [default_preset()[0]]
    for recipe in recipes:
        for preset in presets:
            recipe.preset(preset)  # an unknown preset: one line now, not a failed cell later
    schedules = canonical_schedules(settings.schedules) if settings.schedules else None
    default_schedule = {r.name: canonical_schedules([r.default_schedule])[0] for r in recipes}
    words = run_words(settings.run)
    grid = Grid(tuple(r.name for r in recipes), tuple(presets), schedules, words)
    output = check_output_folder(settings.output.expanduser(), "output")
    first = grid.cells(settings.seeds[:1], default_schedule)[0]
    config = run_config_of_options(run_params(first.argv(output)[3:]))  # every pass-through option checked by `run`
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
        rule = Rule(baseline, u.alpha, u.tolerance, u.max_seeds, u.round_seeds)
    tasks = [request.name for request in resolve_tasks(config.tasks)]
    if rule is not None:
        from antlm_bench.results.stats.sequential import fewest_seeds

        # the largest family the decision may test: every other schedule x every task's accuracy and margin, and
        # the macro
        others = len(schedules or default_schedule.values()) - 1
        family = len(grid.recipes) * len(presets) * others * (2 * len(tasks) + 1)
        needed = fewest_seeds(rule.alpha_each(family))
        if rule.max_seeds < needed:
            raise UserError(f"--max-seeds {rule.max_seeds}: the anytime-valid interval bounds nothing below {needed} "
                            f"seeds at alpha {rule.alpha} over up to {family} comparisons; allow more seeds")
    return SweepPlan(grid, list(settings.seeds), default_schedule, output, rule), config


def _untestable(plan: SweepPlan, cells: list[Cell], config: RunConfig) -> list[str]:
    """The comparisons the sweep's board will not test (``sweep.instruments``), said before anything runs."""
    from antlm_bench.sweep.instruments import untestable_comparisons
    from antlm_bench.tasks import resolve_tasks

    scored = [r.name for r in resolve_tasks(config.tasks) if r.adapter().needs_scoring_model]
    schedules = list(dict.fromkeys(cell.schedule for cell in cells))
    return untestable_comparisons(schedules, config.final_scoring, scored,
                                  plan.rule.baseline if plan.rule is not None else None)


def _visible_gpus(device: str) -> list[str]:
    """The GPUs cells are spread over: with --device auto or cuda and CUDA present, each visible one (as
    CUDA_VISIBLE_DEVICES names it); none otherwise (--device cuda:N pins every cell to that one)."""
    import torch

    if device not in ("auto", "cuda") or not torch.cuda.is_available():
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [v.strip() for v in visible.split(",") if v.strip()][:torch.cuda.device_count()]
    return [str(i) for i in range(torch.cuda.device_count())]


def _executor(settings: SweepSettings, plan: SweepPlan, folder: SweepFolder, config: RunConfig) -> Executor:
    from antlm_bench.models import count_parameters
    from antlm_bench.models.threads import choose_threads, training_device
    from antlm_bench.recipes import load_recipe
    from antlm_bench.sweep import LocalExecutor, SlurmExecutor, SlurmResources, local_slots

    if settings.executor == "slurm":
        s = settings.slurm
        resources = SlurmResources(s.partition, s.time_min, s.cpus_per_task, s.gpus_per_task, s.mem_gb,
                                   s.array_parallelism, extra=s.extra)
        return SlurmExecutor(sys.executable, plan.output, folder, resources, cluster=settings.slurm.cluster)
    device = training_device(config.device)
    threads_per_run = max(choose_threads(config.threads, count_parameters(load_recipe(r), p), device)[0]
                          for r in plan.grid.recipes for p in plan.grid.presets)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    slots, why = local_slots(settings.jobs, cores, threads_per_run, _visible_gpus(config.device), settings.per_device)
    return LocalExecutor(sys.executable, plan.output, folder, slots, why=why)


def _dry_run(chosen: Executor, cells: list[Cell], plan: SweepPlan) -> None:
    import shlex

    from antlm_bench.sweep import SlurmExecutor

    pending = pending_check(plan.output)(cells)
    console.print(f"{len(pending)} of {len(cells)} cell(s) still to run (the others are finished and would be "
                  "reused)" + ("; with --until-decided, later rounds add seeds" if plan.rule else ""),
                  highlight=False, markup=False)
    for index, cell in enumerate(pending):
        console.print(f"  [{index}] {shlex.join([sys.executable, *cell.argv(plan.output)])}", highlight=False,
                      markup=False, soft_wrap=True)
    if isinstance(chosen, SlurmExecutor) and pending:
        console.print(f"the sbatch file submitit would submit (a job array of {len(pending)} task(s); task i runs "
                      "cell [i] above through submitit's pickled call, logs in <output>/sweep/logs/):",
                      highlight=False, markup=False)
        console.print(chosen.sbatch_script(len(pending)), highlight=False, markup=False, soft_wrap=True)


def _run(plan: SweepPlan, chosen: Executor, record: SweepRecord) -> SweepOutcome | SweepInterrupted:
    from antlm_bench.sweep import Progress, SweepInterrupted, run_sweep

    progress = Progress(record, chosen.parallel, stream=sys.stderr)

    def say(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    try:
        return run_sweep(plan, chosen, record, progress, pending_check(plan.output), say)
    except SweepInterrupted as stop:
        progress.finish()
        return stop
