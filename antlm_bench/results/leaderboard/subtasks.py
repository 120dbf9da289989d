"""``leaderboard --subtasks TASK``: one task's subtasks (BLiMP's paradigms, EWoK's domains) down the side, the
board's rows across: where a mean of ~57% hides paradigms at 0% and at 100%, this shows which.

Each cell is the mean over the row's seeds of the subtask's accuracy on the items every seed scored (the cell's
item tables, ``Cell.items``: a run's subtask accuracy is the mean over its items, or over its item clusters where
the task groups them, as the task's own number counts it), with the seed SD. Descriptive: the board's gaps table
tests the task's number; 67 paradigms x rows of per-subtask tests would be a family no reader corrects for.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.markup import escape

from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.model import Leaderboard
from antlm_bench.results.leaderboard.text import key_text

METHOD = ("per subtask: the mean over a row's seeds of the subtask's accuracy on the items every seed scored "
          "(item clusters weighted as the task weights them), ±seed SD where a row has >= 2 seeds; descriptive, no "
          "test (the board's gaps table tests the task's number); rows numbered as on the board")


@dataclass
class SubtaskCell:
    value: float  # mean over seeds, a fraction
    spread: float | None  # sample SD over seeds; None with one seed
    n_items: int


@dataclass
class SubtaskTable:
    task: str
    scoring: str
    rows: list[tuple[int, str]]  # (rank on the board, the row's key text)
    subtasks: list[str]
    cells: dict[tuple[str, int], SubtaskCell]  # (subtask, rank) -> cell


def subtask_table(board: Leaderboard, task: str) -> SubtaskTable:
    """The per-subtask view of ``task`` over ``board``'s rows that hold it with item tables."""
    if task not in board.columns:
        columns = ", ".join(c for c in board.columns if "." not in c) or "none"
        raise UserError(f"--subtasks {task}: no column {task} on this board (its tasks: {columns})")
    rows: list[tuple[int, str]] = []
    cells: dict[tuple[str, int], SubtaskCell] = {}
    scorings: set[str] = set()
    for rank, row in enumerate(board.rows, 1):
        cell = row.cells.get(task)
        if cell is None or not cell.items:
            continue
        rows.append((rank, key_text(board, row.key)))
        scorings.add(cell.scoring)
        for subtask, matrix in cell.items.items():
            per_seed = matrix.clustered().mean(axis=1)
            cells[(subtask, rank)] = SubtaskCell(float(per_seed.mean()),
                                                 float(per_seed.std(ddof=1)) if per_seed.size > 1 else None,
                                                 int(matrix.ids.size))
    if not rows:
        raise UserError(f"--subtasks {task}: no row of this board has item tables for {task} (evaluated with "
                        "items off, or exported without them); re-run `antlm-bench eval` to write them")
    subtasks = sorted({subtask for subtask, _ in cells})
    return SubtaskTable(task, "/".join(sorted(scorings)), rows, subtasks, cells)


def _cell_text(cell: SubtaskCell | None) -> str:
    if cell is None:
        return "-"
    spread = "" if cell.spread is None else f" ±{100 * cell.spread:.1f}"
    return f"{100 * cell.value:.1f}{spread}"


def _legend(table: SubtaskTable) -> list[str]:
    lines = []
    for rank, key in table.rows:
        low, high = subtask_spread(table, rank)
        lines.append(f"#{rank}: {key} ({low} subtask(s) at or below 10%, {high} at or above 90%)")
    return lines


def _title(table: SubtaskTable) -> str:
    return f"{table.task} by subtask (%, {table.scoring})"


def render_subtasks_terminal(table: SubtaskTable, console: Any) -> None:
    from rich.table import Table

    out = Table(title=escape(_title(table)))
    out.add_column("subtask", overflow="fold")
    out.add_column("items", justify="right")
    for rank, _ in table.rows:
        out.add_column(f"#{rank}", justify="right")
    for subtask in table.subtasks:
        counts = {c.n_items for (s, _), c in table.cells.items() if s == subtask}
        out.add_row(escape(subtask), "/".join(map(str, sorted(counts))),
                    *[_cell_text(table.cells.get((subtask, rank))) for rank, _ in table.rows])
    console.print(out)
    for line in [*_legend(table), METHOD]:
        console.print(f"[dim]{escape(line)}[/dim]")


def render_subtasks_markdown(table: SubtaskTable) -> str:
    def md(text: str) -> str:
        return html.escape(text, quote=False).replace("|", "\\|")

    lines = [f"# {md(_title(table))}", "", "| subtask | items | " + " | ".join(f"#{r}" for r, _ in table.rows) + " |",
             "|---|---:|" + "---:|" * len(table.rows)]
    for subtask in table.subtasks:
        counts = {c.n_items for (s, _), c in table.cells.items() if s == subtask}
        lines.append(f"| {md(subtask)} | {'/'.join(map(str, sorted(counts)))} | "
                     + " | ".join(_cell_text(table.cells.get((subtask, rank))) for rank, _ in table.rows) + " |")
    lines += ["", *[f"- {md(line)}" for line in [*_legend(table), METHOD]], ""]
    return "\n".join(lines)


def subtask_spread(table: SubtaskTable, rank: int) -> tuple[int, int]:
    """How many subtasks row ``rank`` scores at or below 10% and at or above 90%: the length-and-frequency
    signature of a model that has not learned the grammar (every pair one way)."""
    values = np.array([c.value for (_, r), c in table.cells.items() if r == rank])
    return int((values <= 0.10).sum()), int((values >= 0.90).sum())
