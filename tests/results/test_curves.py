"""Per-checkpoint curves that explain their numbers: subset labelled, interval bands, 50% chance line where chance
is 50%, a minimum y span, and final-only scores (GLUE, macro) drawn as such. The rendered study page was also
looked at in headless Chromium (see the issue note)."""

from __future__ import annotations

import numpy as np
import pytest
from leaderboard_tables import correctness, write_run

from antlm_bench.results.leaderboard import build_leaderboard, read_results
from antlm_bench.results.leaderboard.html import render_html
from antlm_bench.results.leaderboard.plots import (
    MIN_SPAN,
    chance_of,
    curve_caption,
    final_only_panels,
    panel_subset,
    plot_curves,
    y_limits,
)


@pytest.fixture
def board(tmp_path):
    rng = np.random.default_rng(1)
    for seed in (1, 2):
        phases = [{"phase_index": k, "objective": "CLM" if k != 1 else "MLM", "epoch": 2.0 * (k + 1),
                   "scoring": "clm" if k != 1 else "pll",
                   "tasks": {"blimp": {f"p{j}": correctness(rng, 20, 0.6) for j in range(3)},
                             "ewok": {"d0": correctness(rng, 20, 0.5)}}} for k in range(3)]
        write_run(tmp_path / "phases", f"r{seed}", phases, schedule="2_CLM+2_MLM+2_CLM", seed=seed, limit=20)
        final = [{"phase_index": 2, "objective": "CLM", "epoch": 6.0,
                  "scoring": {"blimp": "clm", "ewok": "clm", "glue": "finetune", "blimp_supplement": "clm"},
                  "tasks": {"blimp": {f"p{j}": correctness(rng, 200, 0.6) for j in range(3)},
                            "blimp_supplement": {"s": correctness(rng, 200, 0.6)},
                            "ewok": {"d0": correctness(rng, 200, 0.5)},
                            "glue": {"rte": correctness(rng, 100, 0.55)}}}]
        write_run(tmp_path / "final", f"r{seed}", final, schedule="2_CLM+2_MLM+2_CLM", seed=seed)
    return build_leaderboard(read_results([tmp_path / "phases", tmp_path / "final"]))


def test_curve_points_carry_bands_and_their_subset(board):
    (row,) = board.rows
    blimp = row.curves["blimp"]
    assert len(blimp) == 3 and all(p.limit == 20 and p.n_seeds == 2 for p in blimp)
    assert all(p.low is not None and p.low <= p.value <= p.high for p in blimp)
    assert panel_subset(board, "blimp") == 20
    assert final_only_panels(board, ["blimp", "ewok", "glue", "macro"]) == {"glue", "macro"}
    caption = curve_caption(board)
    assert "first 20 items of every subtask" in caption and "the table above uses every item" in caption
    assert "mean over the row's seeds" in caption and "chance (50%)" in caption and "final checkpoint" in caption


def test_chance_only_where_chance_is_50_percent():
    assert chance_of("blimp") == chance_of("blimp_supplement") == chance_of("ewok") == 50.0
    assert chance_of("glue") is None and chance_of("macro") is None


def test_axes_keep_a_minimum_span():
    low, high = y_limits([49.85, 50.10], 50.0)  # the EWoK panel that zoomed into noise
    assert high - low >= MIN_SPAN - 1e-9 and low <= 49.85 and high >= 50.10
    low, high = y_limits([0.5, 1.0], None)
    assert low == 0.0 and high >= MIN_SPAN
    low, high = y_limits([99.9], None)
    assert high == 100.0 and high - low >= MIN_SPAN
    assert y_limits([40.0, 60.0], 50.0)[1] - y_limits([40.0, 60.0], 50.0)[0] > 20.0


def test_figure_renders_and_the_page_explains_it(board):
    png = plot_curves(board, "png")
    assert png is not None and png[:4] == b"\x89PNG"
    svg = plot_curves(board, "svg").decode()
    assert "per-phase points: first 20 items per subtask" in svg
    assert "final only: the table" in svg and "chance (50%)" in svg and "95% item interval" in svg
    page = render_html(board)
    assert "Open markers are points scored on a quick subset" in page


def test_words_seen_checkpoints_draw_on_a_words_axis(tmp_path):
    """Checkpoints saved by words seen (train --save-at-words) carry words_seen into their rows; the board's curve
    points average it over seeds, and the figure can put it on the x axis (leaderboard --x words)."""
    rng = np.random.default_rng(3)
    for seed in (1, 2):
        checkpoints = [{"phase_index": 0, "epoch": 0.5 * (k + 1), "tokens": 1000 * (k + 1), "words": 1_000_000 * (k + 1),
                        "name": f"chck_{k + 1}M", "tasks": {"blimp": {"p0": correctness(rng, 40, 0.5 + 0.05 * k)}}}
                       for k in range(3)]
        write_run(tmp_path, f"w{seed}", checkpoints, seed=seed, limit=40)
    board = build_leaderboard(read_results([tmp_path]))
    (row,) = board.rows
    assert [p.words_seen for p in row.curves["blimp"]] == [1e6, 2e6, 3e6]
    assert all(p.n_seeds == 2 for p in row.curves["blimp"])
    assert plot_curves(board, "svg", x="words").startswith(b"<?xml")


def test_words_axis_leaves_out_points_without_words(tmp_path):
    """A per-phase point recorded no words count: on the words axis it is left out, not drawn at zero."""
    rng = np.random.default_rng(4)
    write_run(tmp_path, "p", [{"phase_index": k, "epoch": float(k + 1), "tasks": {"blimp": {"p0": correctness(rng, 40, 0.6)}}}
                              for k in range(2)], seed=1)
    board = build_leaderboard(read_results([tmp_path]))
    assert all(p.words_seen is None for p in board.rows[0].curves["blimp"])
    svg = plot_curves(board, "svg", x="words").decode()
    assert "words seen" in svg
