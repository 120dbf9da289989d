"""--fast: the official BabyLM 2025 fast subsets, rows marked eval_set=fast, never mixed with full rows by the
store, the leaderboard or check."""

from __future__ import annotations

import json

import pytest
from tiny_models import build_tiny_llama, build_tiny_tokenizer

from antlm_bench.errors import UserError
from antlm_bench.evaluate import evaluate
from antlm_bench.results.leaderboard import LeaderboardDefinition, build_leaderboard
from antlm_bench.results.leaderboard.results import read_results
from antlm_bench.results.store import read_results_folder


def _model():
    return build_tiny_llama(), build_tiny_tokenizer("bpe")


@pytest.fixture(scope="module")
def both(tmp_path_factory, real_data_dir):
    """One results folder holding a fast and a full evaluation of the same model."""
    out = tmp_path_factory.mktemp("both")
    fast = evaluate(_model(), "blimp,entity_tracking,glue", fast=True, limit=2, data_dir=real_data_dir,
                    progress=False, output_dir=out)
    full = evaluate(_model(), "blimp,entity_tracking", limit=2, data_dir=real_data_dir, progress=False, output_dir=out)
    return out, fast, full


def test_fast_rows(both):
    out, fast, full = both
    rows = fast.scores.to_pylist()
    # --limit 2: each row says it scored the first 2 items of each subtask of its set, not the set
    assert {r["eval_set"] for r in rows} == {"fast-first-2"}
    assert {r["eval_set"] for r in full.scores.to_pylist()} == {"full-first-2"}
    assert {r["subtask"] for r in rows if r["task"] == "entity_tracking"} == {"", "regular"}
    assert [r["n"] for r in rows if r["task"] == "blimp" and r["subtask"] == "" and r["metric"] == "accuracy"] == [
        134]  # 67 fast files x 2
    assert any("glue has no fast subset" in note for note in fast.notes)
    assert json.loads((out / "eval.json").read_text())["config"]["eval_set"] == "full"
    assert fast.run["config"]["eval_set"] == "fast"


def test_store_keeps_both_sets(both):
    out, fast, full = both
    stored = read_results_folder(out / "scores.parquet", with_items=False).scores.to_pylist()
    assert len(stored) == fast.scores.num_rows + full.scores.num_rows  # neither set overwrote the other
    by_set = {(r["eval_set"], r["task"], r["subtask"], r["metric"]): r["value"] for r in stored}
    for metric in ("accuracy", "margin"):
        assert by_set[("fast-first-2", "blimp", "", metric)] != by_set[("full-first-2", "blimp", "", metric)]


def test_leaderboard_never_mixes(both):
    out, _, full = both
    results = read_results([out])
    full_board = build_leaderboard(results, LeaderboardDefinition(tasks=["blimp"], macro_tasks=[]), gaps=False)
    fast_board = build_leaderboard(results, LeaderboardDefinition(tasks=["blimp"], macro_tasks=[],
                                                                  filters={"eval_set": ["fast"]}), gaps=False)
    assert full_board.rows[0].cells["blimp"].n == [r for r in full.scores.to_pylist()
                                                   if r["task"] == "blimp" and r["subtask"] == ""][0]["n"]
    assert fast_board.rows[0].cells["blimp"].n == 134
    assert full_board.rows[0].cells["blimp"].value != fast_board.rows[0].cells["blimp"].value
    with pytest.raises(ValueError, match="never mixed"):
        LeaderboardDefinition(filters={"eval_set": ["fast", "full"]})


def test_a_quick_subset_is_labelled_apart_from_the_set_and_boards_with_it(tmp_path):
    """Issue #55: a final checkpoint scored on the per-phase quick subset (limit 20) and on the full set has two
    rows; each is labelled by what it scored, and the full set's board holds both (the whole evaluation wins its
    cell; a run scored only on a subset still shows, marked by its limit)."""
    import numpy as np
    from leaderboard_tables import correctness, write_run

    rng = np.random.default_rng(0)

    def scored(n: int) -> list[dict]:
        return [{"phase_index": 1, "tasks": {"blimp": {"a": correctness(rng, n, 0.6), "b": correctness(rng, n, 0.7)}}}]

    write_run(tmp_path / "both", "r", scored(20), limit=20)
    write_run(tmp_path / "both", "r", scored(200))
    write_run(tmp_path / "subset", "q", scored(20), limit=20)
    rows = read_results([tmp_path / "both"]).rows
    assert {(r["limit"], r["eval_set"]) for r in rows} == {(20, "full-first-20"), (None, "full")}
    definition = LeaderboardDefinition(tasks=["blimp"], macro_tasks=[])
    whole = build_leaderboard(read_results([tmp_path / "both"]), definition, gaps=False).rows[0].cells["blimp"]
    assert (whole.n, whole.limit) == (400, None)
    subset = build_leaderboard(read_results([tmp_path / "subset"]), definition, gaps=False).rows[0].cells["blimp"]
    assert (subset.n, subset.limit) == (40, 20)
    with pytest.raises(UserError, match="no rows"):  # a subset of the full set is still no fast score
        build_leaderboard(read_results([tmp_path / "subset"]),
                          LeaderboardDefinition(tasks=["blimp"], macro_tasks=[], filters={"eval_set": ["fast"]}))


def test_check_does_not_compare_fast_with_full(tmp_path, real_data_dir):
    from antlm_bench.results.check import run_check

    fast_dir, full_dir = tmp_path / "fast", tmp_path / "full"
    evaluate(_model(), "blimp", fast=True, limit=2, data_dir=real_data_dir, progress=False, output_dir=fast_dir)
    evaluate(_model(), "blimp", limit=2, data_dir=real_data_dir, progress=False, output_dir=full_dir)
    with pytest.raises(UserError, match="two evaluation sets are never compared"):  # fast against full
        run_check([fast_dir], [full_dir])
    assert run_check([fast_dir], [fast_dir]).exit_code == 0


def test_fast_only_glue_refused(real_data_dir):
    with pytest.raises(UserError, match="none of glue has a fast subset"):
        evaluate(_model(), "glue", fast=True, data_dir=real_data_dir, progress=False)


def test_groups_and_babylm2025_boards(tmp_path, real_data_dir):
    from antlm_bench.results.leaderboard import load_definition
    from antlm_bench.tasks import resolve_tasks

    assert [r.name for r in resolve_tasks("babylm-2025")] == [
        "blimp", "blimp_supplement", "ewok", "entity_tracking", "wug_adj", "reading", "glue"]
    assert [r.name for r in resolve_tasks("zero-shot")] == [
        "blimp", "blimp_supplement", "ewok", "entity_tracking", "wug_adj", "reading"]
    out = tmp_path / "r"
    evaluate(_model(), "wug_adj,reading", fast=True, data_dir=real_data_dir, progress=False, output_dir=out)
    board = build_leaderboard(read_results([out]), load_definition("babylm-2025-fast"), gaps=False)
    cells = board.rows[0].cells
    assert {"wug_adj", "reading.eye_tracking", "reading.self_paced_reading"} <= set(cells)
    assert cells["reading.eye_tracking"].value != cells["reading.self_paced_reading"].value
    assert board.rows[0].macro is None  # no invented aggregate
    with pytest.raises(UserError, match="no rows"):  # the full board never shows fast rows
        build_leaderboard(read_results([out]), load_definition("babylm-2025"), gaps=False)
