"""Gaps between two board rows, task by task and for the macro, with the test that fits their seeds.

The statistics live in ``antlm_bench.results.stats``; this module only lines the two rows up:
- one instrument per comparison (``comparability``: scoring method, tokens of a per-token loss, items): two cells
  measured by different instruments are never tested against each other, and the comparison carries the typed
  reason (``check`` refuses them outright, and conventions and evaluation sets before that);
- the design comes from the seeds on each side (``stats.choose_design``): same-seed only for the same networks
  (equal weights digests, seed for seed), paired-seeds, welch, pooled (a one-seed side with a seed SD of
  its own configuration: given, or recorded from >= 3 seeds of the same configuration fingerprint) or unknown;
- the item part of the gap's variance is paired by item when both cells have item tables for the same items
  (``stats.item_variance_of_difference``), else the two cells' item variances add (conservative: scores of two
  models on the same items correlate positively);
- the macro's gap uses each run's macro (mean of its task scores), and its item part is the sum of the tasks'
  item parts over T^2 (disjoint items);
- Holm's correction runs over a stated family (``FAMILIES``): each row's comparisons, or the board's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from antlm_bench.results.leaderboard.comparability import (
    Incomparable,
    InstrumentDifference,
    instrument_difference,
    macro_difference,
)
from antlm_bench.results.leaderboard.definition import MACRO
from antlm_bench.results.leaderboard.model import BoardRow, Cell, Comparison
from antlm_bench.results.stats import (
    ItemMatrix,
    SeedSD,
    choose_design,
    difference,
    item_variance_of_difference,
    recorded_seed_sd,
    shared_items,
)
from antlm_bench.results.stats import holm as holm_adjust

# the Holm family of a set of gaps: none, each row's comparisons (tasks and macro), or every gap on the board
FAMILIES = ("none", "row", "board")
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


def same_networks(a: Cell, b: Cell) -> bool:
    """Every seed of ``a`` is the same network as the seed of ``b`` with its label: both record weights digests
    (runs.identity) and they are equal. A missing digest is a seed draw, whatever the seed number says."""
    if sorted(a.seed_labels) != sorted(b.seed_labels) or len(a.seed_digests) != len(a.seed_labels) \
            or len(b.seed_digests) != len(b.seed_labels):
        return False
    b_of = dict(zip(b.seed_labels, b.seed_digests))
    return all(fp is not None and b_of.get(label) == fp for label, fp in zip(a.seed_labels, a.seed_digests))


def configuration_seed_sd(a: Cell, b: Cell, same_configuration: bool, given: SeedSD | None) -> SeedSD | None:
    """The seed SD a one-seed side may be tested with: ``given`` (--seed-sd), else, when both rows are provably
    one configuration, the SD of the other side's own >= 3 seeds; never another configuration's."""
    if given is not None:
        return given
    if not same_configuration or min(a.n_seeds, b.n_seeds) != 1:
        return None
    return recorded_seed_sd(b.seed_values if a.n_seeds == 1 else a.seed_values)


def compare_cells(a: Cell, b: Cell, alpha: float = 0.05, same_configuration: bool = False,
                  seed_sd: SeedSD | None = None) -> tuple[Comparison, float | None]:
    """The gap a - b of one column (row keys left empty) and its item variance (for the macro).

    ``same_configuration``: both rows record one and the same configuration fingerprint; ``seed_sd``: given by
    the user. Cells measured by two instruments are not tested (``comparability``: a comparison of instruments,
    not of models).
    """
    sd = configuration_seed_sd(a, b, same_configuration, seed_sd)
    design = choose_design(a.seed_labels, b.seed_labels, same_networks(a, b), sd is not None)
    sides = _line_up(a, b, design)
    item_var, paired, n_items = _item_part(a, b, sides, design)
    different = instrument_difference(a, b)
    if different is not None:
        return _not_tested(sides, different.detail if different.reason is Incomparable.SCORING else a.scoring, different), None
    return _comparison(sides, item_var, design, paired, n_items, a.scoring, alpha, sd), item_var


def _not_tested(sides: _Sides, scoring: str, different: InstrumentDifference) -> Comparison:
    """Two different instruments: the difference of the means is shown, and no test is made."""
    delta = float(np.mean(sides.a) - np.mean(sides.b))
    return Comparison((), (), "", delta, None, None, None, False, 0, None, scoring, "", note=different.note,
                      incomparable=different.reason)


def _comparison(sides: _Sides, item_var: float | None, design: str, paired: bool, n_items: int, scoring: str,
                alpha: float, seed_sd: SeedSD | None) -> Comparison:
    delta = float(np.mean(sides.a) - np.mean(sides.b))
    if item_var is None and design in ("same-seed", "unknown"):
        return Comparison((), (), "", delta, None, None, None, paired, n_items, None, scoring, "",
                          note="no interval on one side")
    d = difference(sides.a, sides.b, item_var or 0.0, design, alpha, seed_sd)
    significant = None if d.p_value is None else d.p_value < alpha
    return Comparison((), (), "", d.delta, d.low, d.high, d.p_value, paired, n_items, significant, scoring, design,
                      d.mde, d.p_value, d.note)


def same_configuration(a: BoardRow, b: BoardRow) -> bool:
    """Both rows are provably one configuration: every run of both records the same configuration fingerprint."""
    return a.configuration is not None and a.configuration == b.configuration


def compare(a: BoardRow, b: BoardRow, columns: Sequence[str], macro_columns: Sequence[str], alpha: float = 0.05,
            seed_sd: SeedSD | None = None, family: str = "none") -> list[Comparison]:
    """Gaps a - b for every column both rows have, and for the macro (when both have one); ``family="row"``
    Holm-adjusts them together (a board's family is adjusted by its builder)."""
    out: list[Comparison] = []
    item_vars: dict[str, float | None] = {}
    differences: dict[str, InstrumentDifference | None] = {}
    one_configuration = same_configuration(a, b)
    for column in columns:
        if column not in a.cells or column not in b.cells:
            continue
        comparison, item_vars[column] = compare_cells(a.cells[column], b.cells[column], alpha, one_configuration,
                                                      seed_sd)
        differences[column] = instrument_difference(a.cells[column], b.cells[column])
        comparison.row, comparison.reference, comparison.column = a.key, b.key, column
        comparison.metric = a.cells[column].metric
        out.append(comparison)
    if a.macro is not None and b.macro is not None and all(c in item_vars for c in macro_columns):
        sd = configuration_seed_sd(a.macro, b.macro, one_configuration, seed_sd)
        design = choose_design(a.macro.seed_labels, b.macro.seed_labels, same_networks(a.macro, b.macro),
                               sd is not None)
        sides = _line_up(a.macro, b.macro, design)
        parts = [item_vars[c] for c in macro_columns]
        item_var = None if None in parts else sum(parts) / len(parts) ** 2
        paired = all(c.paired for c in out if c.column in macro_columns)
        n_items = sum(c.n_items for c in out if c.column in macro_columns) if paired else 0
        different = macro_difference([d for c in macro_columns if (d := differences.get(c)) is not None],
                                     a.macro, b.macro)
        if different is not None:
            comparison = _not_tested(sides, "auto", different)
        else:
            comparison = _comparison(sides, item_var, design, paired, n_items, "auto", alpha, sd)
        comparison.row, comparison.reference, comparison.column = a.key, b.key, MACRO
        out.append(comparison)
    if family == "row":
        apply_holm(out, alpha)
    return out


def apply_holm(comparisons: list[Comparison], alpha: float) -> None:
    """Holm-adjust the p-values of one family of comparisons in place; significance follows the adjusted p.

    Comparisons without a test (None) are not counted in the family."""
    adjusted = holm_adjust([c.p_raw for c in comparisons])
    for comparison, p in zip(comparisons, adjusted):
        comparison.p_value = p
        comparison.significant = None if p is None else p < alpha

