"""``antlm-bench run``: prepare, train under a schedule, evaluate, summarise -- the user's whole job."""

from __future__ import annotations

from pathlib import Path

import typer

from antlm_bench.cli.app import PRECISION_HELP, DataDirOption, IncludePathOption, app, console
from antlm_bench.cli.paths import input_folder, output_folder, path_text
from antlm_bench.options import SAVE_EVERY_MINUTES

FINAL_SCORING_HELP = ("Method of the final minimal-pair evaluation: auto (the last phase's: CLM -> clm, MLM -> "
                      "pll), clm or pll for every run. Schedules that end in different objectives are compared "
                      "only when scored alike: the board never tests clm against pll. Per-phase scores keep "
                      "each phase's own method.")


@app.command("run")
def run(
    ctx: typer.Context,
    model: str = typer.Option("antlm-babyllama", "--model", "-m", help="Trainer recipe (see `antlm-bench list models`)."),
    tasks: str = typer.Option("babylm", "--tasks", "-t",
                              help="Tasks to evaluate the final model on (any of `antlm-bench list tasks`): "
                                   "blimp, blimp_supplement, ewok, glue (glue:rte,mrpc for a few members), "
                                   "entity_tracking, wug_adj, reading, or the groups babylm (the first four), "
                                   "zero-shot (all but glue) and babylm-2025 (all seven)."),
    preset: str | None = typer.Option(None, help="Model size: tiny, cpu, small or paper (default: paper with CUDA, "
                                                 "tiny otherwise)."),
    schedule: str | None = typer.Option(None, help="Schedule such as 4_CLM+16_MLM+4_CLM (default: the recipe's)."),
    seeds: str = typer.Option("42", help="Seeds: 42, 1-3 or 1,2,5-7 (at most 1000); one run per seed, summarised "
                                          "as mean and spread."),
    label: str = typer.Option(None, "--label", help="A name for these runs beside their seeds (lower-case "
                              "letters, digits, hyphens): in their folder names and rows (the board shows "
                              "SCHEDULE \\[label] as its own row), and in every random draw, so seed s under a label "
                              "is another initialisation and data order than seed s without; not part of the "
                              "configuration (a negative control: sweep --negative-control)."),
    output: Path = typer.Option(Path("results"), "--output", "-o", callback=output_folder, parser=path_text, metavar="<path>",
                                help="Folder for run folders and tables."),
    data_dir: Path | None = DataDirOption,
    corpus: Path | None = typer.Option(None, callback=input_folder, parser=path_text, metavar="<path>",
                                       help="Pre-training text folder (default: DATA/pretrain_sample)."),
    max_words: int | None = typer.Option(None, help="Cap the pre-training corpus (default: the preset's cap)."),
    eval_limit: int | None = typer.Option(None, help="Items per subtask when scoring each phase (default: the "
                                                    "preset's; the final evaluation uses all items)."),
    eval_every: str = typer.Option("phase", "--eval-every", help="Score the minimal-pair tasks during training: "
                                   "at every phase end (phase), epoch end (epoch), at each --save-at-words "
                                   "checkpoint with the fast suite (words; the run then draws curves over words "
                                   "seen), or not at all (none)."),
    save_at_words: str | None = typer.Option(None, "--save-at-words", help="Checkpoints chck_<N>M at these words "
                                             "seen (repeats counted): 1M,2M,... or a BabyLM grid: "
                                             "babylm-strict-small (19: every 1M to 10M, then every 10M to 100M; "
                                             "babylm is its alias) or babylm-strict (28: and every 100M to 1000M)."),
    save_every_minutes: float = typer.Option(SAVE_EVERY_MINUTES, "--save-every-minutes",
                                             help="A resume point every M minutes of training: the most a hard "
                                                  "kill (SIGKILL, a lost machine) costs; Ctrl-C and SIGTERM write "
                                                  "one anyway."),
    limit: int | None = typer.Option(None, help="Final minimal-pair evaluation on the first N items per subtask "
                                               "(a quick look; rows record it)."),
    glue_epochs: int | None = typer.Option(None, help="GLUE fine-tuning epochs (default: 10, 30 for WSC; the tiny "
                                                     "preset uses a smaller CPU budget and says so)."),
    glue_max_train_examples: int | None = typer.Option(None, help="Cap each GLUE training split."),
    probe: bool = typer.Option(False, "--probe", help="GLUE by a frozen-feature logistic-regression probe "
                                                       "(fast on CPU; reported as method probe, never mixed with "
                                                       "fine-tuning)."),
    glue_protocol: str | None = typer.Option(None, "--glue-protocol", help="GLUE: default (best epoch on a slice of "
                                             "the training split) or babylm-official (as the BabyLM 2025 pipeline: "
                                             "best epoch on the reported split, first-position pooling; rows say "
                                             "scoring=finetune-official, never ranked with the default)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda[:N]."),
    precision: str = typer.Option("auto", "--precision", help=PRECISION_HELP),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for torch, training and evaluation "
                                       "(default: 1 below 10M parameters, torch's default above, unless "
                                       "$OMP_NUM_THREADS is set)."),
    convention: str = typer.Option("babylm-2025", "--convention", help="Scoring convention of the per-phase and "
                                   "final minimal-pair scores: babylm-2025 (texts as given) or babylm-2024 (a "
                                   "leading space, the AntLM paper's lm-eval tasks); recorded in every row."),
    final_scoring: str = typer.Option("auto", "--final-scoring", help=FINAL_SCORING_HELP),
    include_path: list[Path] | None = IncludePathOption,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Train a model under a schedule, score each phase its own way, evaluate the final model, and print a Table-2-style summary (BLiMP, supplement, EWoK, GLUE, macro, with 95% intervals, chance and GLUE's majority-class floor).

    Re-running the same command reuses finished training and evaluations and resumes unfinished ones."""
    from antlm_bench.recipes import load_recipe
    from antlm_bench.registry import add_include_path

    # a mistyped recipe is answered before the trainer (torch) is imported
    for folder in ctx.params.get("include_path") or []:
        add_include_path(folder)
    load_recipe(ctx.params["model"])
    from antlm_bench.pipeline import run_benchmark, run_config_of_options
    from antlm_bench.results.leaderboard import build_leaderboard, print_terminal, read_results

    config = run_config_of_options(ctx.params)
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
    if config.eval_every == "words":
        from antlm_bench.results.leaderboard import write_words_curves

        curves = write_words_curves(results, summary.output)
        if curves is not None:
            console.print(f"curves over words seen (fast suite): {curves}")
    console.print(f"tables: {', '.join(str(r.folder) for r in summary.runs)}")
    console.print(f"compare schedules: antlm-bench leaderboard {summary.output}")


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
