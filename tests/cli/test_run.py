"""`antlm-bench run` end to end on a tiny budget, and reuse of finished steps on a re-run."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from leaderboard_tables import rewrite_event_file
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.config import run_config
from antlm_bench.errors import UserError
from antlm_bench.pipeline import run_benchmark

SCHEDULE = "0.5_CLM+0.5_MLM"


@pytest.fixture(scope="module")
def finished_run(real_data_dir, tmp_path_factory):
    output = tmp_path_factory.mktemp("run")
    config = run_config({"model": {"name": "antlm-babyllama", "preset": "tiny", "schedule": SCHEDULE},
                         "evaluation": {"tasks": "blimp,ewok", "limit": 4}, "seeds": [3],
                         "output": {"folder": output, "quiet": True},
                         "data": {"data_dir": real_data_dir, "cache_dir": output / "cache", "max_words": 3000},
                         "training": {"eval_limit": 2}})
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
    # the final checkpoint's two BLiMP rows (its phase's quick look and the final evaluation) say which items
    last = {r["limit"]: r["eval_set"] for r in aggregates if r["task"] == "blimp" and r["phase_index"] == 1}
    assert last == {2: "full-first-2", 4: "full-first-4"}
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
    changed = config.with_flags({"--limit": 3, "--tasks": "blimp"})
    (seed_run,) = run_benchmark(changed).runs
    assert seed_run.trained == "reused" and seed_run.evaluated == ["blimp"]


def test_run_scores_under_the_convention_it_is_given(finished_run):
    """--convention babylm-2024 (leading space) is a different evaluation: not reused, recorded in its rows."""
    config, _ = finished_run
    changed = config.with_flags({"--convention": "babylm-2024", "--tasks": "blimp"})
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
    same = config.with_flags({"--final-scoring": "pll"})
    (seed_run,) = run_benchmark(same).runs
    assert seed_run.evaluated == [] and seed_run.reused == ["blimp", "ewok"]
    clm = config.with_flags({"--final-scoring": "clm", "--tasks": "blimp"})
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
    other_words = config.with_flags({"--max-words": 4000})
    with pytest.raises(UserError, match=r"trained with --max-words 3000; this command asks for --max-words 4000"):
        run_benchmark(other_words)
    assert pending_seeds(other_words) == [3]
    trained_in = json.loads(run_file.read_text())["precision"]
    other = {"fp32": "bf16", "bf16": "fp32"}[trained_in]
    with pytest.raises(UserError, match=f"trained in precision {trained_in}; this command asks for --precision {other}"):
        run_benchmark(config.with_flags({"--precision": other}))
    corpus = tmp_path / "corpus"
    shutil.copytree(config.data.data_dir / "pretrain_sample", corpus)
    first = sorted((corpus / "train").glob("*.train"))[0]
    first.write_text("an edited first line\n" + first.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(UserError, match="trained on other text"):
        run_benchmark(config.with_flags({"--corpus": corpus}))
    assert run_file.stat().st_mtime_ns == before
    # the same text under another path is the same corpus: reused
    shutil.rmtree(corpus)
    shutil.copytree(config.data.data_dir / "pretrain_sample", corpus)
    (seed_run,) = run_benchmark(config.with_flags({"--corpus": corpus})).runs
    assert seed_run.trained == "reused"


def test_cli_rejects_bad_schedule_and_task_before_training(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--tasks", "blimpp", "--output", str(tmp_path), "--preset", "tiny"])
    assert result.exit_code != 0 and "unknown task 'blimpp'" in str(result.exception or result.output)
    result = runner.invoke(app, ["run", "--schedule", "4_CLM+x_MLM", "--output", str(tmp_path), "--preset", "tiny"])
    assert result.exit_code != 0
    assert not any(tmp_path.iterdir())


def test_the_recipe_and_a_default_schedule_are_said_before_training(real_data_dir, tmp_path, monkeypatch):
    """Issue #55: `run` names the recipe and the schedule it trains before any training, and says when the schedule
    is the recipe's default (a baseline recipe's default, 24_CLM, must not start unannounced)."""
    def stop_at_train(config, **_):
        raise UserError("stopped by the test")

    monkeypatch.setattr("antlm_bench.training.trainer.train", stop_at_train)
    common = ["run", "--preset", "tiny", "--tasks", "blimp", "--data-dir", str(real_data_dir), "--max-words", "3000",
              "--output", str(tmp_path / "out")]
    result = CliRunner().invoke(app, [*common, "--model", "babyllama-clm-only"])
    said = result.output.split("stopped by the test")[0]
    assert "babyllama-clm-only (babyllama), preset tiny, schedule 24_CLM (the recipe's default)" in said
    result = CliRunner().invoke(app, [*common, "--model", "babyllama-clm-only", "--schedule", "24_CLM"])
    assert "schedule 24_CLM, seeds" in result.output and "the recipe's default" not in result.output


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
    fast = [r for r in results.rows if r["eval_set"] == "fast-first-2"]  # --eval-limit 2 of the fast suite
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


def test_save_every_minutes_reaches_the_trainer(real_data_dir, tmp_path, monkeypatch):
    """`run --save-every-minutes M` (what a hard kill can cost a study's cell) is the trainer's resume-point
    interval, not the trainer's default; a non-positive value is one line."""
    seen = {}

    def stop_at_train(config, **_):
        seen["minutes"] = config.save_every_minutes
        raise UserError("stopped by the test")

    monkeypatch.setattr("antlm_bench.training.trainer.train", stop_at_train)
    common = ["run", "--preset", "tiny", "--schedule", "0.5_CLM", "--tasks", "blimp", "--data-dir", str(real_data_dir),
              "--max-words", "3000", "--output", str(tmp_path / "out"), "--quiet"]
    result = CliRunner().invoke(app, [*common, "--save-every-minutes", "7.5"])
    assert "stopped by the test" in result.output and seen == {"minutes": 7.5}
    result = CliRunner().invoke(app, [*common, "--save-every-minutes", "0"])
    assert result.exit_code == 2 and "--save-every-minutes" in result.output and "Traceback" not in result.output


def _pruned_copy(summary, output):
    """A copy of the fixture's run folder under ``output`` with its checkpoints, resume point and markers gone
    (what pruning to save disk, or a restore from a results export, leaves)."""
    import shutil

    source = summary.runs[0].folder
    pruned = output / source.name
    shutil.copytree(source, pruned, symlinks=True)
    for name in ("checkpoints", ".resume", "evals"):
        shutil.rmtree(pruned / name, ignore_errors=True)
    (pruned / "last").unlink(missing_ok=True)
    return pruned


def _final_events(folder):
    return [e for e in sorted((folder / "scores.parquet").iterdir())
            if e.is_dir() and json.loads((e / "_event.json").read_text()).get("kind") == "final-eval"]


def test_a_finished_run_without_its_checkpoints_reuses_what_its_store_keeps(finished_run, tmp_path):
    """Checkpoints gone, results kept: the final evaluations the store keeps are reused (no training, no
    scoring, the sweep's pending check agrees); an evaluation it does not keep needs the weights, so it is one
    line (and the seed stays pending for a sweep), never a retraining that could train another network."""
    from antlm_bench.pipeline import pending_seeds

    config, summary = finished_run
    pruned = _pruned_copy(summary, tmp_path / "out")
    moved = config.with_flags({"--output": tmp_path / "out"})
    assert pending_seeds(moved) == []
    said = []
    store_before = sorted(p.name for p in (pruned / "scores.parquet").iterdir())
    (seed_run,) = run_benchmark(moved, console=_Console(said)).runs
    assert seed_run.trained == "reused" and seed_run.reused == ["blimp", "ewok"] and seed_run.evaluated == []
    assert any("checkpoints are gone; reusing the final evaluations" in line for line in said)
    assert sorted(p.name for p in (pruned / "scores.parquet").iterdir()) == store_before
    assert not (pruned / "checkpoints").exists()
    other = moved.with_flags({"--limit": 1, "--tasks": "blimp"})  # no test before evaluated --limit 1
    assert pending_seeds(other) == [3]
    with pytest.raises(UserError, match=r"checkpoints are gone; scoring blimp needs its weights \(its evaluation "
                                         r"\S+ ran with other settings\)"):
        run_benchmark(other)


def test_a_run_json_removed_while_a_pruned_run_is_reused_is_one_line(finished_run, tmp_path, monkeypatch):
    """Another process removes run.json between the finished-training check and the reuse: one line naming the
    folder, no traceback (fault injected by holding the check's answer)."""
    config, summary = finished_run
    pruned = _pruned_copy(summary, tmp_path / "out")
    (pruned / "run.json").unlink()
    monkeypatch.setattr("antlm_bench.pipeline.run.finished_training", lambda *args: True)
    with pytest.raises(UserError, match=r"its run\.json is gone while the run was being reused"):
        run_benchmark(config.with_flags({"--output": tmp_path / "out"}))


@pytest.mark.parametrize("damage, why", [
    ("weights", r"does not hold the scores of its final weights"),
    ("spec", r"its task spec changed since its evaluation"),
    ("rows", r"does not hold the scores of its final weights"),
    ("run.json", r"its run.json records no weights digest"),
    ("edited", r"cannot be read back as written .*not the bytes its event recorded"),
])
def test_kept_evaluations_are_verified_not_trusted(finished_run, tmp_path, damage, why):
    """Each record a pruned run's reuse reads is checked against the others: rows of other weights, a spec
    digest that is not the task spec's now, an event whose part holds other rows than it says, a run.json
    without the final weights' digest: the evaluation is not reused (pending, and `run` says why in one line)."""
    import pyarrow as pa

    from antlm_bench.pipeline import pending_seeds

    config, summary = finished_run
    pruned = _pruned_copy(summary, tmp_path / "out")
    moved = config.with_flags({"--output": tmp_path / "out", "--tasks": "blimp"})
    # the one evaluation of this request (other tests of the module add blimp evaluations of other settings)
    wanted = {"limit": config.evaluation.limit, "scoring": "auto", "convention": "babylm-2025"}
    (event,) = [e for e in _final_events(pruned) if (record := json.loads((e / "_event.json").read_text()))["task"]
                == "blimp" and all(record["settings"][k] == v for k, v in wanted.items())]
    if damage in ("weights", "rows", "edited"):
        table = pq.read_table(event / "part.parquet")
        if damage in ("weights", "edited"):
            digests = pa.array(["0" * 64] * table.num_rows, table.schema.field("weights_digest").type)
            table = table.set_column(table.schema.get_field_index("weights_digest"), "weights_digest", digests)
        else:
            table = table.slice(1)
        if damage == "edited":  # changed after its commit: its record's digest of the part no longer holds
            pq.write_table(table, event / "part.parquet")
        else:  # as an evaluation that wrote such rows would have recorded them
            rewrite_event_file(event / "part.parquet", table)
    elif damage == "spec":
        record = json.loads((event / "_event.json").read_text())
        record["spec"] = "f" * 64
        (event / "_event.json").write_text(json.dumps(record))
    else:
        record = json.loads((pruned / "run.json").read_text())
        record["weights_digest"] = None
        (pruned / "run.json").write_text(json.dumps(record))
    assert pending_seeds(moved) == [3]
    with pytest.raises(UserError, match=why):
        run_benchmark(moved)


def test_an_evaluation_from_before_spec_digests_is_reused_and_says_its_spec_is_unverified(finished_run, tmp_path):
    config, summary = finished_run
    pruned = _pruned_copy(summary, tmp_path / "out")
    for event in _final_events(pruned):
        record = json.loads((event / "_event.json").read_text())
        del record["spec"]
        (event / "_event.json").write_text(json.dumps(record))
    said = []
    (seed_run,) = run_benchmark(config.with_flags({"--output": tmp_path / "out"}), console=_Console(said)).runs
    assert seed_run.reused == ["blimp", "ewok"]
    assert any("the spec of blimp, ewok was not recorded then" in line for line in said)


def test_a_run_restored_from_its_export_is_reused_and_boards_the_same(finished_run, tmp_path):
    """leaderboards/export_runs.py there and back: the exported run restored into a sweep's output is a finished
    run without checkpoints, reused as such, and its board (the sweep's decision reads it) equals the original's."""
    import importlib.util
    from pathlib import Path

    from antlm_bench.pipeline import pending_seeds
    from antlm_bench.results.leaderboard import leaderboard_from_paths

    spec = importlib.util.spec_from_file_location(
        "export_runs", Path(__file__).resolve().parents[2] / "leaderboards" / "export_runs.py")
    export = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export)
    config, summary = finished_run
    source = summary.runs[0].folder
    board = tmp_path / "board"
    export.export_run(source, board)
    output = tmp_path / "sweep-output"
    assert export.main(["--restore", str(board / source.parent.name), str(output)]) == 0
    restored = output / source.name
    assert sorted(p.name for p in restored.iterdir()) == ["run.json", "scores.parquet"]
    moved = config.with_flags({"--output": output})
    assert pending_seeds(moved) == []
    (seed_run,) = run_benchmark(moved).runs
    assert seed_run.reused == ["blimp", "ewok"] and seed_run.evaluated == []

    def cells(folder):
        (row,) = leaderboard_from_paths([folder], family="none").rows
        return {column: (cell.value, cell.n) for column, cell in row.cells.items()}

    assert cells(restored) == cells(source)


class _Console:
    def __init__(self, said):
        self.said = said

    def print(self, message, **_):
        self.said.append(str(message))


def test_the_command_on_a_pruned_run_it_cannot_serve_is_one_line_exit_2(finished_run, tmp_path):
    import os
    import subprocess
    import sys

    config, summary = finished_run
    pruned = _pruned_copy(summary, tmp_path / "out")
    before = sorted(str(p.relative_to(pruned)) for p in pruned.rglob("*"))
    command = [sys.executable, "-m", "antlm_bench", "run", "--model", config.model.name, "--preset", "tiny", "--schedule",
               SCHEDULE, "--seeds", "3", "--tasks", "blimp", "--limit", "1", "--max-words", "3000", "--output",
               str(tmp_path / "out"), "--data-dir", str(config.data.data_dir), "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "checkpoints are gone; scoring blimp needs its weights" in errors[0]
    assert sorted(str(p.relative_to(pruned)) for p in pruned.rglob("*")) == before
