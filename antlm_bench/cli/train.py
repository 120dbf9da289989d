"""``antlm-bench train``: pre-train a recipe through a schedule of CLM / MLM / MNTP / MIX phases."""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import ValidationError

from antlm_bench.cli.app import app, err_console, flag
from antlm_bench.cli.paths import input_folder, output_folder, path_text
from antlm_bench.config import (
    DataConfig,
    EvaluationConfig,
    MachineConfig,
    ModelConfig,
    RunConfig,
    TrainConfig,
    TrainingConfig,
)
from antlm_bench.errors import UserError, validation_line


@app.command("train")
def train_command(
    model: str = flag(ModelConfig, "name", "-m"),
    preset: str | None = flag(ModelConfig, "preset"),
    output: Path = flag(TrainConfig, "output", "-o", callback=output_folder, parser=path_text, metavar="<path>"),
    schedule: str | None = flag(ModelConfig, "schedule"),
    data_dir: Path | None = flag(DataConfig, "data_dir"),
    corpus: Path | None = flag(DataConfig, "corpus", callback=input_folder, parser=path_text, metavar="<path>"),
    cache_dir: Path | None = flag(DataConfig, "cache_dir", callback=output_folder, parser=path_text, metavar="<path>"),
    seed: int = flag(TrainConfig, "seed"),
    label: str | None = flag(RunConfig, "label"),
    max_words: int | None = flag(DataConfig, "max_words"),
    resume: bool = flag(TrainConfig, "resume"),
    overwrite: bool = flag(TrainConfig, "overwrite"),
    eval_every: str = flag(TrainConfig, "eval_every"),
    eval_tasks: str = flag(TrainConfig, "eval_tasks"),
    eval_limit: int | None = flag(TrainingConfig, "eval_limit"),
    convention: str = flag(EvaluationConfig, "convention"),
    save_every_steps: int | None = flag(TrainConfig, "save_every_steps"),
    save_every_minutes: float = flag(TrainingConfig, "save_every_minutes"),
    save_every_epoch: bool = flag(TrainConfig, "save_every_epoch"),
    save_at_words: str | None = flag(TrainingConfig, "save_at_words"),
    micro_batch_size: int | None = flag(TrainConfig, "micro_batch_size"),
    max_steps: int | None = flag(TrainConfig, "max_steps"),
    lr: float | None = flag(TrainConfig, "lr"),
    global_batch_size: int | None = flag(TrainConfig, "global_batch_size"),
    warmup_ratio: float | None = flag(TrainConfig, "warmup_ratio"),
    device: str = flag(MachineConfig, "device"),
    precision: str = flag(MachineConfig, "precision"),
    threads: int | None = flag(MachineConfig, "threads"),
    deterministic: bool = flag(TrainConfig, "deterministic"),
    report_to: list[str] | None = flag(TrainConfig, "report_to"),
    no_progress: bool = typer.Option(False, "--no-progress", "--quiet", "-q",
                                     help="No live progress bar."),
    include_path: list[Path] | None = flag(RunConfig, "include_path"),
) -> None:
    """Train MODEL at PRESET through its schedule; `torchrun --nproc-per-node N` runs it with DDP."""
    from antlm_bench.options import parse_device, resolve_device
    from antlm_bench.pipeline import default_preset, score_checkpoint
    from antlm_bench.recipes import load_recipe
    from antlm_bench.registry import add_include_path
    from antlm_bench.training.trainer import train

    parse_device(device)  # before anything is read or written
    preset = preset or default_preset()[0]  # run's rule: paper with CUDA, tiny otherwise
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
