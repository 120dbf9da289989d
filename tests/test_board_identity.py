"""Leaderboard rows pool only seeds of one configuration: plain Hugging Face models (no antlm-bench training
record) are told apart by the folder they scored, and a row says how many runs it pools."""

from __future__ import annotations

import numpy as np
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
