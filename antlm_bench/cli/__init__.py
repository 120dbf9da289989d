"""``antlm-bench``: a thin command layer over the library. Each module below adds its commands to ``app``.

- ``app``: the typer application, the consoles, and the one place that turns an error into one line and an exit code;
- ``paths``: the check of a path option against what its command expects, before any work;
- ``train``, ``run``, ``sweep``: pre-train; train per seed and evaluate; a grid of ``run`` cells;
- ``eval``, ``export``: score a model on tasks; write a checkpoint as the BabyLM pipeline loads it;
- ``leaderboard``, ``check``: result tables -> a ranked board; the CI regression gate;
- ``plan``: what a ``sweep --until-decided`` design can decide (power, seeds, CPU-hours), simulated before it runs;
- ``data`` and ``prepare``: verify, fetch and locate data; clean, tokenize and pack a corpus alone;
- ``catalog`` (``list``) and ``schedule``: what the registries hold; a schedule's canonical form and phases.

Most commands import the stages they run inside the command, so that ``--help`` and bad-input errors come fast.
"""

from __future__ import annotations

import os
import sys

from antlm_bench.cli.app import app, err_console, fail

# importing a command module registers its commands
from antlm_bench.cli import catalog, data, eval, prepare, schedule, leaderboard, check, train, run, export, sweep, plan  # noqa: E402,F401  isort: skip


def main() -> None:
    """Entry point: a user mistake is one red line and exit status 2, an environment failure (disk full,
    permission denied) one line and 4, never a traceback. The commands' own failures are reported inside the
    app (``ReportingGroup``); this catches what happens around it."""
    # our own progress bars say what is loading; transformers' per-file weight-loading bars would interleave
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/yellow]")
        sys.exit(130)
    except Exception as err:  # noqa: BLE001  (fail() knows ours; anything else is a bug: its traceback helps)
        exit_ = fail(err)
        if exit_ is None:
            raise
        sys.exit(exit_.code)


__all__ = ["app", "main"]
