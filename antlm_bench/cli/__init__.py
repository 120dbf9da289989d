"""``antlm-bench``: a thin command layer over the library. Each module below adds its commands to ``app``."""

from __future__ import annotations

import os
import sys

from rich.markup import escape

from antlm_bench.cli.app import app, err_console
from antlm_bench.errors import UserError

# importing a command module registers its commands
from antlm_bench.cli import catalog, data, eval, prepare, schedule, leaderboard, check, train, run  # noqa: E402,F401  isort: skip


def main() -> None:
    """Entry point: a UserError is one red line and exit status 2, never a traceback."""
    # our own progress bars say what is loading; transformers' per-file weight-loading bars would interleave
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        app()
    except UserError as err:
        err_console.print(f"[red]error:[/red] {escape(str(err))}", soft_wrap=True)
        # errors that point into a line of input (a bad schedule) show that line and a caret below the message
        for line in getattr(err, "context_lines", None) or []:
            err_console.print("  " + line, markup=False, highlight=False, soft_wrap=True)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/yellow]")
        sys.exit(130)


__all__ = ["app", "main"]
