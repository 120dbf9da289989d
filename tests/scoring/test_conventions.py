"""Scoring conventions: --convention babylm-2025 (texts as given) or babylm-2024 (leading space), recorded in
every row; a leaderboard never ranks two conventions together, and says so."""

from __future__ import annotations

import json

import pytest
from tiny_models import build_tiny_llama, build_tiny_tokenizer

from antlm_bench.conventions import resolve_convention
from antlm_bench.errors import UserError
from antlm_bench.evaluate import evaluate
from antlm_bench.results.leaderboard import LeaderboardDefinition, build_leaderboard
from antlm_bench.results.leaderboard.results import read_results
from antlm_bench.results.store import read_results_folder


def _model():
    return build_tiny_llama(), build_tiny_tokenizer("bpe")


def test_names_map_to_the_leading_space() -> None:
    assert resolve_convention("babylm-2025").leading_space is False
    assert resolve_convention("babylm-2024").leading_space is True
    assert resolve_convention(resolve_convention("babylm-2024")).name == "babylm-2024"  # resolved once, passed down
    with pytest.raises(UserError, match="unknown; use babylm-2025, babylm-2024 or babylm-2026"):
        resolve_convention("babylm-2023")


@pytest.fixture(scope="module")
def both(tmp_path_factory, real_data_dir):
    """One results folder holding a babylm-2025 and a babylm-2024 evaluation of the same model."""
    out = tmp_path_factory.mktemp("both")
    new = evaluate(_model(), "blimp", limit=3, data_dir=real_data_dir, progress=False, output_dir=out)
    old = evaluate(_model(), "blimp", limit=3, data_dir=real_data_dir, progress=False, output_dir=out,
                   convention="babylm-2024")
    return out, new, old


def test_every_row_records_its_convention(both) -> None:
    out, new, old = both
    assert {r["convention"] for r in new.scores.to_pylist()} == {"babylm-2025"}
    assert {r["convention"] for r in old.scores.to_pylist()} == {"babylm-2024"}
    assert old.run["config"]["convention"] == "babylm-2024" and old.run["config"]["leading_space"] is True
    # the store keeps both: the convention is part of a row's key
    stored = read_results_folder(out / "scores.parquet", with_items=False).scores.to_pylist()
    assert len(stored) == new.scores.num_rows + old.scores.num_rows
    values = {(r["convention"], r["subtask"]): r["value"] for r in stored if r["task"] == "blimp"}
    assert any(values[("babylm-2025", s)] != values[("babylm-2024", s)] for c, s in values if s)


def test_the_leaderboard_ranks_one_convention_and_says_so(both) -> None:
    out, new, old = both
    results = read_results([out])
    board = build_leaderboard(results, LeaderboardDefinition(tasks=["blimp"], macro_tasks=[]), gaps=False)
    assert len(board.rows) == 1  # the same model under two conventions is not two competitors
    blimp = [r for r in new.scores.to_pylist() if r["task"] == "blimp" and r["subtask"] == ""][0]
    assert board.rows[0].cells["blimp"].value == pytest.approx(blimp["value"])
    assert any("babylm-2024 left out" in n and "never ranked together" in n for n in board.notes), board.notes
    spaced = build_leaderboard(results, LeaderboardDefinition(tasks=["blimp"], macro_tasks=[],
                                                               filters={"convention": ["babylm-2024"]}), gaps=False)
    blimp_old = [r for r in old.scores.to_pylist() if r["task"] == "blimp" and r["subtask"] == ""][0]
    assert spaced.rows[0].cells["blimp"].value == pytest.approx(blimp_old["value"])
    assert any("babylm-2025 left out" in n for n in spaced.notes)


def test_a_board_of_2024_rows_only_is_that_convention(tmp_path, real_data_dir) -> None:
    evaluate(_model(), "blimp", limit=2, data_dir=real_data_dir, progress=False, output_dir=tmp_path,
             convention="babylm-2024")
    board = build_leaderboard(read_results([tmp_path]), LeaderboardDefinition(tasks=["blimp"], macro_tasks=[]),
                              gaps=False)
    assert len(board.rows) == 1 and any("scored under the babylm-2024 convention" in n for n in board.notes)


def _run_cli(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """(exit code, stderr)."""
    from cli_support import run_cli

    code, _, err = run_cli(monkeypatch, capsys, *args)
    return code, err


def test_the_cli_takes_the_convention_and_refuses_an_unknown_one(llama_dir, tmp_path, real_data_dir, monkeypatch,
                                                                  capsys) -> None:
    common = ["eval", "--model", str(llama_dir), "--tasks", "blimp", "--limit", "1", "--data-dir",
              str(real_data_dir), "--no-progress"]
    code, err = _run_cli(monkeypatch, capsys, *common, "--convention", "babylm-2023")
    assert code == 2 and "unknown; use babylm-2025, babylm-2024 or babylm-2026" in err
    code, err = _run_cli(monkeypatch, capsys, *common, "--convention", "babylm-2024", "--output", str(tmp_path / "o"))
    assert code == 0, err[-2000:]
    assert json.loads((tmp_path / "o" / "eval.json").read_text())["config"]["convention"] == "babylm-2024"
