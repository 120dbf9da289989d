"""The typer application every command module adds itself to, and the shared console."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(
    name="antlm-bench",
    help="Benchmark pre-training schedules (CLM / MLM alternation, AntLM) for small language models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

DataDirOption = typer.Option(
    None, "--data-dir", help="Data folder (default: $ANTLM_BENCH_DATA, then ~/.cache/antlm-bench/data)."
)
IncludePathOption = typer.Option(
    None, "--include-path", help="Extra folder of task specs / trainer recipes, searched before the shipped ones."
)
