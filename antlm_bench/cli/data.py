"""``antlm-bench data``: verify, fetch and locate evaluation and pre-training data."""

from __future__ import annotations

from pathlib import Path

import typer

from antlm_bench import data as data_lib
from antlm_bench.cli.app import app, console, flag
from antlm_bench.cli.paths import input_file, output_folder, path_text
from antlm_bench.config import DataConfig
from antlm_bench.errors import UserError

data_app = typer.Typer(help="Locate, verify and fetch data.", no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("where")
def where(data_dir: Path | None = flag(DataConfig, "data_dir")) -> None:
    """Print the data folder that commands will use."""
    console.print(str(data_lib.resolve_data_dir(data_dir)))


@data_app.command("verify")
def verify(
    data_dir: Path | None = flag(DataConfig, "data_dir"),
    manifest: Path | None = typer.Option(None, callback=input_file, parser=path_text, metavar="<path>",
                                         help="sha256sum-style manifest (default: DATA/MANIFEST.sha256)."),
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
    names: list[str] | None = typer.Argument(None, help="Known sources or groups to fetch, e.g. babylm (all the "
                                             "quickstart needs), babylm-eval, blimp, ewok; see `data sources`."),
    url: str | None = typer.Option(None, help="Instead of NAME: the URL of a .zip or .tar(.gz/.xz) archive of a "
                                   "data folder."),
    sha256: str | None = typer.Option(None, help="With --url: the archive's expected sha256; the download fails "
                                      "on mismatch."),
    dest: Path | None = typer.Option(None, callback=output_folder, parser=path_text, metavar="<path>",
                                     help="Data folder to fill (default: ~/.cache/antlm-bench/data, where "
                                     "commands look when no --data-dir or $ANTLM_BENCH_DATA is given)."),
    mirror: str | None = typer.Option(None, help="Fetch NAME's files from this server instead of "
                                      "https://raw.githubusercontent.com (same paths, same checksums; also "
                                      "$ANTLM_BENCH_MIRROR)."),
) -> None:
    """Download data into the data folder: known sources by NAME (pinned files, each checked against its git blob
    SHA-1 before it is kept), or any archive with --url (resumable, verified, unpacked atomically)."""
    if url is not None:
        if names:
            raise UserError("data fetch: give NAME or --url, not both")
        if sha256 is not None and len(sha256) != 64:
            raise UserError("--sha256 must be 64 hex characters")
        folder = data_lib.fetch(url, sha256, dest)
        console.print(f"data ready in {folder}")
        return
    if not names:
        from antlm_bench.data.sources import GROUPS, source_names

        raise UserError("data fetch: name what to fetch, e.g. `antlm-bench data fetch babylm`; known: "
                        f"{', '.join([*GROUPS, *source_names()])} (or pass --url URL)")
    if sha256 is not None:
        raise UserError("--sha256 goes with --url; known sources carry their own checksums")
    from antlm_bench.data.sources import fetch_sources

    report = fetch_sources(names, dest, mirror)
    console.print(f"data ready in {report.dest} (fetched: {', '.join(report.fetched) or 'nothing new'}"
                  + (f"; already there: {', '.join(report.kept)}" if report.kept else "") + ")", soft_wrap=True)
    default = data_lib.default_cache_dir()
    if dest is not None and report.dest != default:
        console.print(f"use it with --data-dir {report.dest} or export ANTLM_BENCH_DATA={report.dest}",
                      soft_wrap=True)


@data_app.command("sources")
def sources() -> None:
    """The known sources `data fetch NAME` can bring: files, repository and commit, and the groups."""
    from rich.table import Table

    from antlm_bench.data.sources import DESCRIPTIONS, GROUPS, load_registry

    files = load_registry()
    table = Table(title="known data sources (every file pinned to a commit and checked by its git blob SHA-1)")
    for column in ("name", "files", "what", "from"):
        table.add_column(column)
    for group, members in GROUPS.items():
        table.add_row(group, "", "group: " + ", ".join(members), "")
    for name in dict.fromkeys(f.source for f in files):
        members = [f for f in files if f.source == name]
        origins = sorted({f"{f.repo}@{f.commit[:8]}" for f in members})
        table.add_row(name, str(len(members)), DESCRIPTIONS.get(name, ""), ", ".join(origins))
    console.print(table)
