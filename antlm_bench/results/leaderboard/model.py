"""The board's data classes: a cell, a row, a gap, the board."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from antlm_bench.results.leaderboard.definition import LeaderboardDefinition
from antlm_bench.results.stats import ItemMatrix

if TYPE_CHECKING:  # comparability reads Cell; the enum is only named here
    from antlm_bench.results.leaderboard.comparability import Incomparable

# ----------------------------------------------------------------------------------------------------------
# the leaderboard's data


@dataclass
class Cell:
    """One configuration on one column: the mean over its seeds, with an interval over seeds and items."""

    value: float
    low: float | None
    high: float | None
    spread: float | None  # sample standard deviation over seeds
    n_seeds: int
    scoring: str
    n: int = 0
    interval: str = ""  # how the interval was made (stats.Estimate.method); "" when there is none
    items: dict[str, ItemMatrix] | None = None  # per-seed correctness (rows in seed_runs order), shared items
    item_var: float | None = None  # item-sampling variance of ``value``; None when unknown
    seed_values: list[float] = field(default_factory=list)
    seed_runs: list[str] = field(default_factory=list)  # the run of each seed value
    seed_labels: list[str] = field(default_factory=list)  # the training seed of each run, for pairing by seed
    # each run's weights digest (runs.identity; None: not recorded); equal on both sides, seed for seed: the same
    # networks
    seed_digests: list[str | None] = field(default_factory=list)
    subtasks: dict[str, str] = field(default_factory=dict)  # subtask -> metric, what ``check`` must find again
    metric: str = "accuracy"  # what the value measures (definition.METRICS: its unit and direction)
    # items per subtask behind the value (a run's --limit; the smallest where seeds differ); None: every item
    limit: int | None = None
    # how the interval met the metric's range (definition.MetricKind.bounds): "" inside it, "clipped" cut at it,
    # "uninformative" wider than the whole range (low and high are then the range's ends)
    bounded: str = ""
    # (recipe, preset, data_hash) shared by every run of the cell, which fix its tokenizer; None when they differ
    tokenizer_key: tuple[str, str, str] | None = None


@dataclass
class CurvePoint:
    phase_index: int | None
    epoch: float | None
    tokens_seen: float | None
    value: float
    scoring: str
    low: float | None = None  # 95% item interval: the mean over the row's seeds of each seed's bounds
    high: float | None = None
    limit: int | None = None  # items per subtask behind the point (--eval-limit of the per-phase scoring)
    n_seeds: int = 1
    words_seen: float | None = None  # mean over the seeds; None unless every seed recorded it


@dataclass
class BoardRow:
    key: tuple[str, ...]
    run_ids: list[str]
    cells: dict[str, Cell]
    macro: Cell | None
    curves: dict[str, list[CurvePoint]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # run_id -> its configuration fingerprint (None: not recorded)
    config_fingerprints: dict[str, str | None] = field(default_factory=dict)

    @property
    def configuration(self) -> str | None:
        """The one configuration fingerprint every run of the row records; None when any is missing or two
        differ (then nothing proves the row's seeds are one configuration)."""
        values = set(self.config_fingerprints.values())
        return next(iter(values)) if len(values) == 1 else None

    @property
    def limit(self) -> int | None:
        """The fewest items per subtask any of the row's numbers stands on (a ``--limit``); None: every item."""
        limits = [cell.limit for cell in self.cells.values() if cell.limit is not None]
        return min(limits) if limits else None

    @property
    def mixed_configurations(self) -> bool:
        """The row's seeds come from more than one configuration fingerprint (a missing one counts as its own)."""
        return len(set(self.config_fingerprints.values())) > 1


@dataclass
class Comparison:
    """The gap row - reference on one column, with the test that fits the seeds on both sides."""

    row: tuple[str, ...]
    reference: tuple[str, ...]
    column: str
    delta: float  # row - reference, fraction
    low: float | None
    high: float | None
    p_value: float | None  # after Holm's correction when the board or check applies it; None: no test
    paired: bool  # paired by item
    n_items: int
    significant: bool | None  # None: no test possible (seed variance unknown, or no interval at all)
    scoring: str = ""
    design: str = ""  # same-seed, paired-seeds, welch, pooled, unknown (stats.inference), or "" without one
    mde: float | None = None  # minimum detectable effect (80% power at alpha), fraction
    p_raw: float | None = None  # before any multiplicity correction
    note: str = ""
    metric: str = "accuracy"  # of both cells (the macro's: accuracy-like, a percentage)
    # why no test was made when the two sides are different instruments (comparability.Incomparable); None: one
    # instrument. Typed so that no reader matches the note's words
    incomparable: Incomparable | None = None


@dataclass
class SignalNoise:
    """How well one column separates the board's rows (Signal and Noise, arXiv 2508.13144; DataDecide, arXiv
    2504.11393), from the rows with >= 2 seeds: ``noise`` the pooled seed SD, ``signal`` the spread of the rows'
    means, their ratio, and per pair of rows the share of seed pairs that order them as their means do."""

    column: str
    metric: str
    rows: int  # rows with >= 2 seeds, the ones counted
    noise: float | None  # pooled within-row seed SD: sqrt(sum (k_r - 1) s_r^2 / sum (k_r - 1))
    signal: float | None  # SD (ddof 1) of the rows' means; None with fewer than 2 rows
    ratio: float | None  # signal / noise
    # (row a, row b, share of a's seeds x b's seeds whose values order a and b as their means do)
    agreement: list[tuple[tuple[str, ...], tuple[str, ...], float]] = field(default_factory=list)


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
    results_as_of: str  # when the newest score row the board shows was written (not when it was rendered)
    family: str = "none"  # the Holm family of the gaps' p-values: none, row or board (compare.FAMILIES)
    signal_noise: list[SignalNoise] = field(default_factory=list)  # per column, see ``signal``
    # the decision lines of the sweeps that decided on these results (``sweep.decision_lines``: read and verified
    # against their tables by the caller, which knows the folders), shown under the board in every text format
    decisions: list[str] = field(default_factory=list)
    # (row key, column) -> the sweep's verdict in words, for each gap a sweep decided (``sweep.swept_gaps``): the
    # gaps table shows such a gap's interval as descriptive, with the sweep's verdict instead of a fixed-sample
    # test (a test re-run on seeds the data chose is not valid, and one comparison gets one verdict)
    swept: dict[tuple[tuple[str, ...], str], str] = field(default_factory=dict)

    @property
    def macro_label(self) -> str:
        """The macro column's name as shown (``definition.macro_label``): "macro" for the paper's four tasks only."""
        from antlm_bench.results.leaderboard.definition import macro_label

        return macro_label(self.macro_columns)

    def column_label(self, column: str) -> str:
        """A column's name as shown: the macro by :attr:`macro_label`, any other by its own name."""
        from antlm_bench.results.leaderboard.definition import MACRO

        return self.macro_label if column == MACRO else column

    def column_metric(self, column: str) -> str:
        """The metric a column's cells measure (the macro: accuracy-like)."""
        return next((row.cells[column].metric for row in self.rows if column in row.cells), "accuracy")


