"""`antlm-bench run` end to end on a tiny budget, and reuse of finished steps on a re-run."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.errors import UserError
from antlm_bench.pipeline import RunConfig, run_benchmark

SCHEDULE = "0.5_CLM+0.5_MLM"


@pytest.fixture(scope="module")
def finished_run(real_data_dir, tmp_path_factory):
    output = tmp_path_factory.mktemp("run")
    config = RunConfig(model="antlm-babyllama", tasks="blimp,ewok", preset="tiny", schedule=SCHEDULE, seeds=[3],
                       output=output, data_dir=real_data_dir, cache_dir=output / "cache", max_words=3000,
                       eval_limit=2, limit=4, progress=False)
    return config, run_benchmark(config)


def test_run_trains_scores_each_phase_and_evaluates_the_final_model(finished_run):
    config, summary = finished_run
    (seed_run,) = summary.runs
    assert seed_run.trained == "trained" and seed_run.evaluated == ["blimp", "ewok"]
    rows = pq.read_table(seed_run.folder / "scores.parquet").to_pylist()
    aggregates = [r for r in rows if r["subtask"] == "" and r["metric"] == "accuracy"]
    # per-phase quick looks (limit 2) scored the way each phase trained: CLM -> clm, MLM -> pll
    phase_rows = {(r["phase_index"], r["scoring"]) for r in aggregates if r["limit"] == 2}
    assert phase_rows == {(0, "clm"), (1, "pll")}
    # the final evaluation (limit 4) of the last (MLM) phase uses pll on both tasks, with intervals
    final = [r for r in aggregates if r["limit"] == 4]
    assert {(r["task"], r["scoring"], r["phase_index"]) for r in final} == {("blimp", "pll", 1), ("ewok", "pll", 1)}
    assert all(r["ci_low"] <= r["value"] <= r["ci_high"] for r in final)
    assert {r["run_id"] for r in rows} == {seed_run.folder.name}
    assert {r["schedule"] for r in rows} == {SCHEDULE} and {r["seed"] for r in rows} == {3}
    items = pq.read_table(seed_run.folder / "items.parquet")
    assert items.num_rows == sum(r["n"] for r in final if r["task"] == "blimp") + sum(
        r["n"] for r in final if r["task"] == "ewok")


def test_rerun_reuses_training_and_evaluations(finished_run):
    config, first = finished_run
    before = (first.runs[0].folder / "scores.parquet").stat().st_mtime_ns
    again = run_benchmark(config)
    (seed_run,) = again.runs
    assert seed_run.trained == "reused" and seed_run.evaluated == [] and seed_run.reused == ["blimp", "ewok"]
    assert (seed_run.folder / "scores.parquet").stat().st_mtime_ns == before


def test_changed_evaluation_settings_are_not_reused(finished_run):
    config, _ = finished_run
    changed = config.model_copy(update={"limit": 3, "tasks": "blimp"})
    (seed_run,) = run_benchmark(changed).runs
    assert seed_run.trained == "reused" and seed_run.evaluated == ["blimp"]


def test_run_scores_under_the_convention_it_is_given(finished_run):
    """--convention babylm-2024 (leading space) is a different evaluation: not reused, recorded in its rows."""
    config, _ = finished_run
    changed = config.model_copy(update={"convention": "babylm-2024", "tasks": "blimp"})
    (seed_run,) = run_benchmark(changed).runs
    assert seed_run.trained == "reused" and seed_run.evaluated == ["blimp"]
    rows = pq.read_table(seed_run.folder / "scores.parquet").to_pylist()
    # both conventions' final rows stand side by side: the convention is part of a row's key, never overwritten
    finals = [r for r in rows if r["limit"] == 4 and r["task"] == "blimp" and r["subtask"] == ""
              and r["metric"] == "accuracy"]
    assert sorted(r["convention"] for r in finals) == ["babylm-2024", "babylm-2025"]


def test_final_scoring_scores_the_final_model_by_the_method_asked(finished_run):
    """--final-scoring pll on a schedule ending in MLM is what auto does (reused); clm is another evaluation, its
    rows say clm; GLUE-free tasks only, so nothing is fine-tuned."""
    config, _ = finished_run
    same = config.model_copy(update={"final_scoring": "pll"})
    (seed_run,) = run_benchmark(same).runs
    assert seed_run.evaluated == [] and seed_run.reused == ["blimp", "ewok"]
    clm = config.model_copy(update={"final_scoring": "clm", "tasks": "blimp"})
    (seed_run,) = run_benchmark(clm).runs
    assert seed_run.trained == "reused" and seed_run.evaluated == ["blimp"]
    rows = pq.read_table(seed_run.folder / "scores.parquet").to_pylist()
    finals = {r["scoring"] for r in rows if r["limit"] == 4 and r["task"] == "blimp" and r["subtask"] == ""}
    assert finals == {"clm", "pll"}


def test_folder_of_another_run_is_refused(finished_run):
    config, summary = finished_run
    record_path = summary.runs[0].folder / "run.json"
    record = json.loads(record_path.read_text())
    record["seed"] = 99
    record_path.write_text(json.dumps(record))
    try:
        with pytest.raises(UserError, match="other settings"):
            run_benchmark(config)
    finally:
        record["seed"] = 3
        record_path.write_text(json.dumps(record))


def test_a_finished_run_of_another_word_cap_precision_or_text_is_refused_not_reused(finished_run, tmp_path):
    """Reuse only what is the same: another --max-words, an explicit other --precision or a corpus with other
    text is refused in one line naming the difference; nothing of the run is touched, and `sweep`'s pending check
    (pending_seeds) counts the seed as pending, so its cell runs and says the same line."""
    import shutil

    from antlm_bench.pipeline import pending_seeds

    config, summary = finished_run
    run_file = summary.runs[0].folder / "run.json"
    before = run_file.stat().st_mtime_ns
    other_words = config.model_copy(update={"max_words": 4000})
    with pytest.raises(UserError, match=r"trained with --max-words 3000; this command asks for --max-words 4000"):
        run_benchmark(other_words)
    assert pending_seeds(other_words) == [3]
    trained_in = json.loads(run_file.read_text())["precision"]
    other = {"fp32": "bf16", "bf16": "fp32"}[trained_in]
    with pytest.raises(UserError, match=f"trained in precision {trained_in}; this command asks for --precision {other}"):
        run_benchmark(config.model_copy(update={"precision": other}))
    corpus = tmp_path / "corpus"
    shutil.copytree(config.data_dir / "pretrain_sample", corpus)
    first = sorted((corpus / "train").glob("*.train"))[0]
    first.write_text("an edited first line\n" + first.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(UserError, match="trained on other text"):
        run_benchmark(config.model_copy(update={"corpus": corpus}))
    assert run_file.stat().st_mtime_ns == before
    # the same text under another path is the same corpus: reused
    shutil.rmtree(corpus)
    shutil.copytree(config.data_dir / "pretrain_sample", corpus)
    (seed_run,) = run_benchmark(config.model_copy(update={"corpus": corpus})).runs
    assert seed_run.trained == "reused"


def test_cli_rejects_bad_schedule_and_task_before_training(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--tasks", "blimpp", "--output", str(tmp_path), "--preset", "tiny"])
    assert result.exit_code != 0 and "unknown task 'blimpp'" in str(result.exception or result.output)
    result = runner.invoke(app, ["run", "--schedule", "4_CLM+x_MLM", "--output", str(tmp_path), "--preset", "tiny"])
    assert result.exit_code != 0
    assert not any(tmp_path.iterdir())


def test_run_by_words_seen_draws_curves_over_words(real_data_dir, tmp_path):
    """`run --save-at-words --eval-every words`: each seed's chck_<N>K checkpoints are scored with the fast suite,
    their rows carry words_seen, the board's curves average the seeds at each words count, and the run writes
    the figure over words seen."""
    from antlm_bench.results.leaderboard import build_leaderboard, read_results
    from antlm_bench.results.leaderboard.definition import LeaderboardDefinition

    args = ["run", "--model", "antlm-babyllama", "--tasks", "blimp", "--preset", "tiny", "--schedule", "1_CLM",
            "--seeds", "1,2", "--output", str(tmp_path / "out"), "--data-dir", str(real_data_dir), "--max-words",
            "3000", "--eval-every", "words", "--save-at-words", "1K,2K", "--eval-limit", "2", "--limit", "4",
            "--quiet"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    figure = tmp_path / "out" / "curves-words.png"
    assert f"curves over words seen (fast suite): {figure}" in " ".join(result.output.split())
    assert figure.read_bytes().startswith(b"\x89PNG")
    results = read_results([tmp_path / "out"])
    fast = [r for r in results.rows if r["eval_set"] == "fast"]
    assert {r["checkpoint"].rsplit("/", 1)[-1] for r in fast} == {"chck_1K", "chck_2K"}
    assert all(r["words_seen"] >= 1000 for r in fast)
    board = build_leaderboard(results, LeaderboardDefinition(tasks=["blimp"], macro_tasks=[],
                                                             filters={"eval_set": ["fast"]}))
    (row,) = board.rows
    points = row.curves["blimp"]
    assert len(points) == 2 and all(p.n_seeds == 2 for p in points)
    assert points[0].words_seen < points[1].words_seen


def test_eval_every_words_needs_word_counts(tmp_path):
    result = CliRunner().invoke(app, ["run", "--eval-every", "words", "--output", str(tmp_path), "--preset", "tiny"])
    assert result.exit_code != 0
    assert "--eval-every words needs --save-at-words" in result.output and "Traceback" not in result.output
