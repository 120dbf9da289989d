"""The grid of a sweep: recipes x presets x schedules x seeds, each cell exactly one ``antlm-bench run`` cell.

A cell is a typed configuration (:meth:`GridCell.config`, an ``antlm_bench.config.RunConfig``): the sweep's run
options (``base``) with the cell's recipe, preset, schedule, seed and label set, and the sweep's output. Its run folder is the one ``run``
names (``runs.identity.RunIdentity.folder_name``) under the sweep's output, and it runs as ``python -m antlm_bench run
--config <its config file>`` (``sweep.record.SweepFolder.cell_command``): the same folders, content hashes and store
as a ``run`` typed by hand, so a finished cell is reused and an unfinished one resumed by either command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from antlm_bench.config import ModelConfig, OutputConfig, RunConfig
from antlm_bench.errors import UserError
from antlm_bench.options import parse_seeds  # the one seeds grammar (re-exported: sweep files use it)
from antlm_bench.runs.identity import RunIdentity
from antlm_bench.runs.schedule import parse_schedule

# the `run` options each cell's configuration sets (GridCell.config): axes of the grid, never a sweep's run options
GRID_FLAGS = frozenset({"--model", "--preset", "--schedule", "--seeds", "--label", "--output", "--quiet"})
# the label of the negative control's cells (sweep --negative-control): the baseline's configuration again, each
# seed another draw (runs.identity.training_seed), so its true gap to the baseline is zero by construction
NEGATIVE_CONTROL = "negative-control"


def split_top_level(text: str, what: str = "--schedule") -> list[str]:
    """``"A,MIX(CLM:1,MLM:15),B"`` -> ``["A", "MIX(CLM:1,MLM:15)", "B"]``: commas inside parentheses belong to a
    schedule (``MIX(...)``, ``3x(...)``), only the top-level ones separate items."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise UserError(f"{what} {text!r}: ')' at character {i + 1} closes nothing")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise UserError(f"{what} {text!r}: a '(' is never closed")
    items.append(text[start:])
    items = [item.strip() for item in items]
    if not any(items) or any(not item for item in items):
        raise UserError(f"{what} {text!r}: an empty item; separate items by single commas")
    return items


def next_seeds(seeds: Sequence[int], count: int, max_seeds: int) -> list[int]:
    """The next round's seed labels: ``count`` new ones after the largest so far (at most ``max_seeds`` in all).
    Every schedule gets the same labels: seed s is the same initialisation and data order on each side."""
    if count < 1:
        raise UserError(f"--round-seeds {count}: must be at least 1")
    start = max(seeds) + 1
    return list(range(start, start + min(count, max_seeds - len(seeds))))


@dataclass(frozen=True)
class GridCell:
    """One run of the grid. ``base``: the sweep's run options, the same for every cell of the sweep; ``label``:
    ``run --label`` (the negative control's cells), None for the others."""

    recipe: str
    preset: str
    schedule: str  # canonical
    seed: int
    base: RunConfig = field(default_factory=RunConfig, compare=False)
    label: str | None = None

    @cached_property
    def identity(self) -> RunIdentity:
        """Which run the cell is (made once: the record, the pending check, the executor and the log all ask)."""
        return RunIdentity(self.recipe, self.preset, self.schedule, self.seed, self.label)

    @cached_property
    def name(self) -> str:
        """The run folder's name (``run``'s), which also names the cell's log and configuration file."""
        return self.identity.folder_name

    @property
    def row(self) -> str:
        """The board row's schedule name: ``2_CLM``, or ``2_CLM [negative-control]`` for a labelled cell."""
        return self.identity.row

    def config(self, output: Path, seeds: Sequence[int] | None = None) -> RunConfig:
        """What the cell's ``run`` process runs, into the sweep's ``output`` without progress bars; ``seeds``: the
        same configuration for other seeds (the cells of one configuration differ only in their seed)."""
        return self.base.model_copy(update={
            "model": ModelConfig(name=self.recipe, preset=self.preset, schedule=self.schedule),
            "seeds": [self.seed] if seeds is None else list(seeds), "label": self.label,
            "output": OutputConfig(folder=output, quiet=True)})


@dataclass(frozen=True)
class Grid:
    """The resolved grid: every axis canonical, the cells in the order they are run (seed-major, so that a stopped
    sweep has whole seeds of every schedule rather than every seed of one). ``labelled``: (schedule, label) arms
    run beside the schedules, each recipe and preset (the negative control: the baseline under its label)."""

    recipes: tuple[str, ...]
    presets: tuple[str, ...]
    schedules: tuple[str, ...] | None  # None: each recipe's default schedule
    base: RunConfig = field(default_factory=RunConfig, compare=False)
    labelled: tuple[tuple[str, str], ...] = ()

    def cells(self, seeds: Sequence[int], default_schedule: dict[str, str]) -> list[GridCell]:
        """``default_schedule``: recipe -> its default schedule, for a grid without schedules."""
        return [GridCell(recipe, preset, schedule, seed, self.base, label)
                for seed in seeds for recipe in self.recipes for preset in self.presets
                for schedule, label in [*((s, None) for s in (self.schedules if self.schedules is not None
                                                               else (default_schedule[recipe],))),
                                        *self.labelled]]


def canonical_schedules(texts: Sequence[str]) -> tuple[str, ...]:
    """Each schedule in its canonical spelling (what run folders and tables store), duplicates refused."""
    canonical = tuple(parse_schedule(text).canonical for text in texts)
    duplicates = sorted({s for s in canonical if canonical.count(s) > 1})
    if duplicates:
        raise UserError(f"--schedule: {', '.join(duplicates)} given twice (spellings of one schedule count once)")
    return canonical


__all__ = ["GRID_FLAGS", "NEGATIVE_CONTROL", "GridCell", "Grid", "canonical_schedules", "next_seeds", "parse_seeds", "split_top_level"]
