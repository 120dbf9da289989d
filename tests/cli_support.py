"""Shared by the CLI tests: run ``antlm-bench`` in-process as a user would, exit code and output captured."""

from __future__ import annotations

import sys

from antlm_bench.cli import main


def run_cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``antlm-bench ARGS`` run through ``main()`` (its error handling included)."""
    monkeypatch.setattr(sys, "argv", ["antlm-bench", *args])
    code = 0
    try:
        main()
    except SystemExit as exit_:
        code = exit_.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err
