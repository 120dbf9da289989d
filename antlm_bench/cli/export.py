"""``antlm-bench export CKPT --format babylm OUT``: a model folder the BabyLM 2025 pipeline loads."""

from __future__ import annotations

from pathlib import Path

import typer

from antlm_bench.cli.app import app, console


@app.command("export")
def export_command(
    checkpoint: Path = typer.Argument(..., help="A checkpoint folder, or a training run (its last checkpoint)."),
    output: Path = typer.Argument(..., help="The folder to write (created whole, or not at all)."),
    format: str = typer.Option("babylm", "--format", help="Layout to write; babylm: the BabyLM 2025 pipeline's."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace OUT if it exists."),
) -> None:
    """Write the model with its tokenizer and code (and any chck_<N>M words-seen checkpoints as subfolders)."""
    from antlm_bench.errors import UserError
    from antlm_bench.export import FORMATS, export_babylm

    if format not in FORMATS:
        raise UserError(f"--format {format}: unknown; known: {', '.join(FORMATS)}")
    result = export_babylm(checkpoint, output, overwrite=overwrite)
    console.print(f"exported {result.source} to {result.output}", markup=False)
    if result.branches:
        console.print(f"words-seen checkpoints (one hub branch each): {', '.join(result.branches)}", markup=False)
    console.print("push it with the huggingface_hub commands in docs/backends.md (Export)", markup=False)
