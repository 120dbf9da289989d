"""Progress output, made one way for every stage: the live bar, the whole lines that stand in for it where nobody
watches a terminal, the lines a stage says as it goes, and the clock they tell time with.

- ``progress_bar(*columns)``: a live rich bar on a terminal (not transient: its last state stays on the screen),
  a ``PlainProgress`` elsewhere, None when disabled (``--quiet``); on stderr unless the caller gives its console.
  A column is a text template in rich's syntax (``"step {task.completed}/{task.total}"``) or one of ``Bar``,
  ``Rate``, ``ELAPSED``, ``REMAINING``, so that no stage imports ``rich.progress``.
- ``PlainProgress``: off a terminal (a CI log, a pipe, ``2> file``), where a live bar prints nothing until the end,
  one whole line per task at most every ``PLAIN_EVERY_S`` seconds and one when it ends. It offers what the stages
  call on a rich bar (``add_task``, ``update``, ``remove_task``, ``console``).
- ``progress_line`` / ``line_printer``: a stage's progress line, printed whole (markup off: a folder named
  ``[x]`` is printed as it is), on a console, on stderr, or to the function a library caller gave.
- ``StatusLine``: one line redrawn in place on a terminal, printed whole when it changes elsewhere (the sweep's
  counts).
- ``clock``: a duration as ``0:01:05``, as rich's own time columns show it.
- ``library_bars_off``: transformers' own bars off for a block (a bar per weight file would bury ours).

Nothing here imports torch or transformers at import time: model-free commands use it.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console

PLAIN_EVERY_S = 30.0  # off a terminal: one progress line per task at most this often (and when it ends)


@dataclass(frozen=True)
class Bar:
    """The bar itself; ``width`` in characters (None: what the line leaves)."""

    width: int | None = None


@dataclass(frozen=True)
class Rate:
    """Units per second, ``unit`` after the number (``"pairs/s"``); empty until rich has a speed."""

    unit: str


ELAPSED = "elapsed"  # time since the task started
REMAINING = "remaining"  # rich's estimate of the time left

Column = str | Bar | Rate


def clock(seconds: float) -> str:
    """``seconds`` as ``H:MM:SS`` (``0:01:05``; hours past 24 keep counting): the one way progress tells time;
    ``?`` for no number (an estimate before anything finished)."""
    if not math.isfinite(seconds):
        return "?"
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def progress_line(text: str, console: Console | None = None) -> None:
    """One progress line, whole: on ``console`` (above a live bar drawn there), else on stderr."""
    if console is None:
        print(text, file=sys.stderr, flush=True)
    else:
        console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)


def line_printer(target: Console | Callable[[str], None] | bool | None) -> Callable[[str], None]:
    """What a stage prints its progress lines with: ``target`` itself when it is a function (a library caller's
    ``lines.append``), whole lines on a console, stderr for ``True``, nothing for ``False`` or ``None``."""
    if target is None or target is False:
        return lambda text: None
    if target is True:
        return progress_line
    if hasattr(target, "print"):
        return lambda text: progress_line(text, target)
    return target


_STDERR: list[Console] = []


def stderr_console() -> Console:
    """The console progress is drawn on unless a caller gives its own (one, so that lines and a bar share it)."""
    if not _STDERR:
        from rich.console import Console

        _STDERR.append(Console(stderr=True, highlight=False))
    return _STDERR[0]


def progress_bar(*columns: Column, console: Console | None = None, enabled: bool = True,
                 plain_line: str | None = None) -> Any:
    """The one way a stage makes a progress bar (``columns``: text templates, ``Bar``, ``Rate``, ``ELAPSED``,
    ``REMAINING``). On a terminal a live rich ``Progress`` (not transient); elsewhere a ``PlainProgress``, whose
    line is ``plain_line`` (a template as the columns', with ``{elapsed}``, ``{left}`` and ``{rate}``) or the
    counting line; None when not ``enabled``. The caller starts and stops it."""
    if not enabled:
        return None
    console = console if console is not None else stderr_console()
    if not console.is_terminal:
        return PlainProgress(console, PLAIN_EVERY_S, plain_line)
    from rich import progress as rp
    from rich.text import Text

    class RateColumn(rp.ProgressColumn):
        def __init__(self, unit: str) -> None:
            super().__init__()
            self.unit = unit

        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.0f} {self.unit}")

    def made(column: Column) -> Any:
        if isinstance(column, Bar):
            return rp.BarColumn(bar_width=column.width)
        if isinstance(column, Rate):
            return RateColumn(column.unit)
        if column == ELAPSED:
            return rp.TimeElapsedColumn()
        if column == REMAINING:
            return rp.TimeRemainingColumn()
        return rp.TextColumn(column)

    return rp.Progress(*map(made, columns), console=console, transient=False)


@dataclass
class PlainTask:
    """A task of a ``PlainProgress``: what rich's ``Task`` offers a template (``task.description``,
    ``task.completed``, ``task.total``, ``task.fields``)."""

    description: str
    total: float | None
    completed: float
    fields: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0  # perf_counter when added
    begun: float = 0.0  # completed when added (a resumed run starts past 0): the rate counts from here
    said: float = 0.0  # when the last line was printed
    finished: bool = False


class PlainProgress:
    """Progress off a terminal: a whole line per task at most every ``every_s`` seconds, and one when the task
    ends; ``line`` is the template of that line (None: the counting line, ``blimp: 30/100 (30%), 2.5/s, 0:00:12
    elapsed, about 0:00:28 left``). Offers what the stages call on a rich ``Progress``."""

    def __init__(self, console: Console, every_s: float, line: str | None = None) -> None:
        self.console = console
        self.every_s = every_s
        self.line = line
        self.tasks: dict[int, PlainTask] = {}
        self._next_id = 0

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def add_task(self, description: str, total: float | None = None, completed: float = 0, **fields: Any) -> int:
        task_id, self._next_id = self._next_id, self._next_id + 1
        now = time.perf_counter()
        self.tasks[task_id] = PlainTask(description, total, completed, dict(fields), now, completed, now)
        return task_id

    def remove_task(self, task_id: int) -> None:
        self.tasks.pop(task_id, None)

    def update(self, task_id: int, advance: float | None = None, completed: float | None = None,
               **fields: Any) -> None:
        task = self.tasks.get(task_id)
        if task is None:
            return
        task.completed = completed if completed is not None else task.completed + (advance or 0.0)
        task.fields.update(fields)
        now = time.perf_counter()
        finished = task.total is not None and task.completed >= task.total
        if finished and task.finished:
            return
        if finished or now - task.said >= self.every_s:
            task.said, task.finished = now, finished
            progress_line(self._text(task, now), self.console)

    def _text(self, task: PlainTask, now: float) -> str:
        elapsed = now - task.started
        rate = (task.completed - task.begun) / elapsed if elapsed > 0 else 0.0
        total, done = task.total, task.completed
        left = clock((total - done) / rate) if total and rate > 0 and done < total else None
        if self.line is not None:
            return self.line.format(task=task, elapsed=clock(elapsed), rate=rate,
                                    left=left or ("0:00:00" if total and done >= total else "?"))
        shown = f"{done:,.0f}" + (f"/{total:,.0f} ({100 * done / total:.0f}%)" if total else "")
        return (f"{task.description}: {shown}, {rate:,.1f}/s, {clock(elapsed)} elapsed"
                + (f", about {left} left" if left else ""))


class StatusLine:
    """One line that changes as work goes on (the sweep's counts): redrawn in place on a terminal; anywhere else
    (a CI log, a file, ``| grep``) printed whole when it changes, never a carriage return."""

    def __init__(self, stream: TextIO | None = None, terminal: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self._last: str | None = None

    def show(self, text: str, key: str | None = None, force: bool = False) -> None:
        """Redraw (terminal) or print when ``key`` (default: the text; a part that matters, e.g. the counts
        without a moving ETA) changed, or when ``force``."""
        key = text if key is None else key
        if self.terminal:
            self.stream.write("\r\x1b[2K" + text)
            self.stream.flush()
        elif force or key != self._last:
            self.stream.write(text + "\n")
            self.stream.flush()
        self._last = key

    def finish(self, text: str) -> None:
        """The last state, ending the redrawn line (elsewhere its last change was printed already)."""
        if self.terminal:
            self.stream.write("\r\x1b[2K" + text + "\n")
            self.stream.flush()


@contextlib.contextmanager
def library_bars_off() -> Iterator[None]:
    """transformers' own progress bars ("Loading weights", "Writing model shards") off for the block and as they
    were after it: a bar per file would bury the stage's own line. Called where transformers is loaded already."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()


__all__ = ["ELAPSED", "PLAIN_EVERY_S", "REMAINING", "Bar", "PlainProgress", "PlainTask", "Rate", "StatusLine",
           "clock", "library_bars_off", "line_printer", "progress_bar", "progress_line", "stderr_console"]
