"""Leaderboard rows pool only seeds of one configuration: plain Hugging Face models (no antlm-bench training
record) are told apart by the folder they scored, and a row says how many runs it pools; and every committed board
re-renders from its committed tables to the same bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from leaderboard_tables import write_run
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.evaluate import evaluate
from antlm_bench.results.leaderboard import build_leaderboard, read_results


def test_two_plain_models_are_two_rows(llama_dir, bert_dir, real_data_dir, tmp_path):
    for name, model in (("out-gpt2", llama_dir), ("out-bert", bert_dir)):
        evaluate(str(model), "blimp_supplement", limit=3, output_dir=tmp_path / name, data_dir=real_data_dir,
                 progress=False)
    board = build_leaderboard(read_results([tmp_path / "out-gpt2", tmp_path / "out-bert"]))
    assert len(board.rows) == 2
    assert sorted(len(row.run_ids) for row in board.rows) == [1, 1]
    assert {row.key[board.group_by.index("recipe")] for row in board.rows} == {str(llama_dir), str(bert_dir)}
    result = CliRunner().invoke(app, ["leaderboard", str(tmp_path / "out-gpt2"), str(tmp_path / "out-bert")])
    assert result.exit_code == 0, result.output
    assert str(llama_dir) in result.output and str(bert_dir) in result.output


def test_the_same_plain_model_scored_twice_is_one_row(llama_dir, real_data_dir, tmp_path):
    for name in ("a", "b"):
        evaluate(str(llama_dir), "blimp_supplement", limit=3, output_dir=tmp_path / name, data_dir=real_data_dir,
                 progress=False)
    board = build_leaderboard(read_results([tmp_path / "a", tmp_path / "b"]))
    assert len(board.rows) == 1


def test_seeds_of_one_recipe_pool_and_repeated_seeds_are_named(tmp_path):
    rng = np.random.default_rng(0)
    for run_id, seed in (("s1", 1), ("s2", 2), ("s2-copy", 2)):
        write_run(tmp_path, run_id, [{"phase_index": 0, "tasks": {"blimp": {"a": (rng.random(50) < 0.6) * 1.0}}}],
                  seed=seed)
    board = build_leaderboard(read_results([tmp_path]))
    (row,) = board.rows
    assert len(row.run_ids) == 3
    assert any("seed(s) 2 appear more than once" in note for note in row.notes)


# -- the committed boards -------------------------------------------------------------------------------------------
# Each committed board, rendered again from its committed tables by the command its study script ran, is the same
# bytes: the results layer may get faster, never say other numbers (a change of wording on purpose re-renders them).
ROOT = Path(__file__).resolve().parents[2]
COMMITTED_BOARDS = {
    "cpu-study/leaderboard-ltgbert.md": ["-d", "leaderboards/cpu-study-ltgbert.yaml", "-f", "markdown"],
    "cpu-study/decision-ltgbert.txt": ["-d", "leaderboards/cpu-study-ltgbert.yaml"],
    "cpu-study/leaderboard-babyllama.md": ["-d", "leaderboards/cpu-study-babyllama.yaml", "-f", "markdown"],
    "cpu-study/decision-babyllama.txt": ["-d", "leaderboards/cpu-study-babyllama.yaml"],
    "mini-antlm/leaderboard.html": ["-d", "mini-antlm", "--family", "row", "-f", "html"],
    "mini-antlm/leaderboard-ltgbert.md": ["-d", "mini-antlm-ltgbert", "--family", "row", "-f", "markdown"],
    "mini-antlm/decision-ltgbert.txt": ["leaderboards/mini-antlm/results/ltgbert"],
    "mini-antlm/leaderboard-babyllama.md": ["-d", "mini-antlm-babyllama", "--family", "row", "-f", "markdown"],
    "mini-antlm/decision-babyllama.txt": ["leaderboards/mini-antlm/results/babyllama"],
    "cpu-presets/leaderboard.md": ["leaderboards/cpu-presets/results", "--by", "recipe,preset,schedule", "-f",
                                   "markdown"],
    "cpu-presets/paradigms.md": ["leaderboards/cpu-presets/results", "leaderboards/mini-antlm/results", "--by",
                                 "recipe,preset,schedule", "--subtasks", "blimp", "-f", "markdown"],
}


@pytest.mark.parametrize("board", sorted(COMMITTED_BOARDS))
def test_a_committed_board_renders_the_same_bytes(board, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / Path(board).name
    result = CliRunner().invoke(app, ["leaderboard", *COMMITTED_BOARDS[board], "-o", str(out)])
    assert out.is_file(), result.output
    got, committed = out.read_text(encoding="utf-8"), (ROOT / "leaderboards" / board).read_text(encoding="utf-8")
    if got != committed:  # the first line that differs (pytest's own diff of two boards takes minutes)
        at = next((i for i, (a, b) in enumerate(zip(got.splitlines(), committed.splitlines())) if a != b),
                  min(len(got.splitlines()), len(committed.splitlines())))
        pytest.fail(f"{board} renders otherwise now, from line {at + 1}:\n  now:       "
                    f"{(got.splitlines() + [''])[at][:300]!r}\n  committed: {(committed.splitlines() + [''])[at][:300]!r}")
