"""Gaps between two board rows, task by task and for the macro, with the test that fits their seeds.

The statistics live in ``antlm_bench.results.stats``; this module only lines the two rows up:
- the design comes from the seeds on each side (``stats.choose_design``): same-seed, paired-seeds, welch, pooled
  or unknown;
- the item part of the gap's variance is paired by item when both cells have item tables for the same items
  (``stats.item_variance_of_difference``), else the two cells' item variances add (conservative: scores of two
  models on the same items correlate positively);
- the macro's gap uses each run's macro (mean of its task scores), and its item part is the sum of the tasks'
  item parts over T^2 (disjoint items);
- with ``holm`` the p-values of one row's comparisons (tasks and macro) are Holm-adjusted together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from antlm_bench.results.leaderboard.definition import MACRO
from antlm_bench.results.leaderboard.model import BoardRow, Cell, Comparison
from antlm_bench.results.stats import ItemMatrix, choose_design, difference, item_variance_of_difference, shared_items
from antlm_bench.results.stats import holm as holm_adjust

_ITEM_DESIGN = {"same-seed": "same-seed", "paired-seeds": "paired-seeds"}  # else: seeds unpaired


@dataclass
class _Sides:
    """Two cells' per-seed values, lined up by seed label when the design pairs seeds."""

    a: list[float]
    b: list[float]
    order_a: list[int]
    order_b: list[int]


def _line_up(a: Cell, b: Cell, design: str) -> _Sides:
    if design in _ITEM_DESIGN:
        labels = sorted(a.seed_labels)
        order_a = [a.seed_labels.index(label) for label in labels]
        order_b = [b.seed_labels.index(label) for label in labels]
    else:
        order_a, order_b = list(range(a.n_seeds)), list(range(b.n_seeds))
    return _Sides([a.seed_values[i] for i in order_a], [b.seed_values[i] for i in order_b], order_a, order_b)


def _item_part(a: Cell, b: Cell, sides: _Sides, design: str) -> tuple[float | None, bool, int]:
    """(item variance of a - b, paired by item?, items paired)."""
    if a.items is not None and b.items is not None and set(a.items) == set(b.items):
        left = {s: _reordered(m, sides.order_a) for s, m in a.items.items()}
        right = {s: _reordered(m, sides.order_b) for s, m in b.items.items()}
        if shared_items(left, right):
            variance = item_variance_of_difference(left, right, _ITEM_DESIGN.get(design, "unpaired-seeds"))
            return variance, True, shared_items(left, right)
    if a.item_var is None or b.item_var is None:
        return None, False, 0
    return a.item_var + b.item_var, False, 0


def _reordered(matrix: ItemMatrix, order: list[int]) -> ItemMatrix:
    return ItemMatrix(matrix.ids, matrix.correct[order], matrix.groups)


def compare_cells(a: Cell, b: Cell, alpha: float = 0.05, same_configuration: bool = False,
                  seed_sd: float | None = None) -> tuple[Comparison, float | None]:
    """The gap a - b of one column (row keys left empty) and its item variance (for the macro)."""
    design = choose_design(a.seed_labels, b.seed_labels, same_configuration, seed_sd)
    sides = _line_up(a, b, design)
    item_var, paired, n_items = _item_part(a, b, sides, design)
    scoring = a.scoring if a.scoring == b.scoring else f"{a.scoring} vs {b.scoring}"
    return _comparison(sides, item_var, design, paired, n_items, scoring, alpha, seed_sd), item_var


def _comparison(sides: _Sides, item_var: float | None, design: str, paired: bool, n_items: int, scoring: str,
                alpha: float, seed_sd: float | None) -> Comparison:
    delta = float(np.mean(sides.a) - np.mean(sides.b))
    if item_var is None and design in ("same-seed", "unknown"):
        return Comparison((), (), "", delta, None, None, None, paired, n_items, None, scoring, "",
                          note="no interval on one side")
    d = difference(sides.a, sides.b, item_var or 0.0, design, alpha, seed_sd)
    significant = None if d.p_value is None else d.p_value < alpha
    return Comparison((), (), "", d.delta, d.low, d.high, d.p_value, paired, n_items, significant, scoring, design,
                      d.mde, d.p_value, d.note)


def compare(a: BoardRow, b: BoardRow, columns: Sequence[str], macro_columns: Sequence[str], alpha: float = 0.05,
            same_configuration: bool = False, seed_sd: float | None = None, holm: bool = False) -> list[Comparison]:
    """Gaps a - b for every column both rows have, and for the macro (when both have one)."""
    out: list[Comparison] = []
    item_vars: dict[str, float | None] = {}
    for column in columns:
        if column not in a.cells or column not in b.cells:
            continue
        comparison, item_vars[column] = compare_cells(a.cells[column], b.cells[column], alpha, same_configuration,
                                                      seed_sd)
        comparison.row, comparison.reference, comparison.column = a.key, b.key, column
        out.append(comparison)
    if a.macro is not None and b.macro is not None and all(c in item_vars for c in macro_columns):
        design = choose_design(a.macro.seed_labels, b.macro.seed_labels, same_configuration, seed_sd)
        sides = _line_up(a.macro, b.macro, design)
        parts = [item_vars[c] for c in macro_columns]
        item_var = None if None in parts else sum(parts) / len(parts) ** 2
        paired = all(c.paired for c in out if c.column in macro_columns)
        n_items = sum(c.n_items for c in out if c.column in macro_columns) if paired else 0
        comparison = _comparison(sides, item_var, design, paired, n_items, "auto", alpha, seed_sd)
        comparison.row, comparison.reference, comparison.column = a.key, b.key, MACRO
        out.append(comparison)
    if holm:
        apply_holm(out, alpha)
    return out


def apply_holm(comparisons: list[Comparison], alpha: float) -> None:
    """Holm-adjust the p-values of one family of comparisons in place; significance follows the adjusted p."""
    adjusted = holm_adjust([c.p_raw for c in comparisons])
    for comparison, p in zip(comparisons, adjusted):
        comparison.p_value = p
        comparison.significant = None if p is None else p < alpha

