"""``antlm-bench train``: pre-train a recipe through a schedule of CLM / MLM / MNTP / MIX phases."""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import ValidationError

from antlm_bench.cli.app import PRECISION_HELP, DataDirOption, IncludePathOption, app, err_console
from antlm_bench.cli.paths import input_folder, output_folder, path_text
from antlm_bench.errors import UserError, validation_line
from antlm_bench.options import SAVE_EVERY_MINUTES


@app.command("train")
def train_command(
    model: str = typer.Option("antlm-babyllama", "--model", "-m", help="Recipe name (antlm-bench list models)."),
    preset: str = typer.Option("tiny", "--preset", help="Size preset of the recipe: tiny, cpu, small, paper (`antlm-bench list models`)."),
    output: Path = typer.Option(..., "--output", "-o", callback=output_folder, parser=path_text, metavar="<path>",
                                help="Run folder: checkpoints, metrics, scores."),
    schedule: str | None = typer.Option(None, "--schedule", help='e.g. "4_CLM+16_MLM+4_CLM" (default: the recipe\'s).'),
    data_dir: Path | None = DataDirOption,
    corpus: Path | None = typer.Option(None, "--corpus", callback=input_folder, parser=path_text, metavar="<path>",
                                       help="Folder of *.train files (default: the data folder's "
                                       "pretrain_sample)."),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", callback=output_folder, parser=path_text, metavar="<path>",
                                            help="Tokenizer / packed corpus cache."),
    seed: int = typer.Option(42, "--seed", help="The training seed, 0 to 2147483647."),
    label: str | None = typer.Option(None, "--label", help="A name beside the seed (lower-case letters, digits, "
                                     "hyphens): in the records and rows, and in every random draw (seed s under a "
                                     "label trains another network than seed s without); not part of the "
                                     "configuration."),
    max_words: int | None = typer.Option(None, "--max-words", help="Cap the corpus (default: the preset's)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --output from its last checkpoint."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete the run in --output and start again."),
    eval_every: str = typer.Option("none", "--eval-every", help="Score checkpoints at every phase or epoch end, or "
                                   "each --save-at-words checkpoint with the fast suite (words)."),
    eval_tasks: str = typer.Option("blimp", "--eval-tasks", help="Tasks for --eval-every."),
    eval_limit: int | None = typer.Option(None, "--eval-limit", help="Items per subtask for --eval-every "
                                          "(default: the preset's eval_limit)."),
    convention: str = typer.Option("babylm-2025", "--convention", help="Scoring convention of --eval-every: "
                                   "babylm-2025 (sentences as given) or babylm-2024 (leading space)."),
    save_every_steps: int | None = typer.Option(None, "--save-every-steps", help="Resume point every N steps."),
    save_every_minutes: float = typer.Option(SAVE_EVERY_MINUTES, "--save-every-minutes", help="Resume point every M minutes."),
    save_every_epoch: bool = typer.Option(False, "--save-every-epoch", help="A checkpoint at every epoch end."),
    save_at_words: str | None = typer.Option(None, "--save-at-words", help="checkpoints/chck_<N>M at these words "
                                             "seen (repeats counted): 1M,2M,... (K and M suffixes), or a BabyLM "
                                             "grid: babylm-strict-small (19: every 1M to 10M, then every 10M to "
                                             "100M; babylm is its alias) or babylm-strict (28: and every 100M to "
                                             "1000M). Counts the schedule never reaches are named at the start."),
    micro_batch_size: int | None = typer.Option(None, "--micro-batch-size", help="Sequences per forward pass "
                                                "(gradient accumulation keeps the recipe's global batch)."),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Stop after this many optimizer steps."),
    lr: float | None = typer.Option(None, "--lr", help="Peak learning rate (default: the recipe's optimizer.lr)."),
    global_batch_size: int | None = typer.Option(None, "--global-batch-size",
                                                 help="Sequences per optimizer step (default: the preset's)."),
    warmup_ratio: float | None = typer.Option(None, "--warmup-ratio",
                                              help="Linear warm-up, as a share of each phase's (or cycle's) steps "
                                                   "(default: the recipe's lr_schedules)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:1 ..."),
    precision: str = typer.Option("auto", "--precision", help=PRECISION_HELP),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for torch (default: 1 below 10M "
                                       "parameters, torch's default above, unless $OMP_NUM_THREADS is set)."),
    deterministic: bool = typer.Option(False, "--deterministic", help="Deterministic kernels (bit-exact reruns)."),
    report_to: list[str] | None = typer.Option(None, "--report-to", help="tensorboard and/or wandb (if installed)."),
    no_progress: bool = typer.Option(False, "--no-progress", "--quiet", "-q",
                                     help="No live progress bar."),
    include_path: list[Path] | None = IncludePathOption,
) -> None:
    """Train MODEL at PRESET through its schedule; `torchrun --nproc-per-node N` runs it with DDP."""
    from antlm_bench.options import parse_device, resolve_device
    from antlm_bench.pipeline import score_checkpoint
    from antlm_bench.recipes import load_recipe
    from antlm_bench.registry import add_include_path
    from antlm_bench.training.trainer import TrainConfig, train

    parse_device(device)  # before anything is read or written
    for folder in include_path or []:
        add_include_path(folder)
    if eval_limit is None and eval_every != "none":
        eval_limit = load_recipe(model).resolve(preset).spec.eval_limit
    kinds = [kind.strip() for item in report_to or [] for kind in item.split(",") if kind.strip()]
    from antlm_bench.models import count_parameters
    from antlm_bench.models.threads import choose_threads

    n_threads, threads_why = choose_threads(threads, count_parameters(load_recipe(model).resolve(preset)),
                                            resolve_device(device))
    try:
        config = TrainConfig(
            model=model, preset=preset, output=output, schedule=schedule, data_dir=data_dir, corpus=corpus,
            cache_dir=cache_dir, seed=seed, label=label, max_words=max_words, resume=resume, overwrite=overwrite,
            eval_every=eval_every, eval_tasks=eval_tasks, eval_limit=eval_limit, convention=convention,
            save_every_steps=save_every_steps,
            save_every_minutes=save_every_minutes, save_every_epoch=save_every_epoch,
            save_at_words=save_at_words or [],
            micro_batch_size=micro_batch_size, max_steps=max_steps, lr=lr, global_batch_size=global_batch_size,
            warmup_ratio=warmup_ratio, device=device, precision=precision, deterministic=deterministic,
            report_to=kinds, progress=not no_progress, torch_threads=n_threads, torch_threads_reason=threads_why,
        )
    except ValidationError as err:
        raise UserError(validation_line(err, option=True)) from None
    if resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other; pass one")
    from antlm_bench.training.trainer import TrainingInterrupted

    try:
        result = train(config, console=err_console, scorer=score_checkpoint)
    except TrainingInterrupted as stop:  # SIGINT / SIGTERM: the step finished, a resume point written
        err_console.print(str(stop), highlight=False, markup=False)
        raise typer.Exit(stop.exit_code) from None
    where = result.final_checkpoint or (output / "last")
    err_console.print(f"done: {result.steps} steps; model in {where}; torch threads {n_threads} ({threads_why}); "
                      f"precision {result.precision.name} ({result.precision.reason})", highlight=False)
