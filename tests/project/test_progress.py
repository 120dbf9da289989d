"""Progress output, one way for every stage (``antlm_bench.progress``): the bar and the plain lines that stand in
for it off a terminal, a stage's lines, the sweep's status line, the clock; and a check that every stage uses it."""

from __future__ import annotations

import ast
import io
import subprocess
import sys

import pytest
from rich.console import Console
from test_layout import PACKAGE, ROOT

from antlm_bench import progress
from antlm_bench.progress import (
    ELAPSED,
    REMAINING,
    Bar,
    PlainProgress,
    Rate,
    StatusLine,
    clock,
    line_printer,
    progress_bar,
    progress_line,
)


def _piped() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    console = Console(file=buffer, width=200)
    assert not console.is_terminal
    return console, buffer


def test_clock_is_hours_minutes_seconds():
    assert [clock(s) for s in (0, 5.4, 65, 3599.6, 90_000)] == ["0:00:00", "0:00:05", "0:01:05", "1:00:00",
                                                                 "25:00:00"]
    assert clock(-3) == "0:00:00" and clock(float("nan")) == "?" and clock(float("inf")) == "?"


def test_progress_off_a_terminal_is_whole_lines_now_and_then(monkeypatch):
    """A CI log or a pipe gets a plain line per task at most every 30 s, and one when the task ends."""
    console, buffer = _piped()
    ticks = iter([0.0, 1.0, 31.0, 32.0, 40.0, 41.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(ticks))
    bar = PlainProgress(console, 30.0)
    task = bar.add_task("blimp", total=100)  # t=0
    bar.update(task, advance=10)  # t=1: too soon
    bar.update(task, advance=20)  # t=31: a line
    bar.update(task, advance=20)  # t=32: too soon
    bar.update(task, completed=100)  # t=40: finished, a line
    bar.update(task, completed=100)  # t=41: finished already, no second line
    lines = buffer.getvalue().splitlines()
    assert lines == ["blimp: 30/100 (30%), 1.0/s, 0:00:31 elapsed, about 0:01:12 left",
                     "blimp: 100/100 (100%), 2.5/s, 0:00:40 elapsed"]


def test_a_removed_task_frees_no_id_another_task_holds(monkeypatch):
    console, buffer = _piped()
    bar = PlainProgress(console, 0.0)
    first, second = bar.add_task("a", total=2), bar.add_task("b", total=2)
    bar.remove_task(first)
    third = bar.add_task("c", total=2)
    assert third not in (first, second)
    bar.update(second, completed=2)
    assert buffer.getvalue().startswith("b: 2/2")


def test_a_bar_line_template_counts_its_rate_from_where_it_started(monkeypatch):
    """Training's line: its own fields, and the time left from the steps done since this process started (a
    resumed run starts at its resume point, not at 0)."""
    console, buffer = _piped()
    ticks = iter([100.0, 110.0, 120.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(ticks))
    bar = PlainProgress(console, 5.0, "step {task.completed}/{task.total} ({task.fields[phase]}), loss "
                                      "{task.fields[loss]}, about {left} left, {elapsed} elapsed")
    task = bar.add_task("train", total=400, completed=200, phase="", loss="-")
    bar.update(task, completed=210, phase="phase 1/2 MLM", loss="3.2100")  # 10 steps in 10 s: 190 s left
    bar.update(task, completed=400, loss="2.0000")
    assert buffer.getvalue().splitlines() == [
        "step 210/400 (phase 1/2 MLM), loss 3.2100, about 0:03:10 left, 0:00:10 elapsed",
        "step 400/400 (phase 1/2 MLM), loss 2.0000, about 0:00:00 left, 0:00:20 elapsed"]


def test_progress_bar_is_none_when_quiet_plain_off_a_terminal_and_live_on_one():
    console, _ = _piped()
    assert progress_bar("{task.description}", Bar(), console=console, enabled=False) is None
    assert isinstance(progress_bar("{task.description}", Bar(), console=console), PlainProgress)
    assert isinstance(progress_bar("{task.description}"), PlainProgress)  # stderr under pytest: no terminal
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=120, color_system=None)
    live = progress_bar("{task.description}", Bar(10), "{task.completed:,.0f}/{task.total:,.0f}", Rate("pairs/s"),
                        ELAPSED, "ETA", REMAINING, console=terminal)
    from rich.progress import Progress

    assert isinstance(live, Progress) and not live.live.transient  # its last state stays on the screen
    task = live.add_task("blimp", total=2000)
    live.update(task, completed=1500)
    terminal.print(live.get_renderable())
    shown = screen.getvalue()
    assert shown.startswith("blimp") and "1,500/2,000" in shown and "ETA" in shown and "\n" == shown[-1]


def test_a_stage_line_goes_where_its_target_says(capsys):
    said: list[str] = []
    line_printer(said.append)("one")
    line_printer(None)("two")
    line_printer(False)("three")
    line_printer(True)("four [bold]x[/bold]")
    console, buffer = _piped()
    line_printer(console)("five [bold]x[/bold] :smile:")
    progress_line("six")
    assert said == ["one"]
    assert capsys.readouterr().err == "four [bold]x[/bold]\nsix\n"
    assert buffer.getvalue() == "five [bold]x[/bold] :smile:\n"  # markup and emoji codes printed as text


def test_a_status_line_prints_whole_lines_when_it_changes_off_a_terminal():
    log = io.StringIO()
    line = StatusLine(log, terminal=False)
    line.show("2 done, ETA 0:01:00", key="2 done")
    line.show("2 done, ETA 0:00:50", key="2 done")  # only the ETA moved
    line.show("2 done, ETA 0:00:50", key="2 done", force=True)
    line.show("3 done")
    line.finish("3 done")
    assert log.getvalue() == "2 done, ETA 0:01:00\n2 done, ETA 0:00:50\n3 done\n"
    screen = io.StringIO()
    line = StatusLine(screen, terminal=True)
    line.show("1 done")
    line.show("1 done")
    line.finish("2 done")
    assert screen.getvalue() == "\r\x1b[2K1 done\r\x1b[2K1 done\r\x1b[2K2 done\n"


def test_the_module_imports_no_model_library_and_no_bar_until_one_is_made():
    code = ("import sys, antlm_bench.progress\n"
            "heavy = [m for m in ('torch', 'transformers', 'rich.progress') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# what only antlm_bench/progress.py may do: build a bar or a live line, or turn a library's bars off
BAR_MODULES = ("rich.progress", "rich.live", "tqdm")
BAR_CALLS = ("disable_progress_bar", "enable_progress_bar")
REDRAW = "\r\x1b[2K"


def progress_made_by_hand(source: str) -> list[str]:
    """What in ``source`` builds progress output other than through antlm_bench.progress: an import of a bar
    library, a call turning a library's bars on or off, a line redrawn in place."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
            found += [f"{node.lineno}: imports {n}" for n in names if n in BAR_MODULES or n.startswith("tqdm.")]
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: imports {a.name}" for a in node.names
                      if a.name in BAR_MODULES or a.name.startswith("tqdm.")]
        elif isinstance(node, ast.Attribute) and node.attr in BAR_CALLS:
            found.append(f"{node.lineno}: {node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and REDRAW in node.value:
            found.append(f"{node.lineno}: redraws a line")
    return found


@pytest.mark.parametrize("source", [
    "from rich.progress import Progress\n", "from rich import progress as rp\n", "import tqdm\n",
    "from tqdm.auto import tqdm\n", "def f():\n    from rich.live import Live\n",
    "hf_logging.disable_progress_bar()\n", "stream.write('\\r\\x1b[2K' + text)\n"])
def test_hand_made_progress_is_found(source):
    assert progress_made_by_hand(source)


def test_hand_made_progress_finds_nothing_in_ordinary_code():
    assert progress_made_by_hand("from antlm_bench.progress import progress_bar\nimport rich.console\n"
                                 "from rich.console import Console\nx = 'progress'\n") == []


def test_every_stage_makes_progress_through_the_one_home():
    """No module but antlm_bench/progress.py builds a bar, redraws a line or switches a library's bars: the
    columns, the plain lines off a terminal, --quiet and the stream are decided in one place."""
    found = [f"{path.relative_to(ROOT)}:{where}" for path in sorted(PACKAGE.rglob("*.py"))
             if path != PACKAGE / "progress.py"
             for where in progress_made_by_hand(path.read_text(encoding="utf-8"))]
    assert not found, "use antlm_bench.progress: " + ", ".join(found)
