"""``antlm-bench run``: prepare, train under a schedule, evaluate, summarise -- the user's whole job."""

from __future__ import annotations

from pathlib import Path

import typer

from antlm_bench.cli.app import app, console, flag, given_flags
from antlm_bench.cli.paths import (
    check_input_folder,
    check_output_folder,
    input_file,
    input_folder,
    output_folder,
    path_text,
)
from antlm_bench.config import (
    DataConfig,
    EvaluationConfig,
    MachineConfig,
    ModelConfig,
    OutputConfig,
    RunConfig,
    TrainingConfig,
)

CONFIG_KEYS = "model:, data:, machine:, training:, evaluation:, output:, seeds:, label:"


@app.command("run")
def run(
    ctx: typer.Context,
    config_file: Path | None = typer.Option(None, "--config", "-c", callback=input_file, parser=path_text,
                                            metavar="<path>", help="A run's configuration (YAML or JSON: "
                                            f"{CONFIG_KEYS} docs/usage.md); the options given below override its "
                                            "values. A sweep runs each cell as `run --config <cell file>`."),
    model: str = flag(ModelConfig, "name", "-m"),
    tasks: str = flag(EvaluationConfig, "tasks", "-t"),
    preset: str | None = flag(ModelConfig, "preset"),
    schedule: str | None = flag(ModelConfig, "schedule"),
    seeds: str = flag(RunConfig, "seeds", default="42"),
    label: str | None = flag(RunConfig, "label"),
    output: Path = flag(OutputConfig, "folder", "-o", callback=output_folder, parser=path_text, metavar="<path>"),
    data_dir: Path | None = flag(DataConfig, "data_dir"),
    corpus: Path | None = flag(DataConfig, "corpus", callback=input_folder, parser=path_text, metavar="<path>"),
    max_words: int | None = flag(DataConfig, "max_words"),
    eval_limit: int | None = flag(TrainingConfig, "eval_limit"),
    eval_every: str = flag(TrainingConfig, "eval_every"),
    save_at_words: str | None = flag(TrainingConfig, "save_at_words"),
    save_every_minutes: float = flag(TrainingConfig, "save_every_minutes"),
    limit: int | None = flag(EvaluationConfig, "limit"),
    batch_tokens: int = flag(EvaluationConfig, "batch_tokens"),
    glue_epochs: int | None = flag(EvaluationConfig, "glue_epochs"),
    glue_max_train_examples: int | None = flag(EvaluationConfig, "glue_max_train_examples"),
    probe: bool = flag(EvaluationConfig, "probe"),
    glue_protocol: str | None = flag(EvaluationConfig, "glue_protocol"),
    device: str = flag(MachineConfig, "device"),
    precision: str = flag(MachineConfig, "precision"),
    threads: int | None = flag(MachineConfig, "threads"),
    convention: str = flag(EvaluationConfig, "convention"),
    final_scoring: str = flag(EvaluationConfig, "final_scoring"),
    include_path: list[Path] | None = flag(RunConfig, "include_path"),
    quiet: bool = flag(OutputConfig, "quiet", "-q"),
) -> None:
    """Train a model under a schedule, score each phase its own way, evaluate the final model, and print a Table-2-style summary (BLiMP, supplement, EWoK, GLUE, macro, with 95% intervals, chance and GLUE's majority-class floor).

    Re-running the same command reuses finished training and evaluations and resumes unfinished ones."""
    from antlm_bench.config import read_config_file, run_config
    from antlm_bench.recipes import load_recipe
    from antlm_bench.registry import add_include_path

    file_values = read_config_file(config_file, "a run's configuration", CONFIG_KEYS) if config_file else {}
    given = given_flags(ctx)
    config = run_config(file_values, given, str(config_file))
    if config_file is not None:  # the file's paths get the checks the options' callbacks give theirs
        _check_file_paths(config, config_file, given)
    # a mistyped recipe is answered before the trainer (torch) is imported
    for folder in config.include_path:
        add_include_path(folder)
    load_recipe(config.model.name)
    from antlm_bench.pipeline import run_benchmark
    from antlm_bench.results.leaderboard import build_leaderboard, print_terminal, read_results
    from antlm_bench.training.trainer import TrainingInterrupted

    try:
        summary = run_benchmark(config, console=console)
    except TrainingInterrupted as stop:  # SIGINT / SIGTERM in training: the same command resumes it
        console.print(f"interrupted at step {stop.step}; run the same command again to resume", highlight=False,
                      markup=False)
        raise typer.Exit(stop.exit_code) from None
    results = read_results([r.folder for r in summary.runs])
    board = build_leaderboard(results)
    print_terminal(board, console)
    # GLUE's majority-class floor beside its score, on stdout with the summary (what a user keeps: `run > log`)
    for line in floor_lines(results.rows):
        console.print(line, highlight=False, markup=False)
    for note in summary.notes:
        console.print(f"note: {note}")
    for column in board.columns:
        explanation = score_explanation(column)
        if explanation:
            console.print(f"note: {explanation}", soft_wrap=True)
    if config.training.eval_every == "words":
        from antlm_bench.results.leaderboard import write_words_curves

        curves = write_words_curves(results, summary.output)
        if curves is not None:
            console.print(f"curves over words seen (fast suite): {curves}")
    console.print(f"tables: {', '.join(str(r.folder) for r in summary.runs)}")
    console.print(f"compare schedules: antlm-bench leaderboard {summary.output}")


def _check_file_paths(config: RunConfig, config_file: Path, given: dict[str, object]) -> None:
    """A config file's output folder, corpus and cache folder, checked as ``--output`` and ``--corpus`` are (one line
    naming the file's field); a path the command line gave was checked by its option."""
    checks = (("--output", "output.folder", config.output.folder, check_output_folder),
              ("--corpus", "data.corpus", config.data.corpus, check_input_folder),
              ("--cache-dir", "data.cache_dir", config.data.cache_dir, check_output_folder))
    for option, field, path, check in checks:
        if path is not None and option not in given:
            check(path.expanduser(), f"{config_file}: field {field}")


def floor_lines(rows: list[dict]) -> list[str]:
    """Per GLUE-like task, the majority-class floor its task-score rows record (``glue.task.majority_floor``):
    always guessing the training split's most frequent label, same members, metrics and examples."""
    from antlm_bench.adapters.glue.task import majority_floor

    floors: dict[str, list[float]] = {}
    for row in rows:
        floor = majority_floor(row.get("notes") or "") if row.get("subtask") == "" else None
        if floor is not None:
            floors.setdefault(row["task"], []).append(floor)
    return [f"{task}: majority-class floor {100 * sum(values) / len(values):.1f} (always the training split's most "
            f"frequent label, same members and metrics{'; mean over ' + str(len(values)) + ' runs' if len(values) > 1 else ''}): "
            "a score at or under it shows no learning" for task, values in floors.items()]


def score_explanation(column: str) -> str | None:
    """How a multi-member task's score is made (GLUE: the mean of each member's own metric), for the summary."""
    from antlm_bench.tasks import resolve_tasks

    task = column.split(":")[0]
    try:
        (request,) = resolve_tasks(task)
        adapter = request.adapter()
    except Exception:  # noqa: BLE001  (a column of another package's task: nothing to explain)
        return None
    return adapter.score_explanation()
