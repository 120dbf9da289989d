"""Metrics other than accuracy on the board and in check: a minimal-pair task's margin (nats, its own column, item
statistics from score_good - score_bad), a loss (nats per token, lower is better, never in the macro), and the
signal-and-noise table, all on hand-made result tables whose numbers are worked out here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from cli_support import run_cli
from leaderboard_tables import write_loss_run, write_run

from antlm_bench.adapters.minimal_pairs import PairScores, aggregate
from antlm_bench.errors import UserError
from antlm_bench.results.check import Tolerances, run_check
from antlm_bench.results.leaderboard import (
    LeaderboardDefinition,
    build_leaderboard,
    cell_text,
    leaderboard_from_paths,
    read_results,
    render_html,
    render_markdown,
    verdict,
    write_leaderboard,
)
from antlm_bench.results.leaderboard.signal import seed_order_agreement
from antlm_bench.results.stats import win_score
from antlm_bench.results.store import commit_results
from antlm_bench.results.tables import CheckpointInfo, RunInfo, item_table, score_table


def write_pairs_run(root: Path, run_id: str, schedule: str, seed: int, pairs: dict[str, tuple[np.ndarray, np.ndarray]],
                    task: str = "blimp") -> Path:
    """A run scored on one minimal-pair task: the adapter's own rows (accuracy and margin) and items."""
    run = RunInfo(run_id=run_id, recipe="antlm-babyllama", architecture="babyllama", preset="tiny",
                  schedule=schedule, seed=seed, git_commit="test")
    ckpt = CheckpointInfo(checkpoint=f"{run_id}/final", phase_index=0, phase_objective="CLM", epoch=1.0)
    scores, items = PairScores(), []
    for name, (good, bad) in pairs.items():
        scores.correct[name] = win_score(good, bad)
        scores.margin[name] = good - bad
        items += [{"run_id": run_id, "checkpoint": ckpt.checkpoint, "phase_index": 0, "scoring": "clm", "task": task,
                   "subtask": name, "item_id": str(i), "score_good": float(g), "score_bad": float(b),
                   "correct": float(c)} for i, (g, b, c) in enumerate(zip(good, bad, scores.correct[name]))]
    rows = aggregate(task, sorted(pairs), scores, "clm", None)
    commit_results(root / run_id, score_table(run, ckpt, rows), item_table(items))
    return root / run_id


def _pairs(rng: np.random.Generator, shift: float, n: int = 60) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for k in range(2):
        bad = rng.normal(-20.0, 3.0, n)
        out[f"paradigm_{k}"] = (bad + rng.normal(shift, 1.0, n), bad)
    return out


@pytest.fixture
def margin_results(tmp_path) -> Path:
    """Two schedules x 3 seeds; B's margins are 0.5 nats larger on every item on average."""
    rng = np.random.default_rng(5)
    for seed in (1, 2, 3):
        write_pairs_run(tmp_path / "a", f"a-s{seed}", "1_CLM", seed, _pairs(rng, 0.2))
        write_pairs_run(tmp_path / "b", f"b-s{seed}", "1_MLM", seed, _pairs(rng, 0.7))
    return tmp_path


def test_the_default_board_shows_the_margin_beside_accuracy_with_item_statistics(margin_results):
    board = leaderboard_from_paths([margin_results])
    assert board.columns[:2] == ["blimp", "blimp.margin"]
    results = read_results([margin_results])
    for row in board.rows:
        accuracy, margin = row.cells["blimp"], row.cells["blimp.margin"]
        assert accuracy.metric == "accuracy" and margin.metric == "margin"
        # margin rows never stand for the accuracy column's subtasks (and the reverse)
        assert set(accuracy.subtasks.values()) == {"accuracy"} and set(margin.subtasks.values()) == {"margin"}
        # each cell's items carry its own metric's per-item value, seed by seed
        for seed_index, run_id in enumerate(margin.seed_runs):
            stored = {(r["subtask"], r["item_id"]): r for r in _items(results, run_id)}
            for subtask, matrix in margin.items.items():
                expected = [stored[(subtask, i)]["score_good"] - stored[(subtask, i)]["score_bad"] for i in matrix.ids]
                assert matrix.correct[seed_index] == pytest.approx(expected)
                assert set(accuracy.items[subtask].correct[seed_index]) <= {0.0, 0.5, 1.0}
        # the cell's value is the mean over seeds of each run's task margin, the item variance > 0: a real interval
        assert margin.item_var > 0 and margin.low < margin.value < margin.high
        assert margin.value == pytest.approx(np.mean(margin.seed_values))
    # a definition without the margin column: the margin rows never stand for the accuracy column's subtasks
    plain = build_leaderboard(results, LeaderboardDefinition(tasks=["blimp"], macro_tasks=[]))
    assert plain.columns == ["blimp"]
    for row in plain.rows:
        assert set(row.cells["blimp"].subtasks.values()) == {"accuracy"} and row.cells["blimp"].items is not None
        assert row.cells["blimp"].value == pytest.approx(
            next(r for r in board.rows if r.key == row.key).cells["blimp"].value)
    gap = next(c for c in board.comparisons if c.column == "blimp.margin")
    assert gap.metric == "margin" and gap.paired and gap.design == "paired-seeds"
    # shown in nats, not x100; the footnotes say so
    text = render_markdown(board)
    margin_cell = board.rows[0].cells["blimp.margin"]
    assert cell_text(margin_cell).startswith(f"{margin_cell.value:.3f} [")
    assert "blimp.margin: margin: mean of log P(good) - log P(bad)" in text and "nats" in text


def _items(results, run_id):
    from antlm_bench.results.store import read_results_folder

    return [r for r in read_results_folder(results.items_sources[run_id]).items.to_pylist() if r["run_id"] == run_id]


def test_check_compares_the_margin_in_nats_beside_accuracy(margin_results):
    report = run_check([margin_results / "a"], [margin_results / "b"], Tolerances(nats=0.1), group_by=["recipe", "preset"])
    lines = {line.column: line for line in report.lines}
    assert set(lines) == {"blimp", "blimp.margin"}  # no macro: one percentage column, a margin never joins it
    margin = lines["blimp.margin"]
    assert margin.comparison.metric == "margin" and margin.comparison.delta < 0 and margin.comparison.paired
    from antlm_bench.results.check import report_markdown

    row = next(r for r in report_markdown(report).splitlines() if "blimp.margin (nats)" in r)
    assert f"{margin.comparison.delta:+.4f}" in row  # nats, not x100


def test_a_macro_never_averages_a_margin_or_a_loss(margin_results):
    definition = LeaderboardDefinition(tasks=["blimp", "blimp.margin"], macro_tasks=["blimp", "blimp.margin"])
    with pytest.raises(UserError, match="blimp.margin is measured by margin .* never averaged"):
        build_leaderboard(read_results([margin_results]), definition)


@pytest.fixture
def loss_results(tmp_path) -> Path:
    """Schedule "lower" has a loss 0.3 nats/token lower on every sequence (plus seed and item noise)."""
    rng = np.random.default_rng(11)
    for seed in (1, 2, 3):
        base = {"childes": rng.normal(4.0, 0.4, 40), "wiki": rng.normal(5.0, 0.4, 30)}
        write_loss_run(tmp_path / "results" / "high", f"high-s{seed}", "1_CLM", seed,
                       {k: v + rng.normal(0, 0.02) for k, v in base.items()})
        write_loss_run(tmp_path / "results" / "low", f"low-s{seed}", "1_MLM", seed,
                       {k: v - 0.3 + rng.normal(0, 0.02) for k, v in base.items()})
    return tmp_path / "results"


def test_a_loss_ranks_lowest_first_and_its_gap_reads_in_its_direction(loss_results):
    board = leaderboard_from_paths([loss_results])
    assert board.columns == ["heldout"]
    low, high = board.rows
    assert low.macro is None and high.macro is None
    assert low.key[2] == "1_MLM" and low.cells["heldout"].value < high.cells["heldout"].value
    (gap,) = board.comparisons  # the reference is the leader: the lower loss
    assert gap.metric == "loss" and gap.delta > 0 and gap.significant and gap.paired
    assert verdict(gap).startswith("significant, row worse: higher loss, lower is better (")
    assert "nats/token" in render_markdown(board)
    page = render_html(board)  # in nats per token, sorted best (lowest) first: its sort key is the negated loss
    assert f'data-value="{-low.cells["heldout"].value:.10g}">{low.cells["heldout"].value:.3f}' in page


def test_check_calls_a_rise_in_loss_a_regression_and_a_fall_an_improvement(loss_results):
    current, baseline = loss_results / "high", loss_results / "low"
    report = run_check([current], [baseline], Tolerances(nats_per_token=0.1), group_by=["recipe", "preset"])
    (line,) = report.lines
    assert line.column == "heldout" and line.status == "regression" and report.exit_code == 1
    report = run_check([baseline], [current], Tolerances(nats_per_token=0.1), group_by=["recipe", "preset"])
    assert report.lines[0].status == "improved" and report.exit_code == 0


def test_losses_per_token_of_two_tokenizers_are_not_compared(tmp_path):
    """nats per token of two recipes (each trains its own tokenizer) are different units: the mini study's board
    once called LTG-BERT's held-out loss 1.58 nats/token worse than BabyLlama's, significant."""
    rng = np.random.default_rng(5)
    for seed in (1, 2, 3):
        base = {"childes": rng.normal(4.0, 0.4, 40)}
        write_loss_run(tmp_path / "r", f"llama-s{seed}", "1_CLM", seed, base)
        write_loss_run(tmp_path / "r", f"ltg-s{seed}", "1_CLM", seed, {"childes": base["childes"] + 1.0},
                       recipe="antlm-ltgbert")
    board = leaderboard_from_paths([tmp_path / "r"])
    (gap,) = board.comparisons
    assert gap.metric == "loss" and gap.p_value is None and not gap.significant
    assert "may tokenize differently" in gap.note and "not tested" in verdict(gap)


def test_each_unit_has_its_own_tolerance_and_a_points_tolerance_never_waves_a_loss_through(loss_results, monkeypatch,
                                                                                             capsys):
    """One number in three units was the bug: --tolerance 0.5 read as 0.5 nats/token let a 0.3 nats/token rise in
    held-out loss (35% more perplexity) pass as "ok"."""
    from antlm_bench.results.leaderboard.definition import METRICS

    for metric in [*METRICS, "f1", None]:  # every unit the board knows has a tolerance
        assert Tolerances().of(metric) >= 0
    current, baseline = loss_results / "high", loss_results / "low"
    for tolerances in (Tolerances(), Tolerances(points=5.0, nats=1.0)):
        (line,) = run_check([current], [baseline], tolerances, group_by=["recipe", "preset"]).lines
        assert line.status == "regression"
    args = ["check", "--results", str(current), "--baseline", str(baseline), "--by", "recipe,preset", "--json"]
    code, out, _ = run_cli(monkeypatch, capsys, *args, "--tolerance", "5")
    assert code == 1 and json.loads(out)["tolerance"] == {"pp": 5.0, "nats": 0.05, "nats/token": 0.01}
    code, out, _ = run_cli(monkeypatch, capsys, *args, "--loss-tolerance", "0.5")
    assert code == 0 and json.loads(out)["lines"][0]["status"] == "ok"
    code, _, err = run_cli(monkeypatch, capsys, *args, "--margin-tolerance", "-1")
    assert code == 2 and "--margin-tolerance -1.0: must be >= 0" in err


# -- signal and noise ---------------------------------------------------------------------------------------------

def test_signal_noise_on_a_table_computed_by_hand(tmp_path):
    """Row A: seeds 0.60, 0.62, 0.64 (mean 0.62, SD 0.02); row B: 0.50, 0.56, 0.62 (mean 0.56, SD 0.06); row C:
    one seed, 0.70. Seed SD pooled over A and B: sqrt((2 * 0.02^2 + 2 * 0.06^2) / 4) = sqrt(0.002); signal: the SD
    of the means 0.70, 0.62, 0.56; A over B: of the 9 seed pairs, 0.60 beats 0.50 and 0.56, 0.62 beats two and
    ties one, 0.64 beats all three: 7.5 / 9."""
    values = {("1_CLM", 1): 0.60, ("1_CLM", 2): 0.62, ("1_CLM", 3): 0.64,
              ("1_MLM", 1): 0.50, ("1_MLM", 2): 0.56, ("1_MLM", 3): 0.62, ("2_CLM", 1): 0.70}
    for (schedule, seed), value in values.items():
        write_run(tmp_path, f"{schedule}-{seed}", [{"phase_index": 0, "tasks": {"blimp": {"s": [value]}}}],
                  schedule=schedule, seed=seed, items=False)
    board = build_leaderboard(read_results([tmp_path]), LeaderboardDefinition(tasks=["blimp"], macro_tasks=[]))
    assert [row.key[2] for row in board.rows] == ["2_CLM", "1_CLM", "1_MLM"]  # C, A, B by mean
    (entry,) = board.signal_noise
    assert entry.column == "blimp" and entry.rows == 3
    assert entry.noise == pytest.approx(np.sqrt(0.002))
    assert entry.signal == pytest.approx(np.std([0.70, 0.62, 0.56], ddof=1))
    assert entry.ratio == pytest.approx(np.std([0.70, 0.62, 0.56], ddof=1) / np.sqrt(0.002))
    shares = {(a[2], b[2]): share for a, b, share in entry.agreement}
    assert shares == pytest.approx({("2_CLM", "1_CLM"): 1.0, ("2_CLM", "1_MLM"): 1.0, ("1_CLM", "1_MLM"): 7.5 / 9})
    # every output carries it: Markdown, and the Parquet export's metadata
    text = render_markdown(board)
    assert "## Signal and noise per task" in text and "#2 v #3 0.83" in text and "| blimp | 4.5 | 7.0 | 1.57 |" in text
    page = render_html(board)
    assert "<h2>Signal and noise per task</h2>" in page and "#2 v #3 0.83" in page
    out = tmp_path / "board.parquet"
    write_leaderboard(board, "parquet", out, console=None)
    stored = json.loads(pq.read_schema(out).metadata[b"antlm_bench.signal_noise"])
    assert stored[0]["seed_sd"] == pytest.approx(np.sqrt(0.002)) and stored[0]["agreement"][2]["share"] == \
        pytest.approx(7.5 / 9)


def test_seed_order_agreement_is_half_for_a_coin_flip_and_counts_ties_half():
    assert seed_order_agreement([1.0, 3.0], [2.0, 2.0]) == 0.5  # equal means: no order to agree with
    assert seed_order_agreement([2.0, 4.0], [1.0, 3.0]) == pytest.approx(3 / 4)
    assert seed_order_agreement([2.0], [2.0, 1.0]) == pytest.approx(0.75)  # one tie (half) and one win
