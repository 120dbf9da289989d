"""The board's data classes: a cell, a row, a gap, the board."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from antlm_bench.leaderboard.definition import LeaderboardDefinition

# ----------------------------------------------------------------------------------------------------------
# the leaderboard's data


@dataclass
class ItemSet:
    """Per-item correctness of one cell, averaged over the row's seeds: subtask -> (ids, correct, groups)."""

    subtasks: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]]

    def n_items(self) -> int:
        return int(sum(ids.size for ids, _, _ in self.subtasks.values()))


@dataclass
class Cell:
    value: float
    low: float | None
    high: float | None
    spread: float | None  # sample standard deviation over seeds
    n_seeds: int
    scoring: str
    n: int = 0
    interval: str = ""  # "items", "rows" or "tasks" (macro from task intervals)
    items: ItemSet | None = None
    seed_values: list[float] = field(default_factory=list)
    seed_runs: list[str] = field(default_factory=list)  # the run of each seed value


@dataclass
class CurvePoint:
    phase_index: int | None
    epoch: float | None
    tokens_seen: float | None
    value: float
    scoring: str


@dataclass
class BoardRow:
    key: tuple[str, ...]
    run_ids: list[str]
    cells: dict[str, Cell]
    macro: Cell | None
    curves: dict[str, list[CurvePoint]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    row: tuple[str, ...]
    reference: tuple[str, ...]
    column: str
    delta: float  # row - reference, fraction
    low: float | None
    high: float | None
    p_value: float | None
    paired: bool
    n_items: int
    significant: bool | None
    scoring: str = ""


@dataclass
class Leaderboard:
    definition: LeaderboardDefinition
    group_by: list[str]
    columns: list[str]
    macro_columns: list[str]
    rows: list[BoardRow]
    comparisons: list[Comparison]
    reference: tuple[str, ...] | None
    alpha: float
    notes: list[str]
    created_at: str


