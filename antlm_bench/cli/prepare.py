"""``antlm-bench data prepare``: clean, tokenize and pack the pre-training corpus for a recipe, alone."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from antlm_bench.cli.app import console, flag
from antlm_bench.cli.data import data_app
from antlm_bench.cli.paths import input_folder, output_folder, path_text
from antlm_bench.config import DataConfig, RunConfig
from antlm_bench.registry import add_include_path


@data_app.command("prepare")
def prepare(
    recipe: str = typer.Option("antlm-babyllama", "--recipe", help="Trainer recipe (see `antlm-bench list models`)."),
    preset: str = typer.Option("tiny", "--preset", help="Size preset: tiny, cpu, small or paper (`antlm-bench list models`)."),
    corpus: Path | None = typer.Option(None, "--corpus", callback=input_folder, parser=path_text, metavar="<path>",
                                       help="Folder of *.train files (default: DATA/pretrain_sample)."),
    max_words: int | None = typer.Option(None, "--max-words", help="Cap on words, sampled per source (default: preset's)."),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", callback=output_folder, parser=path_text, metavar="<path>",
                                          help="Cache (default: ~/.cache/antlm-bench/prepared)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the --max-words sampling."),
    split: str = typer.Option("train", "--split", help="File suffix to read: train or dev."),
    data_dir: Path | None = flag(DataConfig, "data_dir"),
    include_path: list[Path] | None = flag(RunConfig, "include_path"),
) -> None:
    """Train the recipe's tokenizer and pack the corpus into fixed-length sequences (cached by content hash);
    streams, tokenizing on every core; memory grows by some 26 bytes a line, not with the text."""
    from antlm_bench.data.corpus import default_corpus_dir, describe, prepare_training_data
    from antlm_bench.recipes import load_recipe

    for folder in include_path or []:
        add_include_path(folder)
    chosen = load_recipe(recipe)
    folder = corpus if corpus is not None else default_corpus_dir(data_dir)
    tokenizer, packed = prepare_training_data(folder, chosen.resolve(preset), cache_dir, max_words, seed, split)
    summary = describe(packed)
    table = Table(title=f"{chosen.name} / {preset}: {folder}")
    table.add_column("source")
    table.add_column("words", justify="right")
    for name, count in summary["sources"].items():  # type: ignore[union-attr]
        table.add_row(name, f"{count:,}")
    table.add_row("[bold]total[/bold]", f"{summary['words']:,}")
    console.print(table)
    console.print(f"duplicate lines dropped: {summary['duplicates_dropped']}")
    console.print(f"tokenizer: {len(tokenizer)} tokens, sha256 {packed.tokenizer_hash[:16]}")
    console.print(f"packed: {packed.n_sequences:,} sequences x {packed.seq_len} = {packed.n_tokens:,} tokens")
    console.print(f"data sha256 {packed.data_hash[:16]}; cache {summary['cache']}"
                  + (" (reused)" if packed.from_cache else " (written)"))
