"""``antlm-bench eval`` and ``evaluate()`` end to end on tiny saved models and the real data (with --limit)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from cli_support import run_cli
from tiny_models import build_tiny_llama, build_tiny_tokenizer

from antlm_bench.data import hash_files
from antlm_bench.evaluate import evaluate
from antlm_bench.results.tables import ITEM_SCHEMA, SCORE_SCHEMA
from antlm_bench.scoring import load_scoring_model, score_pairs


def test_eval_writes_scores_items_and_run_record(llama_dir, real_data_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(
        monkeypatch, capsys, "eval", "--model", str(llama_dir), "--tasks", "blimp_supplement", "--limit", "4",
        "--output", str(out), "--log-samples", "--no-progress", "--data-dir", str(real_data_dir),
    )
    assert code == 0, stderr
    scores = pq.read_table(out / "scores.parquet")
    assert scores.schema.equals(SCORE_SCHEMA)
    rows = scores.to_pylist()
    subtasks = ["", "hypernym", "qa_congruence_easy", "qa_congruence_tricky", "subject_aux_inversion", "turn_taking"]
    assert [(r["metric"], r["subtask"]) for r in rows] == [("accuracy", s) for s in subtasks] + [
        ("margin", s) for s in subtasks]
    assert {r["scoring"] for r in rows} == {"clm"} and {r["limit"] for r in rows} == {4}
    assert rows[0]["n"] == 20 and all(r["ci_low"] <= r["value"] <= r["ci_high"] for r in rows)
    items = pq.read_table(out / "items.parquet")
    assert items.schema.equals(ITEM_SCHEMA) and items.num_rows == 20
    record = json.loads((out / "eval.json").read_text())
    assert record["config"]["scoring"] == "clm" and record["config"]["scoring_requested"] == "auto"
    assert record["versions"]["torch"] == torch.__version__
    files = sorted((real_data_dir / "supplement_filtered").glob("*.jsonl*"))
    assert record["data"]["blimp_supplement"]["sha256"] == hash_files(files)
    assert "plain causal LM" in stdout  # auto says what it chose and why, with the summary it explains
    assert "blimp_supplement" in stdout and "clm" in stdout


def test_eval_scores_are_the_engine_scores(llama_dir, real_data_dir):
    out = evaluate(llama_dir, "blimp", limit=2, log_samples=True, data_dir=real_data_dir, progress=False)
    items = out.items.to_pylist()
    sm = load_scoring_model(llama_dir)
    good, bad = score_pairs(sm, [i["sentence_good"] for i in items], [i["sentence_bad"] for i in items], "clm")
    assert [i["score_good"] for i in items] == pytest.approx(list(good), abs=1e-4)
    assert [i["score_bad"] for i in items] == pytest.approx(list(bad), abs=1e-4)
    value = {(r["metric"], r["subtask"]): r["value"] for r in out.scores.to_pylist()}
    for name in ("adjunct_island", "wh_vs_that_with_gap"):
        mine = [i for i in items if i["subtask"] == name]
        assert value[("accuracy", name)] == pytest.approx(np.mean([i["correct"] for i in mine]))
        assert value[("margin", name)] == pytest.approx(np.mean([i["score_good"] - i["score_bad"] for i in mine]))


def test_auto_follows_the_checkpoint_record(bert_dir, real_data_dir, tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for path in bert_dir.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    state = {"schedule": "1_CLM+1_MLM", "phases": [], "phase_index": 1, "phase_objective": "MLM", "epoch": 2.0,
             "step": 10, "tokens_seen": 1234, "recipe": "antlm-ltgbert", "preset": "tiny", "architecture": "ltgbert",
             "seed": 7, "data_hash": "abc", "tokenizer_hash": "def", "package_version": "0.1.0"}
    (folder / "antlm_state.json").write_text(json.dumps(state))
    out = evaluate(folder, "ewok", limit=2, data_dir=real_data_dir, progress=False, log_samples=True)
    assert out.method == "pll"
    row = out.scores.to_pylist()[0]
    assert (row["phase_index"], row["phase_objective"], row["tokens_seen"], row["seed"]) == (1, "MLM", 1234, 7)
    assert row["schedule"] == "1_CLM+1_MLM" and row["data_hash"] == "abc" and "antlm-ltgbert" in row["run_id"]
    assert row["n"] == 22 and len([r for r in out.scores.to_pylist() if r["subtask"] and r["metric"] == "accuracy"]) == 11
    assert out.items.column("sentence_good").null_count == 22  # no EWoK text in the items table


def test_in_memory_model_and_tokenizer(real_data_dir):
    model, tokenizer = build_tiny_llama(), build_tiny_tokenizer("bpe")
    out = evaluate((model, tokenizer), "blimp_supplement", limit=1, data_dir=real_data_dir, progress=False)
    assert out.method == "clm" and out.scores.num_rows == 12  # accuracy and margin: the task and 5 subtasks each
    assert out.run["run"]["run_id"] == "in-memory"


def _one_line_error(code: int, stderr: str, *fragments: str) -> None:
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_unknown_task_lists_the_known_ones(llama_dir, monkeypatch, capsys):
    code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(llama_dir), "--tasks", "blimpp")
    _one_line_error(code, stderr, "blimpp", "blimp_supplement", "ewok")


def test_bfloat16_on_a_cpu_without_native_bf16_is_refused(llama_dir, monkeypatch, capsys):
    monkeypatch.setattr("antlm_bench.scoring.model.cpu_bf16_instructions", lambda: [])
    code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(llama_dir), "--dtype", "bfloat16")
    _one_line_error(code, stderr, "bfloat16", "native bf16", "float32")


def test_missing_data_says_which_path_was_tried(llama_dir, tmp_path, monkeypatch, capsys):
    code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(llama_dir), "--tasks", "blimp",
                              "--data-dir", str(tmp_path), "--no-progress")
    _one_line_error(code, stderr, "blimp_filtered", "--data-dir")


def test_method_the_model_cannot_do_is_refused(bert_dir, real_data_dir, monkeypatch, capsys):
    code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(bert_dir), "--scoring", "clm",
                              "--data-dir", str(real_data_dir), "--no-progress")
    _one_line_error(code, stderr, "--scoring clm", "causal")


def test_missing_model_folder(tmp_path, monkeypatch, capsys):
    code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(tmp_path / "nope"))
    _one_line_error(code, stderr, "nope", "not a folder")


def test_help_names_every_option(monkeypatch, capsys):
    code, stdout, _ = run_cli(monkeypatch, capsys, "eval", "--help")
    assert code == 0
    for option in ("--model", "--tasks", "--scoring", "--output", "--limit", "--log-samples", "--batch-tokens",
                   "--device", "--dtype", "--convention", "--data-dir"):
        assert option in stdout


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "tasks", "method"), [("llama", "blimp,blimp_supplement,ewok", "clm"),
                                                       ("bert", "blimp_supplement,ewok", "pll")])
def test_full_data_run(kind, tasks, method, llama_dir, bert_dir, real_data_dir):
    """Every item of the real data: counts, macro means and intervals hold for the whole run."""
    folder = llama_dir if kind == "llama" else bert_dir
    out = evaluate(folder, tasks, data_dir=real_data_dir, progress=False, log_samples=True)
    assert out.method == method
    rows = [r for r in out.scores.to_pylist() if r["metric"] == "accuracy"]  # margin rows beside them: their own test
    expected = {"blimp": (67, 59875), "blimp_supplement": (5, 5218), "ewok": (11, 7618)}
    for task in tasks.split(","):
        subtasks = [r for r in rows if r["task"] == task and r["subtask"]]
        total = next(r for r in rows if r["task"] == task and not r["subtask"])
        assert (len(subtasks), total["n"]) == expected[task]
        assert total["value"] == pytest.approx(sum(r["value"] for r in subtasks) / len(subtasks))
        assert total["n_ties"] == sum(r["n_ties"] for r in subtasks)
        assert all(r["ci_low"] <= r["value"] <= r["ci_high"] for r in [total, *subtasks])
    items = out.items.to_pandas()
    assert items["score_good"].notna().all() and (items["score_good"] < 0).all()
    assert len(items) == sum(expected[t][1] for t in tasks.split(","))


def test_summary_names_metrics_other_than_accuracy():
    """reading has two task-level rows (eye_tracking, self_paced_reading) and wug_adj a Spearman: the summary says
    which number each line is, rather than printing "reading" twice."""
    import io

    import pyarrow as pa
    from rich.console import Console

    from antlm_bench.cli.eval import summary_table

    def row(task, metric, value):
        return {"task": task, "subtask": "", "metric": metric, "value": value, "ci_low": None, "ci_high": None,
                "n": 10, "n_ties": 0, "scoring": "clm", "limit": None}

    scores = pa.Table.from_pylist([row("blimp", "accuracy", 0.6), row("wug_adj", "spearman", 0.5),
                                   row("reading", "eye_tracking", 0.01), row("reading", "self_paced_reading", 0.02)])
    buffer = io.StringIO()
    Console(file=buffer, width=200).print(summary_table(scores))
    text = buffer.getvalue()
    assert "wug_adj (spearman)" in text and "reading (eye_tracking)" in text
    assert "reading (self_paced_reading)" in text and "blimp (accuracy)" not in text


def test_summary_prints_each_metric_in_its_unit():
    """Accuracy x100 in %, a margin and a loss as stored, in nats (a margin of 0.3885 nats is not 38.85)."""
    import io

    import pyarrow as pa
    from rich.console import Console

    from antlm_bench.cli.eval import summary_table

    def row(task, metric, value, low, high):
        return {"task": task, "subtask": "", "metric": metric, "value": value, "ci_low": low, "ci_high": high,
                "n": 10, "n_ties": 0, "scoring": "pll", "limit": None}

    scores = pa.Table.from_pylist([row("blimp", "accuracy", 0.6, 0.55, 0.65),
                                   row("blimp", "margin", 0.3885, 0.067, 0.716),
                                   row("blimp_supplement", "margin", -2.816, -3.5, -2.1),
                                   row("heldout", "loss", 5.4321, 5.4, 5.5)])
    buffer = io.StringIO()
    Console(file=buffer, width=200).print(summary_table(scores))
    lines = {line.strip().split("  ")[0]: line for line in buffer.getvalue().splitlines() if line.strip()}
    assert "60.00" in lines["blimp"] and "[55.0, 65.0]" in lines["blimp"] and " % " in lines["blimp"]
    margin = lines["blimp (margin)"]
    assert "0.389" in margin and "[0.067, 0.716]" in margin and "nats" in margin and "38.85" not in margin
    assert "-2.816" in lines["blimp_supplement (margin)"] and "-281.60" not in lines["blimp_supplement (margin)"]
    assert "5.432" in lines["heldout (loss)"] and "nats/token, lower is better" in lines["heldout (loss)"]


def test_one_blimp_paradigm_and_did_you_mean(real_data_dir):
    """blimp:<paradigm> selects one paradigm (as glue:rte a member); a misspelt task, member, paradigm or model
    gets difflib's closest name."""
    from antlm_bench.errors import UserError
    from antlm_bench.recipes import load_recipe
    from antlm_bench.tasks import resolve_tasks

    (request,) = resolve_tasks("blimp:adjunct_island,anaphor_gender_agreement")
    assert request.members == ["adjunct_island", "anaphor_gender_agreement"]
    subtasks = request.adapter().load(real_data_dir, limit=3)
    assert [s.name for s in subtasks] == ["adjunct_island", "anaphor_gender_agreement"]
    with pytest.raises(UserError, match="did you mean adjunct_island"):
        resolve_tasks("blimp:adjunct_islnd")[0].adapter().load(real_data_dir, limit=3)
    with pytest.raises(UserError, match="did you mean blimp"):
        resolve_tasks("blmip")
    with pytest.raises(UserError, match="did you mean rte"):
        resolve_tasks("glue:rtee")
    with pytest.raises(UserError, match="did you mean antlm-babyllama"):
        load_recipe("antlm-babylama")


def test_summary_prints_chance_and_glues_majority_floor_beside_each_score():
    """Issue #50 item 5: a minimal pair's accuracy beside its chance (50.0), its margin beside 0 nats, GLUE's score
    beside the majority-class floor its row records; the run summary prints the same floor on stdout."""
    import io

    import pyarrow as pa
    from rich.console import Console

    from antlm_bench.adapters.glue.task import FLOOR_NOTE, majority_floor
    from antlm_bench.cli.eval import summary_table
    from antlm_bench.cli.run import floor_lines

    def row(task, metric, value, notes=""):
        return {"task": task, "subtask": "", "metric": metric, "value": value, "ci_low": None, "ci_high": None,
                "n": 10, "n_ties": 0, "scoring": "clm", "limit": None, "notes": notes}

    glue_notes = f"mean over 2/2 members: mrpc f1, qqp f1; glue protocol x; {FLOOR_NOTE}0.496000"
    assert majority_floor(glue_notes) == 0.496 and majority_floor("mean over 2/2 members") is None
    scores = pa.Table.from_pylist([row("blimp", "accuracy", 0.515), row("blimp", "margin", 0.1),
                                   row("glue", "score", 0.493, glue_notes), row("heldout", "loss", 5.0)])
    buffer = io.StringIO()
    Console(file=buffer, width=200).print(summary_table(scores))
    lines = {line.strip().split("  ")[0]: line for line in buffer.getvalue().splitlines() if line.strip()}
    assert "chance" in buffer.getvalue().splitlines()[1] + buffer.getvalue().splitlines()[2]
    assert "51.50" in lines["blimp"] and " 50.0 " in lines["blimp"]
    assert " 0.000 " in lines["blimp (margin)"]
    assert "49.30" in lines["glue"] and "floor 49.6" in lines["glue"]
    assert "floor" not in lines["heldout (loss)"] and "50.0" not in lines["heldout (loss)"]
    (line,) = floor_lines(scores.to_pylist())
    assert line.startswith("glue: majority-class floor 49.6 (")
