"""Text renderings: terminal (rich) and Markdown, and the helpers every renderer shares."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from rich.markup import escape

from antlm_bench import __version__
from antlm_bench.results.leaderboard.comparability import limit_text
from antlm_bench.results.leaderboard.definition import chance_level, metric_kind
from antlm_bench.results.leaderboard.model import BoardRow, Cell, Comparison, Leaderboard

# a board written to a text file is laid out in whole lines, no cell folded or cut: what the CLI prints to a pipe
FILE_WIDTH = 10_000
# the terminal text's widest line where it is not a terminal (a pipe, ``-o board.txt``): compact cells, the
# intervals in their own table, prose wrapped at words (whole lines, the same numbers); ``--wide``: FILE_WIDTH
BOARD_WIDTH = 200

# ----------------------------------------------------------------------------------------------------------
# rendering

def pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.{digits}f}"


def value_text(value: float | None, metric: str = "accuracy", sign: bool = False) -> str:
    """A value in its metric's shown units (``definition.METRICS``): a percentage x100 to 1 decimal, a margin or a
    loss in nats to 3; ``sign``: with + or - (a gap)."""
    if value is None or not math.isfinite(value):
        return "-"
    kind = metric_kind(metric)
    return f"{kind.scale * value:{'+' if sign else ''}.{kind.digits}f}"


def unit_text(metric: str) -> str:
    """``pp`` for a percentage's gap, else the metric's unit (``nats``, ``nats/token``)."""
    unit = metric_kind(metric).unit
    return "pp" if unit == "%" else unit


def cell_text(cell: Cell | None, with_method: bool = True, with_interval: bool = True) -> str:
    """``51.3 [49.0, 53.6] ±0.9 clm``: mean over seeds [95% interval over seeds and items] ±SD over seeds, in the
    cell's metric's units (percentages x100; a margin or a loss in nats).

    A one-seed cell's interval covers the items only and is marked ``(1 seed)``; an interval wider than the
    metric's whole range reads ``[uninformative]``; a number on a subset of the items ends in ``(--limit N)``.
    """
    if cell is None:
        return "-"
    text = value_text(cell.value, cell.metric) + (interval_text(cell) if with_interval else "")
    if cell.spread is not None:
        text += f" ±{value_text(cell.spread, cell.metric)}"
    elif cell.n_seeds == 1:
        text += " (1 seed)"
    if with_method and cell.scoring != "auto":
        text += f" {cell.scoring}"
    if cell.limit is not None:
        text += f" ({limit_text(cell.limit)})"
    return text


def interval_text(cell: Cell) -> str:
    """`` [49.0, 53.6]`` (cut at the metric's range, ``board.bound_interval``), `` [uninformative]`` when the
    interval is wider than the whole range, or nothing without an interval."""
    if cell.low is None or cell.high is None:
        return ""
    if cell.bounded == "uninformative":
        return " [uninformative]"
    return f" [{value_text(cell.low, cell.metric)}, {value_text(cell.high, cell.metric)}]"


def comparison_text(c: Comparison) -> str:
    """``+1.2 [-0.3, +2.7]`` in the metric's gap units (``unit_text``), which are named after the numbers unless
    they are percentage points."""
    text = value_text(c.delta, c.metric, sign=True)
    if c.low is not None and c.high is not None:
        text += f" [{value_text(c.low, c.metric, sign=True)}, {value_text(c.high, c.metric, sign=True)}]"
    unit = unit_text(c.metric)
    return text if unit == "pp" else f"{text} {unit}"


def row_is_better(c: Comparison) -> bool:
    """Whether the gap favours the row over the reference, in the metric's direction (a lower loss is better)."""
    return c.delta < 0 if metric_kind(c.metric).lower_is_better else c.delta > 0


DESIGN_TEXT = {
    "same-seed": "same-seed (same networks)",
    "paired-seeds": "paired by seed",
    "welch": "Welch over seeds",
    "pooled": "seed SD of the configuration",
    "unknown": "1 seed on a side: seed variance unknown",
}


def design_text(c: Comparison) -> str:
    """The comparison's design, and whether its items were paired (GLUE's F1 members never are)."""
    if c.incomparable is not None:
        return c.note
    text = DESIGN_TEXT.get(c.design, "no test")
    if c.design in ("same-seed", "paired-seeds", "welch", "pooled"):
        text += ", paired by item" if c.paired else ", items unpaired"
    return text


def runs_text(row: BoardRow) -> str:
    """How many runs a row pools, marked when they come from more than one configuration fingerprint, and when a
    number of the row stands on a subset of the items."""
    return (f"{len(row.run_ids)}" + (" (mixed configs)" if row.mixed_configurations else "")
            + ("" if row.limit is None else f" ({limit_text(row.limit)})"))


def rank_lines(board: Leaderboard) -> list[str]:
    """How the rows are ranked (``board._rank_key``, the one order every format shows) and what the macro is."""
    if board.macro_columns:
        what = ("the macro (the AntLM paper's four-task mean)" if board.macro_label == "macro"
                else f"{board.macro_label}, the mean of these tasks alone (not the paper's four-task macro)")
        lines = [f"Rows ranked by {what}, best first; rows without one ('-': a task missing) after, by the mean of "
                 "their percentage columns."]
    else:
        lines = ["No macro: this board defines none (a definition's macro_tasks; by default the four AntLM tasks "
                 "when all are on the board). Rows ranked by the mean of their percentage columns, best first (a row "
                 "with none of them: by its first column, in its direction)."]
    if any(row.limit is not None for row in board.rows):
        lines.append("'(--limit N)': the number stands on the first N items of each subtask, not on every item. "
                     "Rows with such a number are ranked after every full evaluation (larger subsets first), and "
                     "their gaps to numbers on other items are not tested: other items, another instrument.")
    return lines


def bound_lines(board: Leaderboard) -> list[str]:
    """What was done to intervals that reached past their metric's range, when any did."""
    bounded = {cell.bounded for row in board.rows for cell in [*row.cells.values(), row.macro] if cell is not None}
    if not bounded - {""}:
        return []
    return [("Intervals are cut at the metric's range (a percentage at 0 and 100, a Spearman correlation at -100 "
             "and 100, a loss at 0; a margin has no range); '[uninformative]': the 95% interval was wider than the "
             "whole range (too few seeds: with 2, Student's t has 1 degree of freedom, 12.7), so it says nothing; "
             "see the Parquet export's ci_low/ci_high and ci_bounds.")]


def is_swept(board: Leaderboard, c: Comparison) -> bool:
    """A sweep decided this gap (``Leaderboard.swept``): its interval is descriptive, its verdict the sweep's."""
    return (c.row, c.column) in board.swept


def is_significant(board: Leaderboard, c: Comparison) -> bool:
    """The gap is shown as a significant fixed-sample result (never one a sweep decided)."""
    return bool(c.significant) and not is_swept(board, c)


def family_text(board: Leaderboard) -> str:
    """Which p-values Holm's correction treated as one family, and how many tests that was."""
    tested = sum(c.p_raw is not None for c in board.comparisons)
    swept = sum(is_swept(board, c) for c in board.comparisons)
    if swept:
        others = tested - sum(is_swept(board, c) and c.p_raw is not None for c in board.comparisons)
        text = (f"{swept} gaps between rows a sweep compared are descriptive here (no p-value, no fixed-sample "
                "verdict: the sweep chose the seeds from the data, and its anytime-valid verdicts under the board "
                "decide them)")
        return text + (f"; the others: {_family_only(board, others)}" if others else "; no other gap is tested")
    return _family_only(board, tested)


def _family_only(board: Leaderboard, tested: int) -> str:
    if board.family == "board":
        return f"p-values Holm-adjusted over the board's {tested} tests (--family board; the intervals are not)"
    if board.family == "row":
        per_row = sorted({sum(c.p_raw is not None for c in board.comparisons if c.row == r.key) for r in board.rows
                          if r.key != board.reference})
        sizes = "/".join(map(str, per_row)) or "0"
        return (f"p-values Holm-adjusted over each row's {sizes} tests (--family row), not over the board's "
                f"{tested}: read a significant gap against the number of rows (the intervals are not adjusted)")
    return f"p-values not adjusted for multiplicity over the board's {tested} tests (--family none)"


def verdict(c: Comparison, board: Leaderboard | None = None) -> str:
    """Whether the gap is significant, and for a significant one which side it favours in words (a loss: lower is
    better, so a negative gap is the row's gain); a gap a sweep decided: descriptive, with the sweep's verdict."""
    if board is not None and is_swept(board, c):
        return f"descriptive; sweep: {board.swept[(c.row, c.column)]}"
    if c.significant is None:
        return f"not tested ({design_text(c)})"
    if not c.significant:
        return f"not significant ({design_text(c)}, {p_text(c.p_value)})"
    better = "row better" if row_is_better(c) else "row worse"
    if metric_kind(c.metric).lower_is_better:
        better += f": {'lower' if c.delta < 0 else 'higher'} {c.metric}, lower is better"
    return f"significant, {better} ({design_text(c)}, {p_text(c.p_value)})"


def mde_text(c: Comparison) -> str:
    return "-" if c.mde is None else value_text(c.mde, c.metric)


def p_text(p: float | None) -> str:
    """Never ``p=0``: a p-value below 0.001 prints as ``p<0.001``."""
    if p is None:
        return "p -"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def shown_keys(board: Leaderboard) -> list[int]:
    """Grouping keys whose value differs between rows; the others (all of them for one row) go in the title."""
    return [i for i in range(len(board.group_by)) if len({r.key[i] for r in board.rows}) > 1]


def common_text(board: Leaderboard) -> str:
    """``recipe=antlm-babyllama, preset=tiny``: the grouping values every row shares."""
    shown = shown_keys(board)
    if not board.rows:
        return ""
    return ", ".join(f"{k}={board.rows[0].key[i]}" for i, k in enumerate(board.group_by)
                     if i not in shown and board.rows[0].key[i])


def key_text(board: Leaderboard, key: tuple[str, ...] | None, full: bool = False) -> str:
    if key is None:
        return "-"
    indices = shown_keys(board)
    if full or not indices:
        indices = range(len(board.group_by))
    return ", ".join(f"{board.group_by[i]}={key[i]}" for i in indices if key[i]) or "(all runs)"


def chance_lines(board: Leaderboard) -> list[str]:
    """Chance next to the scores: the level a guess scores on each column that has one (a minimal pair's accuracy:
    50%; its margin: 0 nats), so that a number at chance is not read as a finding; GLUE has no one chance level
    (each member's majority class is its floor, which ``eval`` and ``run`` print beside its score)."""
    levels: dict[tuple[float, str], list[str]] = {}
    for column in board.columns:
        metric = board.column_metric(column)
        level = chance_level(column, metric)
        if level is not None:
            levels.setdefault((level, metric), []).append(column)
    words = {"accuracy": "a coin flip between a pair's two sentences", "margin": "no preference"}
    parts = [f"{value_text(level, metric)}{'%' if metric_kind(metric).unit == '%' else ' ' + metric_kind(metric).unit} "
             f"on {', '.join(columns)} "
             f"({words.get(metric, 'a guess')})" for (level, metric), columns in levels.items()]
    glue = [c for c in board.columns if c.split(":")[0].split(".")[0] == "glue"]
    if glue:
        parts.append(f"none single on {', '.join(glue)} (each member's majority class is its floor: eval and run "
                     "print it beside the score)")
    if not parts:
        return []
    return [f"Chance: {'; '.join(parts)}. A score whose interval holds its chance level shows nothing learnt."]


def metric_lines(board: Leaderboard) -> list[str]:
    """What the columns that are not percentages measure, and in which units: once per metric on the board."""
    metrics = dict.fromkeys(board.column_metric(c) for c in board.columns)
    out = []
    for metric in metrics:
        kind = metric_kind(metric)
        if kind.unit == "%" and not kind.lower_is_better:
            continue
        columns = ", ".join(c for c in board.columns if board.column_metric(c) == metric)
        out.append(f"{columns}: {kind.words or metric}; shown in {kind.unit} (not a percentage), its gaps in "
                   f"{unit_text(metric)}; never averaged into the macro.")
    return out


def method_lines(board: Leaderboard) -> list[str]:
    """The footnotes every rendering carries: what the numbers are and which method made each."""
    multiplicity = family_text(board)
    units = metric_lines(board)
    return [
        ("Scores are percentages unless a line below says otherwise: mean over seeds [95% interval] ±standard "
         "deviation over seeds, then the scoring "
         "method (clm: sum of log-probabilities left to right; pll / pll-word-l2r: pseudo-log-likelihood; mntp: "
         "masked next-token; finetune / probe: GLUE; finetune-official: GLUE as the BabyLM 2025 pipeline, best epoch "
         "chosen on the reported split)."),
        ("Intervals count both sources of error: Student-t over the per-seed scores (k-1 df) with the items' "
         "sampling variance added (two-way crossed seeds x items, residual counted once); a '(1 seed)' cell "
         "shows its run's own interval, the one eval printed (the task's bootstrap over its items): seed variance "
         "unknown. Method and formulas: docs/statistics.md."),
        *bound_lines(board),
        *chance_lines(board),
        *units,
        "Final checkpoint of each run (highest phase index).",
        *rank_lines(board),
        ("Gaps to the reference row: paired by seed where both rows have the same seeds, Welch's t over seeds "
         "otherwise, paired by item within seeds where item tables exist; a one-seed side is tested only with a "
         "seed SD of its own configuration (never another row's); cells scored by two methods are not tested. "
         f"Significant at alpha={board.alpha}; {multiplicity}; MDE = minimum detectable effect at 80% power."),
    ]


SIGNAL_HEADER = ("task", "seed SD", "signal", "signal/noise", "seed pairs ordered as the means (rows by #)")
SIGNAL_NOTE = ("Signal and noise per task (arXiv 2508.13144, 2504.11393): seed SD = the seed standard deviation "
               "pooled over the rows with >= 2 seeds; signal = the standard deviation of the rows' means (both in the "
               "task's units); for each pair of rows (#a v #b, by rank) the share of seed pairs (one seed of each) "
               "that order them as their means do: 0.5 is a coin flip, 1.0 any one seed would rank them right. "
               "Descriptive: the gaps table's tests say which gaps are real.")


def signal_table(board: Leaderboard) -> list[list[str]]:
    """One line per column with signal and noise (``Leaderboard.signal_noise``), as text cells."""
    rank = {row.key: i for i, row in enumerate(board.rows, 1)}
    lines = []
    for entry in board.signal_noise:
        pairs = "; ".join(f"#{rank[a]} v #{rank[b]} {share:.2f}" for a, b, share in entry.agreement) or "-"
        ratio = "-" if entry.ratio is None else f"{entry.ratio:.2f}"
        lines.append([board.column_label(entry.column), value_text(entry.noise, entry.metric), value_text(entry.signal, entry.metric),
                      ratio, pairs])
    return lines


def compact_cell_text(cell: Cell | None, with_method: bool = True) -> str:
    """``51.3 ±0.9 clm``: :func:`cell_text` without its interval (the compact board prints the intervals in a table
    of their own), its marks kept (``(1 seed)``, ``(--limit N)``)."""
    return cell_text(cell, with_method, with_interval=False)


def wrapped(line: str, width: int) -> list[str]:
    """A line wrapped at words to ``width`` columns, each continuation indented under it: whole words, nothing
    cut (a word longer than the width stays whole)."""
    import textwrap

    if len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip(" ")))
    return textwrap.wrap(line, width, initial_indent="", subsequent_indent=indent + "    ", break_long_words=False,
                         break_on_hyphens=False, drop_whitespace=True) or [line]


def render_terminal(board: Leaderboard, console: Any, wide: bool = False) -> None:
    """The board as the terminal shows it: compact cells (mean ±SD over seeds, the scoring method where the cells do
    not share one) with the 95% intervals in a table of their own, prose wrapped at the console's width; ``wide``:
    every cell in full (``58.8 [58.3, 59.4] ±0.6 clm``) and no line wrapped."""
    from rich.table import Table

    shown = shown_keys(board)
    common = common_text(board)
    methods = {cell.scoring for row in board.rows for cell in row.cells.values() if cell.scoring != "auto"}
    one_method = None if wide or len(methods) != 1 else next(iter(methods))
    # every user string (names, keys, notes) is escaped: rich would read ``[/bold]`` in a folder name as markup
    title = (f"leaderboard: {board.definition.name}" + (f" ({common})" if common else "")
             + (f"; every cell scored by {one_method}" if one_method else ""))
    table = Table(title=escape(title))
    table.add_column("#", justify="right")
    for i in shown:
        table.add_column(escape(board.group_by[i]), overflow="fold")
    table.add_column("runs", justify="right")
    for column in board.columns:
        table.add_column(escape(column), justify="right")
    table.add_column(escape(board.macro_label), justify="right", style="bold")
    for rank, row in enumerate(board.rows, 1):
        if wide:
            cells = [cell_text(row.cells.get(c)) for c in board.columns] + [cell_text(row.macro, False)]
        else:
            cells = ([compact_cell_text(row.cells.get(c), one_method is None) for c in board.columns]
                     + [compact_cell_text(row.macro, False)])
        table.add_row(str(rank), *[escape(row.key[i]) for i in shown], runs_text(row), *map(escape, cells))
    console.print(table)
    if not wide:
        intervals = Table(title="95% intervals of the cells above (over seeds and items; the footnotes say how)")
        intervals.add_column("#", justify="right")
        for column in [*board.columns, board.macro_label]:
            intervals.add_column(escape(column), justify="right")
        for rank, row in enumerate(board.rows, 1):
            intervals.add_row(str(rank), *[escape(interval_text(cell).strip() or "-") if cell is not None else "-"
                                           for cell in [*(row.cells.get(c) for c in board.columns), row.macro]])
        console.print(intervals)
    if board.comparisons:
        gaps = Table(title=escape(f"gaps to the reference: {key_text(board, board.reference)} (percentage points "
                                  "unless a unit follows the gap)"))
        for column in ("row", "task", "gap [95% CI]", "MDE", "verdict"):
            gaps.add_column(column)
        for c in board.comparisons:
            style = "" if not is_significant(board, c) else ("green" if row_is_better(c) else "red")
            gaps.add_row(escape(key_text(board, c.row)), escape(board.column_label(c.column)), comparison_text(c),
                         mde_text(c),
                         escape(verdict(c, board)), style=style)
        console.print(gaps)
    if len(board.rows) > 1 and board.signal_noise:
        signal = Table(title="signal and noise per task")
        for column in SIGNAL_HEADER:
            signal.add_column(column, overflow="fold")
        for line in signal_table(board):
            signal.add_row(*map(escape, line))
        console.print(signal)
        console.print(f"[dim]{escape(SIGNAL_NOTE)}[/dim]")
    for line in method_lines(board):
        console.print(f"[dim]{escape(line)}[/dim]")
    for row in board.rows:
        for note in row.notes:
            console.print(f"[yellow]note[/yellow] {escape(key_text(board, row.key))}: {escape(note)}")
    for note in board.notes:
        console.print(f"[yellow]note[/yellow] {escape(note)}")
    for line in board.decisions:
        for part in ([line] if wide else wrapped(line, console.width)):
            console.print(part, highlight=False, markup=False, soft_wrap=True)


def _md_escape(text: str) -> str:
    """A table cell: HTML escaped (a Markdown renderer passes raw HTML through), pipes escaped."""
    return html.escape(text, quote=False).replace("|", "\\|")


def render_markdown(board: Leaderboard, plot_files: Sequence[str] = (), plot_caption: str = "") -> str:
    """The board as Markdown; ``plot_files`` are images to embed, ``plot_caption`` the paragraph under them
    (``plots.curve_caption``: the caller draws the plots, so this module never imports the plotting one)."""
    shown = shown_keys(board)
    lines = [f"# {_md_escape(board.definition.name)}", ""]
    if board.definition.description:
        lines += [_md_escape(board.definition.description), ""]
    if common_text(board):
        lines += [f"All rows: {_md_escape(common_text(board))}.", ""]
    header = ["#", *[board.group_by[i] for i in shown], "runs", *board.columns, board.macro_label]
    lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
    lines.append("|" + "|".join("---:" if h in ("#", "runs") or h in board.columns or h == board.macro_label else "---"
                                for h in header) + "|")
    for rank, row in enumerate(board.rows, 1):
        cells = [str(rank), *[row.key[i] for i in shown], runs_text(row), *[cell_text(row.cells.get(c)) for c in board.columns],
                 f"**{cell_text(row.macro, False)}**"]
        lines.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
    if board.comparisons:
        lines += ["", f"## Gaps to {_md_escape(key_text(board, board.reference))} (percentage points unless a unit "
                  "follows the gap)", "",
                  "| row | task | gap [95% CI] | MDE | verdict |", "|---|---|---:|---:|---|"]
        for c in board.comparisons:
            mark = "**" if is_significant(board, c) else ""
            lines.append(f"| {_md_escape(key_text(board, c.row))} | {_md_escape(board.column_label(c.column))} | "
                         f"{mark}{comparison_text(c)}{mark} | {mde_text(c)} | {_md_escape(verdict(c, board))} |")
    if len(board.rows) > 1 and board.signal_noise:
        lines += ["", "## Signal and noise per task", "", "| " + " | ".join(SIGNAL_HEADER) + " |",
                  "|---|---:|---:|---:|---|"]
        lines += ["| " + " | ".join(_md_escape(cell) for cell in line) + " |" for line in signal_table(board)]
        lines += ["", _md_escape(SIGNAL_NOTE)]
    for path in plot_files:
        lines += ["", f"![per-checkpoint curves]({path})"]
    if plot_files and plot_caption:
        lines += ["", _md_escape(plot_caption)]
    lines += ["", *[f"- {line}" for line in method_lines(board)]]
    notes = [f"{key_text(board, r.key)}: {n}" for r in board.rows for n in r.notes] + board.notes
    lines += [f"- note: {_md_escape(n)}" for n in notes]
    if board.decisions:  # verbatim: its indentation nests each sweep's comparisons under its rule
        lines += ["", "## Sweep decision", "", "```text", *board.decisions, "```"]
    lines += ["", f"_antlm-bench {__version__}, results as of {board.results_as_of}_", ""]
    return "\n".join(lines)

