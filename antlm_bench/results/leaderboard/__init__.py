"""Leaderboards: result tables in, one row per configuration (recipe, preset, schedule) out, seeds aggregated.

One job per module, data flowing one way:

- ``definition``: ``leaderboards/<name>.yaml`` (which runs, tasks, metrics, macro) and the shared names;
- ``results``: reading the result tables (score rows, and a run's per-item correctness for one cell);
- ``model``: the data classes (cell, row, gap, board);
- ``board``: building the board: each run's final checkpoint, one scoring method per column, seeds pooled;
- ``checkpoints``: which rows stand for each run's checkpoints (one per column per checkpoint);
- ``comparability``: whether two cells are one instrument (scoring method, tokens, items), the one rule the board,
  the sweep's decision and ``check`` read, with a typed reason;
- ``compare``: gaps between two rows (the statistics themselves live in ``antlm_bench.results.stats``);
- ``curves``: per-checkpoint training curves; ``power``: seeds a gap needs; ``signal``: signal and noise per column;
- ``subtasks``: one task's subtasks (BLiMP paradigms) down the side, the board's rows across, descriptive only;
- ``text`` / ``html`` / ``plots``: renderers; ``output``: the command's entry point, Parquet export, writers.
"""

from antlm_bench.results.leaderboard.board import build_leaderboard, macro_cell
from antlm_bench.results.leaderboard.compare import FAMILIES, apply_holm, compare, compare_cells
from antlm_bench.results.leaderboard.definition import (
    DEFAULT_GROUP_BY,
    DEFAULT_TASKS,
    GROUP_KEYS,
    MACRO,
    LeaderboardDefinition,
    definition_result_paths,
    load_definition,
)
from antlm_bench.results.leaderboard.html import render_html
from antlm_bench.results.leaderboard.model import BoardRow, Cell, Comparison, CurvePoint, Leaderboard
from antlm_bench.results.leaderboard.output import (
    FORMATS,
    board_table,
    format_for,
    leaderboard_from_paths,
    print_terminal,
    write_leaderboard,
    write_words_curves,
)
from antlm_bench.results.leaderboard.plots import plot_curves
from antlm_bench.results.leaderboard.results import Results, read_results
from antlm_bench.results.leaderboard.text import (
    cell_text,
    comparison_text,
    design_text,
    family_text,
    key_text,
    mde_text,
    method_lines,
    p_text,
    pct,
    render_markdown,
    render_terminal,
    verdict,
)

__all__ = [
    "DEFAULT_GROUP_BY", "DEFAULT_TASKS", "FAMILIES", "FORMATS", "GROUP_KEYS", "MACRO", "BoardRow", "Cell", "Comparison",
    "CurvePoint", "Leaderboard", "LeaderboardDefinition", "Results", "board_table", "build_leaderboard",
    "cell_text", "apply_holm", "compare", "compare_cells", "comparison_text", "design_text", "family_text", "mde_text",
    "definition_result_paths", "format_for",
    "key_text", "leaderboard_from_paths", "load_definition", "macro_cell", "method_lines", "p_text", "pct",
    "plot_curves", "read_results", "render_html", "render_markdown", "render_terminal", "print_terminal", "verdict",
    "write_leaderboard", "write_words_curves",
]
