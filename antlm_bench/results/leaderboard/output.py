"""The command's entry point and writers: Parquet export, format choice, atomic output."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from antlm_bench import __version__
from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard.board import build_leaderboard
from antlm_bench.results.leaderboard.definition import (
    MACRO,
    LeaderboardDefinition,
    definition_result_paths,
    load_definition,
    metric_kind,
    missing_results_line,
    separate_metric_columns,
)
from antlm_bench.results.leaderboard.html import render_html
from antlm_bench.results.leaderboard.model import Leaderboard
from antlm_bench.results.leaderboard.plots import curve_caption, plot_curves
from antlm_bench.results.leaderboard.results import Results, read_results
from antlm_bench.results.leaderboard.text import (
    BOARD_WIDTH,
    FILE_WIDTH,
    key_text,
    render_markdown,
    render_terminal,
)
from antlm_bench.results.store import StoreReader
from antlm_bench.results.tables import eval_set_population


def board_table(board: Leaderboard) -> pa.Table:
    """Long form: one row per (leaderboard row, column), macro included, each with its metric, unit and direction,
    how its interval met the metric's range (``ci_bounds``: "", clipped, uninformative) and the items per subtask
    it stands on (``item_limit``: null for every item; not ``limit``, which may be a grouping key; ``rank`` ranks
    such rows after the full ones); the gaps and the signal-and-noise table as JSON in the schema's metadata
    (``antlm_bench.gaps``, ``antlm_bench.signal_noise``)."""
    records = []
    for rank, row in enumerate(board.rows, 1):
        for column, cell in [*row.cells.items(), (MACRO, row.macro)]:
            if cell is None:
                continue
            records.append({
                "leaderboard": board.definition.name, "rank": rank,
                **{k: v for k, v in zip(board.group_by, row.key)},
                "run_ids": ",".join(row.run_ids), "column": column, "value": cell.value, "ci_low": cell.low,
                "ci_high": cell.high, "interval": cell.interval, "spread": cell.spread, "n_seeds": cell.n_seeds,
                "scoring": cell.scoring, "n": cell.n, "metric": cell.metric, "unit": metric_kind(cell.metric).unit,
                "lower_is_better": metric_kind(cell.metric).lower_is_better, "ci_bounds": cell.bounded,
                "item_limit": cell.limit,
            })
    schema = pa.schema([("leaderboard", pa.string()), ("rank", pa.int32()),
                        *[(k, pa.string()) for k in board.group_by],
                        ("run_ids", pa.string()), ("column", pa.string()), ("value", pa.float64()),
                        ("ci_low", pa.float64()), ("ci_high", pa.float64()), ("interval", pa.string()),
                        ("spread", pa.float64()), ("n_seeds", pa.int32()), ("scoring", pa.string()),
                        ("n", pa.int64()), ("metric", pa.string()), ("unit", pa.string()),
                        ("lower_is_better", pa.bool_()), ("ci_bounds", pa.string()), ("item_limit", pa.int64())])
    gaps = [{"row": key_text(board, c.row, full=True), "column": c.column, "delta": c.delta, "low": c.low, "high": c.high,
             # a gap a sweep decided: descriptive, its verdict the sweep's (no fixed-sample p-value or verdict)
             "p_value": None if (c.row, c.column) in board.swept else c.p_value,
             "p_raw": None if (c.row, c.column) in board.swept else c.p_raw, "paired": c.paired, "n_items": c.n_items,
             "significant": None if (c.row, c.column) in board.swept else c.significant,
             "sweep_verdict": board.swept.get((c.row, c.column)), "design": c.design, "mde": c.mde, "metric": c.metric, "note": c.note,
             "incomparable": None if c.incomparable is None else c.incomparable.value}
            for c in board.comparisons]
    signal = [{"column": e.column, "metric": e.metric, "rows": e.rows, "seed_sd": e.noise, "signal": e.signal,
               "signal_to_noise": e.ratio,
               "agreement": [{"row": key_text(board, a, full=True), "other": key_text(board, b, full=True),
                              "share": share} for a, b, share in e.agreement]}
              for e in board.signal_noise]
    meta = {"antlm_bench.reference": key_text(board, board.reference, full=True), "antlm_bench.gaps": json.dumps(gaps),
            "antlm_bench.version": __version__, "antlm_bench.holm_family": board.family,
            "antlm_bench.signal_noise": json.dumps(signal)}
    return pa.Table.from_pylist(records, schema=schema.with_metadata(meta))


def leaderboard_from_paths(
    results: Sequence[str | Path] = (),
    definition: str | Path | None = None,
    group_by: Sequence[str] | None = None,
    reference: Mapping[str, str] | None = None,
    alpha: float = 0.05,
    family: str = "board",
    reader: StoreReader | None = None,
) -> Leaderboard:
    """The ``antlm-bench leaderboard`` entry point: a definition's results and/or result folders, aggregated
    (``reader``: the command's, when it reads the same tables again, as a sweep decision's check does)."""
    loaded = (load_definition(definition) if definition is not None
              else LeaderboardDefinition(name=folders_name(results)))
    paths = [*definition_result_paths(loaded), *map(Path, results)]
    if not paths:
        if loaded.results:
            raise UserError(missing_results_line(loaded))
        raise UserError("no results: give result folders, or --definition with a results: list")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha}: must be between 0 and 1")
    results = read_results(paths, reader)
    if definition is None:
        # no definition: the AntLM tasks first, then any other task the tables hold (an --include-path task)
        # and each task's separate metrics (the minimal-pair tasks' margin) beside it, as task.metric columns
        others = sorted({r["task"] for r in results.rows} - set(loaded.tasks))
        tasks = [*loaded.tasks, *others]
        beside = separate_metric_columns(results.rows, tasks)
        loaded = loaded.model_copy(update={"tasks": [name for task in tasks for name in
                                                     (task, *[c for c in beside if c.startswith(f"{task}.")])]})
    return build_leaderboard(results, loaded, group_by=group_by, reference=reference, alpha=alpha, family=family)


def folders_name(results: Sequence[str | Path]) -> str:
    """A board without a definition is named after the folders it reads: ``study`` for one, ``a+b`` for two or
    three, ``a+2 more`` beyond (a scores.parquet file: its folder's name)."""
    names = []
    for given in results:
        path = Path(given).resolve()
        name = (path.parent if path.suffix == ".parquet" else path).name
        if name and name not in names:
            names.append(name)
    if not names:
        return LeaderboardDefinition.model_fields["name"].default
    return "+".join(names) if len(names) <= 3 else f"{names[0]}+{len(names) - 1} more"


FORMATS = ("terminal", "markdown", "html", "parquet")
_SUFFIX_FORMAT = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html", ".parquet": "parquet"}


_TEXT_SUFFIXES = ("", ".txt", ".text", ".log")  # the terminal's text, written to a file


def format_for(fmt: str | None, out: Path | None) -> str:
    """--format, else from --out's suffix (a suffix of no known format is refused: ``board.xlsx`` would get
    terminal text), else the terminal."""
    if fmt is None:
        if out is None:
            return "terminal"
        suffix = out.suffix.lower()
        if suffix not in _SUFFIX_FORMAT and suffix not in _TEXT_SUFFIXES:
            known = ", ".join(sorted({*_SUFFIX_FORMAT, ".txt"}))
            raise UserError(f"--out {out}: no format writes {suffix} files; use a name ending in {known} (.txt: "
                            "the terminal's text), or say which with --format")
        return _SUFFIX_FORMAT.get(suffix, "terminal")
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    return fmt


def terminal_text(board: Leaderboard, wide: bool = False) -> str:
    """The terminal rendering as plain text, for a pipe or a file: at most :data:`BOARD_WIDTH` columns (compact
    cells, prose wrapped at words), or every cell in full and no line wrapped (``wide``)."""
    from rich.console import Console

    buffer = io.StringIO()
    render_terminal(board, Console(file=buffer, width=FILE_WIDTH if wide else BOARD_WIDTH, no_color=True), wide)
    return buffer.getvalue()


def print_terminal(board: Leaderboard, console: Any, wide: bool = False) -> None:
    """The board on ``console``: a terminal lays it out at its own width; a pipe gets :func:`terminal_text` (the
    same text as ``-o board.txt``)."""
    if console.is_terminal:
        render_terminal(board, console, wide)
    else:
        console.print(terminal_text(board, wide), markup=False, highlight=False, soft_wrap=True, end="")


def write_leaderboard(board: Leaderboard, fmt: str, out: Path | None, console: Any,
                      plots: Path | None = None, x: str = "epoch", wide: bool = False) -> list[Path]:
    """Render ``board`` in ``fmt`` to ``out`` (or the console); write plots to ``plots`` as PNG and SVG; ``wide``:
    the terminal text with every cell in full and no line wrapped."""
    from antlm_bench.data import atomic_write_bytes
    from antlm_bench.results.tables import write_table_atomic

    written: list[Path] = []
    plot_names: list[str] = []
    if plots is not None:
        for kind in ("png", "svg"):
            image = plot_curves(board, kind, x)
            if image is not None:
                path = plots / f"{board.definition.name}-curves.{kind}"
                atomic_write_bytes(path, image)
                written.append(path)
                if kind == "png":
                    plot_names.append(str(path if out is None else _relative(path, out.parent)))
    if fmt == "parquet":
        if out is None:
            raise UserError("--format parquet needs --out FILE")
        write_table_atomic(board_table(board), out)
        written.append(out)
    elif fmt == "terminal" and out is None:
        print_terminal(board, console, wide)
    else:
        if fmt == "terminal":
            text = terminal_text(board, wide)
        elif fmt == "markdown":
            text = render_markdown(board, plot_names, curve_caption(board) if plot_names else "")
        else:
            text = render_html(board, x)
        if out is None:
            console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            atomic_write_bytes(out, text.encode("utf-8"))
            written.append(out)
    return written


def _relative(path: Path, base: Path) -> Path:
    try:
        return path.resolve().relative_to(base.resolve())
    except ValueError:
        return path.resolve()


WORDS_CURVES_FILE = "curves-words.png"


def write_words_curves(results: Results, output: Path) -> Path | None:
    """``run --eval-every words``: the runs' fast-suite scores at their words-seen checkpoints, drawn over words
    seen (one panel per task, one line per configuration, seeds averaged), written to ``output``; None when no
    checkpoint was scored by words."""
    from antlm_bench.data import atomic_write_bytes

    tasks = sorted({row["task"] for row in results.rows
                    if eval_set_population(row.get("eval_set") or "full") == "fast" and row.get("words_seen") is not None})
    if not tasks:
        return None
    definition = LeaderboardDefinition(name="words", description="fast suite at words-seen checkpoints",
                                       tasks=tasks, macro_tasks=[], filters={"eval_set": ["fast"]})
    image = plot_curves(build_leaderboard(results, definition), "png", x="words")
    if image is None:
        return None
    path = output / WORDS_CURVES_FILE
    atomic_write_bytes(path, image)
    return path
