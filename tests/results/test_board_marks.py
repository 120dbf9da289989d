"""What a board must say about its own numbers (issue #25): a number on a subset of the items (``--limit``) is
marked in every format and never ranked above a full evaluation; one ranking in every format, with or without a
macro; intervals cut at the metric's range, or called uninformative; one interval for one run in ``eval`` and on the
board; subset points marked in the curves; a board named after its folder."""

from __future__ import annotations

import io

import numpy as np
import pyarrow.parquet as pq
import pytest
from leaderboard_tables import correctness, four_tasks, write_run
from rich.console import Console

from antlm_bench.results.leaderboard import (
    LeaderboardDefinition,
    build_leaderboard,
    cell_text,
    leaderboard_from_paths,
    read_results,
    render_html,
    render_markdown,
    write_leaderboard,
)
from antlm_bench.results.leaderboard.text import method_lines

TASKS = ("blimp", "blimp_supplement", "ewok", "glue")


def _final(rng, p, n=200):
    return [{"phase_index": 0, "objective": "CLM", "epoch": 1.0, "scoring": {"glue": "finetune"},
             "tasks": four_tasks(rng, dict.fromkeys(TASKS, p), n=n)}]


def _terminal(board) -> str:
    from antlm_bench.results.leaderboard import render_terminal

    buffer = io.StringIO()
    render_terminal(board, Console(file=buffer, width=400, no_color=True))
    return buffer.getvalue()


# ----------------------------------------------------------------------------------------------------------
# 1. a --limit row


@pytest.fixture
def limited(tmp_path):
    """A full evaluation (about 60%) and a better-scoring --limit 50 one (about 90%) of another schedule."""
    rng = np.random.default_rng(3)
    write_run(tmp_path / "runs", "full", _final(rng, 0.6), schedule="4_CLM")
    write_run(tmp_path / "runs", "quick", _final(rng, 0.9, n=50), schedule="4_MLM", limit=50)
    return build_leaderboard(read_results([tmp_path / "runs"])), tmp_path


def test_a_limit_row_is_ranked_after_the_full_evaluation_and_marked_everywhere(limited, tmp_path):
    board, _ = limited
    assert [row.key[2] for row in board.rows] == ["4_CLM", "4_MLM"]  # the higher macro is on 50 items only
    assert board.rows[1].macro.value > board.rows[0].macro.value
    quick = board.rows[1]
    assert quick.limit == 50 and board.rows[0].limit is None
    assert all(cell.limit == 50 for cell in quick.cells.values()) and quick.macro.limit == 50
    assert "(--limit 50)" in cell_text(quick.cells["blimp"]) and "(--limit" not in cell_text(board.rows[0].cells["blimp"])
    lines = {line.split("│")[2].strip(): line for line in _terminal(board).splitlines() if line.count("│") > 4}
    assert "(--limit 50)" in lines["4_MLM"] and "(--limit" not in lines["4_CLM"]
    markdown = render_markdown(board)
    row_line = next(line for line in markdown.splitlines() if "| 4_MLM |" in line)
    assert row_line.startswith("| 2 |") and row_line.count("(--limit 50)") >= 5
    assert "ranked after every full evaluation" in markdown
    page = render_html(board)
    assert page.count("(--limit 50)") >= 5 and page.index(">4_CLM<") < page.index(">4_MLM<")
    out = tmp_path / "board.parquet"
    write_leaderboard(board, "parquet", out, None)
    table = pq.read_table(out).to_pylist()
    assert {(r["schedule"], r["rank"], r["item_limit"]) for r in table} == {("4_CLM", 1, None), ("4_MLM", 2, 50)}
    # grouped by limit too: the grouping key and the cell's limit are two columns
    by_limit = build_leaderboard(read_results([tmp_path / "runs"]), group_by=["schedule", "limit"])
    write_leaderboard(by_limit, "parquet", out, None)
    assert {(r["limit"], r["item_limit"]) for r in pq.read_table(out).to_pylist()} == {("", None), ("50", 50)}
    # the gaps between 50 items and every item are not tested: other items, another instrument
    assert board.comparisons and all(c.p_value is None and c.significant is None and "--limit 50" in c.note
                                     for c in board.comparisons)


# ----------------------------------------------------------------------------------------------------------
# 2. one ranking


def test_a_board_without_a_macro_ranks_its_rows_once_for_every_format(tmp_path):
    """Alphabetical (group) order is the reverse of the score order; no macro is defined."""
    rng = np.random.default_rng(5)
    for schedule, p in (("a_CLM", 0.55), ("b_MLM", 0.7), ("c_MIX", 0.85)):
        write_run(tmp_path / "runs", schedule, [{"phase_index": 0, "tasks": {
            "blimp": {f"p{k}": correctness(rng, 150, p) for k in range(2)},
            "ewok": {"d0": correctness(rng, 150, p)}}}], schedule=schedule)
    definition = LeaderboardDefinition(name="two tasks", tasks=["blimp", "ewok"])
    board = build_leaderboard(read_results([tmp_path / "runs"]), definition)
    assert board.macro_columns == [] and all(row.macro is None for row in board.rows)
    ranked = [row.key[2] for row in board.rows]
    assert ranked == ["c_MIX", "b_MLM", "a_CLM"]
    page = render_html(board)
    body = page[page.index('<table id="leaderboard"'):page.index("</table>")]
    assert [body.index(f">{name}<") for name in ranked] == sorted(body.index(f">{name}<") for name in ranked)
    for rank, name in enumerate(ranked, 1):
        assert f'<td class="rank key" data-value="{rank}">{rank}</td><td class="key">{name}</td>' in body
    markdown = render_markdown(board)
    assert [line.split("|")[2].strip() for line in markdown.splitlines() if line.startswith("| ") and
            line.split("|")[2].strip() in ranked] == ranked
    terminal = _terminal(board)
    assert [terminal.index(f" {name} ") for name in ranked] == sorted(terminal.index(f" {name} ") for name in ranked)
    notes = " ".join(method_lines(board))
    assert "not defined" not in notes and "No macro" in notes and "mean of their percentage columns" in notes


def test_a_board_is_named_after_the_folder_it_reads(tmp_path):
    rng = np.random.default_rng(2)
    write_run(tmp_path / "my-study", "r", _final(rng, 0.6))
    board = leaderboard_from_paths([tmp_path / "my-study"])
    assert board.definition.name == "my-study"
    assert render_markdown(board).startswith("# my-study\n")
    assert "leaderboard: my-study" in _terminal(board)
    write_run(tmp_path / "other", "s", _final(rng, 0.6))
    assert leaderboard_from_paths([tmp_path / "my-study", tmp_path / "other"]).definition.name == "my-study+other"
    notes = " ".join(method_lines(board))
    assert "Macro" not in notes or "mean of blimp, blimp_supplement, ewok, glue" in notes


# ----------------------------------------------------------------------------------------------------------
# 3. intervals inside the metric's range


def test_intervals_are_cut_at_the_metric_range_or_called_uninformative():
    from antlm_bench.results.leaderboard.board import bound_interval

    assert bound_interval(0.44, -0.177, 1.057, "accuracy") == (0.0, 1.0, "uninformative")
    assert bound_interval(0.95, 0.90, 1.02, "accuracy") == (0.90, 1.0, "clipped")
    assert bound_interval(0.5, 0.4, 0.6, "f1") == (0.4, 0.6, "")  # a percentage not in the table: 0..1
    assert bound_interval(0.9, 0.5, 1.3, "spearman") == (0.5, 1.0, "clipped")
    assert bound_interval(-0.9, -1.4, -0.5, "spearman") == (-1.0, -0.5, "clipped")
    assert bound_interval(0.1, -1.2, 1.3, "spearman") == (-1.0, 1.0, "uninformative")
    assert bound_interval(0.2, -3.0, 4.0, "margin") == (-3.0, 4.0, "")  # nats: no range
    assert bound_interval(0.05, -0.02, 0.12, "loss") == (0.0, 0.12, "clipped")  # a loss is never negative
    assert bound_interval(1.2, 1.1, 1.3, "accuracy") == (1.1, 1.3, "")  # a value outside: the range does not fit


def test_a_two_seed_accuracy_interval_never_reaches_past_0_and_100(tmp_path):
    rng = np.random.default_rng(9)
    for seed, p in ((0, 0.2), (1, 0.7)):
        write_run(tmp_path / "runs", f"r{seed}", _final(rng, p), seed=seed)
    board = build_leaderboard(read_results([tmp_path / "runs"]))
    cell = board.rows[0].cells["blimp"]
    assert cell.n_seeds == 2 and cell.bounded == "uninformative" and (cell.low, cell.high) == (0.0, 1.0)
    assert "[uninformative]" in cell_text(cell) and "-" not in cell_text(cell).split("±")[0]
    assert "'[uninformative]'" in " ".join(method_lines(board))
    out = tmp_path / "board.parquet"
    write_leaderboard(board, "parquet", out, None)
    blimp = next(r for r in pq.read_table(out).to_pylist() if r["column"] == "blimp")
    assert (blimp["ci_low"], blimp["ci_high"], blimp["ci_bounds"]) == (0.0, 1.0, "uninformative")


# ----------------------------------------------------------------------------------------------------------
# 4. one run: one interval in eval and on the board


@pytest.mark.parametrize("items", [True, False])
def test_one_run_shows_the_interval_eval_printed(tmp_path, items):
    """With item tables (BLiMP) and without (reading, WUG: only the row's own bootstrap interval is known)."""
    import pyarrow as pa

    from antlm_bench.cli.eval import summary_table

    rng = np.random.default_rng(4)
    write_run(tmp_path / "runs", "r", _final(rng, 0.7, n=60), items=items)
    results = read_results([tmp_path / "runs"])
    board = build_leaderboard(results)
    scores = pa.Table.from_pylist(results.rows)  # the rows eval wrote and printed
    buffer = io.StringIO()
    Console(file=buffer, width=300, no_color=True).print(summary_table(scores))
    printed = {line.split()[0]: line for line in buffer.getvalue().splitlines() if line.strip()}
    for task in TASKS:
        cell = board.rows[0].cells[task]
        stored = next(r for r in scores.to_pylist() if r["task"] == task and r["subtask"] == "")
        assert (cell.low, cell.high) == (stored["ci_low"], stored["ci_high"])
        shown = cell_text(cell).split("] ")[0] + "]"
        assert shown.split(" ", 1)[1] in printed[task]  # "[61.2, 72.5]" in both


# ----------------------------------------------------------------------------------------------------------
# 5. curve points on a subset of the items


def test_words_plot_marks_subset_points_apart_from_full_ones(tmp_path, monkeypatch):
    """Fast-suite points on 20 items at 1M and 2M words, the final evaluation on every item at 3M: the subset
    points are open markers, the full one filled, and the figure says which is which."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    from antlm_bench.results.leaderboard.plots import curve_caption, plot_curves

    rng = np.random.default_rng(6)
    phases = [{"phase_index": k, "epoch": float(k + 1), "words": 1e6 * (k + 1),
               "tasks": {"blimp": {"p0": correctness(rng, 20, 0.6)}}} for k in range(2)]
    write_run(tmp_path / "fast", "r", phases, limit=20)
    write_run(tmp_path / "final", "r", [{"phase_index": 2, "epoch": 3.0, "words": 3e6,
                                        "tasks": {"blimp": {"p0": correctness(rng, 300, 0.6)}}}])
    board = build_leaderboard(read_results([tmp_path / "fast", tmp_path / "final"]),
                              LeaderboardDefinition(tasks=["blimp"]))
    curve = board.rows[0].curves["blimp"]
    assert [(p.words_seen, p.limit) for p in curve] == [(1e6, 20), (2e6, 20), (3e6, None)]
    drawn = []
    original = Axes.plot

    def record(self, *args, **kwargs):
        if kwargs.get("marker") and kwargs.get("linestyle") == "none" and len(args) >= 2:
            drawn.append((args[0][0], kwargs.get("markerfacecolor")))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "plot", record)
    svg = plot_curves(board, "svg", x="words").decode()
    faces = dict(drawn)
    assert faces[1e6] == faces[2e6] == "none" and faces[3e6] not in (None, "none")
    assert "open markers: first 20 items per subtask" in svg
    assert "open: first 20 items per subtask (a subset)" in svg and "filled: every item" in svg
    assert "Open markers are points scored on a quick subset (the first 20 items" in curve_caption(board)
