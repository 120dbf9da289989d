"""The CLI's output when it is not a terminal (CI logs, ``| grep``): whole lines, and ``--json`` for scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from antlm_bench.cli.app import PIPE_WIDTH, WholeLineConsole


def _piped(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([sys.executable, "-m", "antlm_bench", *args], capture_output=True, text=True, env=env,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_list_models_piped_keeps_whole_names_and_json_parses():
    table = _piped("list", "models")
    assert table.returncode == 0, table.stderr
    lines = [line for line in table.stdout.splitlines() if "antlm-babyllama" in line]
    assert len(lines) >= 3, table.stdout  # tiny, small, paper: grep finds the recipe on every preset's line
    assert "…" not in table.stdout
    assert any("4_CLM+16_MLM+4_CLM" in line and "tiny" in line for line in lines)
    listed = _piped("list", "models", "--json")
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)
    tiny = next(r for r in records if r["recipe"] == "antlm-babyllama" and r["preset"] == "tiny")
    assert tiny["architecture"] == "babyllama" and isinstance(tiny["parameters"], int) and tiny["parameters"] > 0


def test_list_tasks_json():
    listed = _piped("list", "tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    records = {r["name"]: r for r in json.loads(listed.stdout)}
    assert records["babylm"]["kind"] == "group" and "blimp" in records["babylm"]["members"]
    assert records["glue"]["kind"] == "task" and "mrpc" in records["glue"]["members"]
    assert records["blimp"]["file"].endswith("blimp.yaml")


def test_console_width_follows_the_stream(monkeypatch):
    import io

    monkeypatch.delenv("COLUMNS", raising=False)
    piped = WholeLineConsole(file=io.StringIO())
    assert piped.width == PIPE_WIDTH
    piped.print("x" * 300)
    assert piped.file.getvalue().strip() == "x" * 300  # one line, not four
    monkeypatch.setenv("COLUMNS", "100")
    assert WholeLineConsole(file=io.StringIO()).width == 100  # an explicit width still wins
    terminal = WholeLineConsole(file=io.StringIO(), force_terminal=True, width=90)
    assert terminal.width == 90


@pytest.mark.parametrize("command,param,quiet_value", [("eval", "progress", False), ("train", "no_progress", True),
                                                         ("run", "quiet", True)])
def test_every_long_command_takes_quiet(command, param, quiet_value):
    """eval, train and run all take -q / --quiet for "no progress bars" (they had three spellings)."""
    import typer.main

    from antlm_bench.cli import app

    cli = typer.main.get_command(app).commands[command]
    required = {"eval": ["--model", "m", "--tasks", "blimp"], "train": ["--output", "o"], "run": []}[command]
    for flag in ("-q", "--quiet"):
        context = cli.make_context(command, [*required, flag])
        assert context.params[param] is quiet_value


def test_no_help_text_loses_a_bracketed_word_to_rich_markup():
    """`--help` renders option and command texts as rich markup: a literal ``[label]`` would vanish from the
    screen (``SCHEDULE [label]`` printed as ``SCHEDULE ``); such a bracket must be escaped (``\\[label]``)."""
    import click
    import typer.main
    from rich.text import Text

    from antlm_bench.cli import app

    def texts(command: click.Command, path: str):
        yield path, command.help or ""
        for param in command.params:
            yield f"{path} {param.name}", getattr(param, "help", None) or ""
        for name, sub in getattr(command, "commands", {}).items():
            yield from texts(sub, f"{path} {name}")

    lost = [(where, text) for where, text in texts(typer.main.get_command(app), "antlm-bench")
            if Text.from_markup(text).plain != text.replace("\\[", "[")]
    assert not lost, lost
