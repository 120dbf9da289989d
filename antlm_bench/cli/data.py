"""``antlm-bench data``: verify, fetch and locate evaluation and pre-training data."""

from __future__ import annotations

from pathlib import Path

import typer

from antlm_bench import data as data_lib
from antlm_bench.cli.app import DataDirOption, app, console
from antlm_bench.errors import UserError

data_app = typer.Typer(help="Locate, verify and fetch data.", no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("where")
def where(data_dir: Path | None = DataDirOption) -> None:
    """Print the data folder that commands will use."""
    console.print(str(data_lib.resolve_data_dir(data_dir)))


@data_app.command("verify")
def verify(
    data_dir: Path | None = DataDirOption,
    manifest: Path | None = typer.Option(None, help="sha256sum-style manifest (default: DATA/MANIFEST.sha256)."),
) -> None:
    """Check every file of a MANIFEST.sha256 against its hash."""
    folder = data_lib.resolve_data_dir(data_dir)
    ok, problems = data_lib.verify_manifest(folder, manifest)
    for problem in problems:
        console.print(f"[red]FAIL[/red] {problem}")
    console.print(f"{len(ok)} files ok, {len(problems)} problems in {folder}")
    if problems:
        raise typer.Exit(1)


@data_app.command("fetch")
def fetch(
    url: str = typer.Option(..., help="URL of a .zip or .tar(.gz/.xz) archive of the data folder."),
    sha256: str | None = typer.Option(None, help="Expected sha256 of the archive; the download fails on mismatch."),
    dest: Path | None = typer.Option(None, help="Where to unpack (default: ~/.cache/antlm-bench/data)."),
) -> None:
    """Download a data archive into the cache: resumable, verified, unpacked atomically."""
    if sha256 is not None and len(sha256) != 64:
        raise UserError("--sha256 must be 64 hex characters")
    folder = data_lib.fetch(url, sha256, dest)
    console.print(f"data ready in {folder}")
