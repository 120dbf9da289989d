"""``antlm-bench sweep``: a grid of ``run`` cells (recipes x presets x schedules x seeds) on local worker processes
or a SLURM job array, and ``--until-decided``: seeds added in rounds until each schedule is decided against the
baseline. The options (over a YAML file's values) become one ``SweepSettings``; ``antlm_bench.sweep`` plans and runs
the sweep, each cell a typed ``RunConfig`` (``antlm_bench.config``) run as ``run --config <cell file>``."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from antlm_bench.cli.app import app, console, err_console, flag
from antlm_bench.cli.paths import check_output_folder, input_file, output_folder, path_text
from antlm_bench.config import DataConfig, EvaluationConfig, MachineConfig, RunConfig
from antlm_bench.errors import UserError
from antlm_bench.progress import progress_line
from antlm_bench.registry import add_include_path
from antlm_bench.sweep.settings import UntilDecidedSettings

if TYPE_CHECKING:
    from antlm_bench.sweep import PreparedSweep, SweepInterrupted, SweepOutcome, SweepRecord


@app.command("sweep")
def sweep_command(
    config_file: Path | None = typer.Option(None, "--config", "-c", callback=input_file, parser=path_text, metavar="<path>",
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
    tasks: str | None = flag(EvaluationConfig, "tasks", "-t", cell=True),
    max_words: int | None = flag(DataConfig, "max_words", cell=True),
    limit: int | None = flag(EvaluationConfig, "limit", cell=True),
    device: str | None = flag(MachineConfig, "device", cell=True),
    threads: int | None = flag(MachineConfig, "threads", cell=True),
    final_scoring: str | None = flag(EvaluationConfig, "final_scoring", cell=True),
    run_option: list[str] | None = typer.Option(None, "--run-option", help="Any other `run` option for every "
                                                "cell, as NAME=VALUE (repeat it): --run-option eval-every=none."),
    output: Path | None = typer.Option(None, "--output", "-o", callback=output_folder, parser=path_text, metavar="<path>",
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
    max_seeds: int | None = flag(UntilDecidedSettings, "max_seeds", default=None),
    tolerance: float | None = flag(UntilDecidedSettings, "tolerance", default=None),
    round_seeds: int | None = flag(UntilDecidedSettings, "round_seeds", default=None),
    alpha: float | None = flag(UntilDecidedSettings, "alpha", default=None),
    margin: list[str] | None = typer.Option(None, "--margin", help="--until-decided: an equivalence margin of "
                                            "one column in its own units, COLUMN=VALUE (blimp=1.5 points, "
                                            "blimp.margin=0.05 nats); repeat it; over --tolerance."),
    primary: str | None = typer.Option(None, "--primary", help="--until-decided: the primary endpoints, board "
                                       "columns such as blimp,blimp_supplement,ewok (a task's accuracy; "
                                       "task.margin, macro): only they share alpha and must be decided; the other "
                                       "columns get intervals without a verdict (default: every column)."),
    positive_control: str | None = typer.Option(None, "--positive-control", help="--until-decided: schedule(s) "
                                                "known to be worse than the baseline, e.g. the baseline at a "
                                                "quarter of its epochs (added to the grid): each must be decided "
                                                "worse on a primary endpoint; no share of alpha."),
    negative_control: bool = typer.Option(False, "--negative-control", help="--until-decided: run the "
                                          "baseline's configuration again under the label negative-control (each "
                                          "seed another draw): it must not be decided a difference; no share of "
                                          "alpha."),
    sensitivity: list[str] | None = typer.Option(None, "--sensitivity", help="--until-decided: what lets a "
                                                 "primary endpoint speak, declared before the first seed: "
                                                 "positive-control (a positive control decided worse on it), "
                                                 "above-chance (the baseline's interval above chance) or none; RULE "
                                                 "for every primary endpoint or COLUMN=RULE (repeat it). Default: "
                                                 "positive-control with a positive control, else above-chance "
                                                 "where the column has a chance level. An endpoint that does not "
                                                 "qualify gets no verdict."),
    include_path: list[Path] | None = flag(RunConfig, "include_path"),
) -> None:
    """Run a grid of `antlm-bench run` cells (recipes x presets x schedules x seeds) on local worker processes or a SLURM job array; finished cells are reused, unfinished ones resumed.

    Each cell is exactly the `run` cell of the same options: the same run folder under --output, the same content
    hashes, so a second sweep (or a `run` by hand) reuses what is finished. Compare the results with
    `antlm-bench leaderboard OUTPUT`."""

    from antlm_bench.config import read_config_file
    from antlm_bench.sweep import prepare_sweep, settings_of

    for folder in include_path or []:
        add_include_path(folder)
    file_values = read_config_file(config_file, "a sweep file", "models:, schedules:, seeds:, ...") \
        if config_file is not None else {}
    source = str(config_file) if config_file is not None else "command line"
    decided = _until_decided_values(file_values, until_decided, {
        "baseline": baseline, "max_seeds": max_seeds, "tolerance": tolerance, "round_seeds": round_seeds,
        "alpha": alpha, "primary": [c.strip() for c in primary.split(",") if c.strip()] if primary else None,
        "margins": _margins(margin) if margin else None, "positive_controls": positive_control,
        "negative_control": negative_control or None,
        "sensitivity": _sensitivity(sensitivity) if sensitivity else None})
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
    check_output_folder(settings.output.expanduser(), "output")  # a sweep file's output:, checked as --output is

    sweep = prepare_sweep(settings, sys.executable)
    for line in sweep.describe():
        _say(line)
    if dry_run:
        _dry_run(sweep)
        return

    record, outcome = sweep.run(sys.argv, _say, sys.stderr)
    _report(sweep, record, outcome)


def _until_decided_values(file_values: dict[str, Any], until_decided: bool, given: dict[str, Any]) -> dict[str, Any]:
    """--until-decided's options the command line gave (over the file's ``until_decided:``); one without
    --until-decided (or the file's section), or --until-decided without a baseline, is one line."""
    if until_decided and given["baseline"] is None and not (file_values.get("until_decided") or {}).get("baseline"):
        raise UserError("--until-decided needs --baseline SCHEDULE (the schedule the others are compared with)")
    decided = {k: v for k, v in given.items() if v is not None}
    if decided and not until_decided and "until_decided" not in file_values:
        raise UserError(f"--{next(iter(decided)).replace('_', '-')} is an option of --until-decided; add it")
    return decided


def _report(sweep: PreparedSweep, record: SweepRecord, outcome: SweepOutcome | SweepInterrupted) -> None:
    """What the sweep did, said after it: what is left when it was stopped, the counts and failures, the decision,
    the cells run ahead, and the command that compares the results; the exit status a failure or a stop gives."""
    from antlm_bench.sweep import SweepInterrupted  # noqa: F811  (the class itself, for isinstance)
    from antlm_bench.sweep.record import DONE, INTERRUPTED, REUSED

    if isinstance(outcome, SweepInterrupted):
        left = record.unfinished()
        _say(f"sweep stopped ({outcome}): {len(left)} cell(s) left to do: "
             + ", ".join(state.cell.name for state in left))
        console.print("run the same command again to resume them (finished cells are reused, interrupted ones "
                      "resume from their resume point)", highlight=False, markup=False)
        raise typer.Exit(outcome.exit_code)
    folder, output = sweep.folder, sweep.plan.output
    _say(f"sweep: {record.count(DONE)} cell(s) run, {record.count(REUSED)} reused, {len(outcome.failed)} failed; "
         f"record {folder.record_file}")
    for cell in outcome.failed:
        err_console.print(f"failed: {cell.name} (exit status {record.states[cell.name].returncode}); log "
                          f"{folder.log_of(cell)}", highlight=False, markup=False, soft_wrap=True)
    if sweep.plan.rule is not None and not outcome.failed:
        _say(f"decision: {outcome.status}; stored in {folder.decision_file}")
    ahead = [state.cell.name for state in record.states.values() if state.status == INTERRUPTED]
    if ahead:  # run ahead for a round that did not come (an interrupted sweep returned above)
        _say(f"stopped at their resume point: {len(ahead)} cell(s) run ahead for a round the sweep did not add "
             f"(a later sweep that adds it resumes them): {', '.join(ahead)}")
    console.print(f"compare: antlm-bench leaderboard {output}", highlight=False, markup=False)
    if outcome.failed:
        raise typer.Exit(1)


def _say(line: str) -> None:
    """One line as it is: no markup, no highlighting, wrapped only by the terminal."""
    progress_line(line, console)


def _run_option_pairs(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--run-option {pair}: write NAME=VALUE, e.g. --run-option eval-every=none")
        lowered = value.strip().lower()
        out[name.strip()] = True if lowered == "true" else False if lowered == "false" else value.strip()
    return out


def _dry_run(sweep: PreparedSweep) -> None:
    import shlex

    from antlm_bench.config import flag_words
    from antlm_bench.sweep import SlurmExecutor

    pending = sweep.pending(sweep.cells)
    console.print(f"{len(pending)} of {len(sweep.cells)} cell(s) still to run (the others are finished and would be "
                  "reused)" + ("; with --until-decided, later rounds add seeds" if sweep.plan.rule else ""),
                  highlight=False, markup=False)
    for index, cell in enumerate(pending):
        _say(f"  [{index}] {shlex.join(['antlm-bench', 'run', *flag_words(cell.config(sweep.plan.output))])}  (written to "
             f"{sweep.folder.config_file_of(cell)}, run as `{sys.executable} -m antlm_bench run --config` on it)")
    if isinstance(sweep.executor, SlurmExecutor) and pending:
        console.print(f"the sbatch file submitit would submit (a job array of {len(pending)} task(s); task i runs "
                      "cell [i] above through submitit's pickled call, logs in <output>/sweep/logs/):",
                      highlight=False, markup=False)
        _say(sweep.executor.sbatch_script(len(pending)))


def _margins(values: list[str]) -> dict[str, float]:
    """``--margin COLUMN=VALUE`` (repeatable) -> {column: value}; a malformed one is one line."""
    margins: dict[str, float] = {}
    for text in values:
        column, sep, value = text.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not column.strip() or not (math.isfinite(number) and number > 0):
            raise UserError(f"--margin {text}: give COLUMN=VALUE with a positive number in the column's units, "
                            "e.g. blimp=1.5 or blimp.margin=0.05")
        margins[column.strip()] = number
    return margins


def _sensitivity(values: list[str]) -> dict[str, str]:
    """``--sensitivity RULE`` (every primary endpoint) or ``COLUMN=RULE`` (repeatable) -> {column or "*": rule};
    the rule's name is checked by the settings (one line naming the field)."""
    chosen: dict[str, str] = {}
    for text in values:
        column, sep, rule = text.rpartition("=")
        if sep and not column.strip():
            raise UserError(f"--sensitivity {text}: give RULE or COLUMN=RULE, e.g. ewok=above-chance")
        chosen[column.strip() if sep else "*"] = rule.strip()
    return chosen
