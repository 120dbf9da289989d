"""Minimal-pair adapters: data reading, aggregation (ties, macro over subtasks, intervals), EWoK pairing, errors.

The scorer is replaced by a table of fixed scores here, so every expected number is worked out by hand.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from antlm_bench.adapters.base import EvalContext
from antlm_bench.adapters.minimal_pairs import EwokTask, MinimalPairTask, subtask_name
from antlm_bench.errors import UserError
from antlm_bench.results.stats import bootstrap_mean
from antlm_bench.scoring import ScoringModel
from antlm_bench.tasks import TaskSpec, resolve_tasks

# sentence -> score; a pair wins when good > bad, ties when equal
SCORES = {"g1": -1.0, "b1": -2.0, "g2": -1.0, "b2": -3.0, "g3": -2.0, "b3": -2.0, "g4": -5.0, "b4": -1.0,
          "g5": -1.0, "b5": -4.0, "g6": -2.0, "b6": -9.0}


class FixedScores:
    """Stands in for score_pairs: looks the sentences up and records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, sm, good, bad, method, contexts=None, batch_tokens=4096, leading_space=False, progress=None):
        self.calls.append({"good": list(good), "bad": list(bad), "method": method, "contexts": contexts})
        if progress is not None:
            progress(len(good))
        return np.array([SCORES[s] for s in good]), np.array([SCORES[s] for s in bad])


@pytest.fixture
def fixed(monkeypatch) -> FixedScores:
    scorer = FixedScores()
    monkeypatch.setattr("antlm_bench.scoring.score_pairs", scorer)  # the adapter imports it when it scores
    return scorer


def _dummy_model() -> ScoringModel:
    return ScoringModel(torch.nn.Linear(1, 1), tokenizer=None, kind="causal", modes=("causal",))


def _ctx(data_dir: Path, **kwargs) -> EvalContext:
    return EvalContext(model_path=None, data_dir=data_dir, model=_dummy_model(), scoring="clm", **kwargs)


def _write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _pair(i: int, **extra) -> dict:
    return {"sentence_good": f"g{i}", "sentence_bad": f"b{i}", **extra}


def _spec(expected: int | None = 2, **fields) -> TaskSpec:
    return TaskSpec.model_validate({
        "name": "pairs", "class": "MinimalPairTask",
        "data": {"folder": "pairs", "pattern": "*.jsonl*", **({"expected_subtasks": expected} if expected else {})},
        "fields": {"good": "sentence_good", "bad": "sentence_bad", **fields},
    })


@pytest.fixture
def pair_data(tmp_path) -> Path:
    # subtask "alpha": win, win, tie, loss -> (2 + 0.5) / 4; subtask "beta": win, win -> 1.0
    _write(tmp_path / "pairs" / "alpha.jsonl", [_pair(i, pair_id=10 + i) for i in (1, 2, 3, 4)])
    _write(tmp_path / "pairs" / "beta.jsonl", [_pair(i, pair_id=20 + i) for i in (5, 6)])
    return tmp_path


def test_ties_count_half_and_are_counted(pair_data, fixed):
    result = MinimalPairTask(_spec(id="pair_id"), None).run(_ctx(pair_data, log_samples=True))
    rows = {r.subtask: r for r in result.rows if r.metric == "accuracy"}
    assert rows["alpha"].value == pytest.approx(0.625) and rows["alpha"].n_ties == 1 and rows["alpha"].n == 4
    assert rows["beta"].value == 1.0 and rows["beta"].n_ties == 0
    corrects = {item["item_id"]: item["correct"] for item in result.items}
    assert corrects == {"11": 1.0, "12": 1.0, "13": 0.5, "14": 0.0, "25": 1.0, "26": 1.0}


def test_task_score_is_the_unweighted_mean_over_subtasks(pair_data, fixed):
    result = MinimalPairTask(_spec(), None).run(_ctx(pair_data))
    task = result.rows[0]
    assert task.subtask == "" and task.metric == "accuracy" and task.scoring == "clm"
    assert task.value == pytest.approx((0.625 + 1.0) / 2)  # the micro mean would be 4.5 / 6 = 0.75
    assert task.n == 6 and task.n_ties == 1


def test_every_interval_contains_its_point_estimate(pair_data, fixed):
    for row in MinimalPairTask(_spec(), None).run(_ctx(pair_data)).rows:
        assert row.ci_low <= row.value <= row.ci_high
    rows = MinimalPairTask(_spec(), None).run(_ctx(pair_data)).rows
    for metric in ("accuracy", "margin"):
        alpha = next(r for r in rows if r.subtask == "alpha" and r.metric == metric)
        assert alpha.ci_low < alpha.value < alpha.ci_high  # four mixed outcomes: a real interval, not a point


def test_margin_is_the_mean_log_probability_difference_per_subtask_then_unweighted(pair_data, fixed):
    """margin = mean of log P(good) - log P(bad) (nats): alpha's pairs 1, 2, 0, -4 -> -0.25; beta's 3, 7 -> 5;
    the task the unweighted mean over subtasks (2.375), not the mean over the 6 pairs (1.5)."""
    rows = {(r.subtask, r.metric): r for r in MinimalPairTask(_spec(), None).run(_ctx(pair_data)).rows}
    assert rows[("alpha", "margin")].value == pytest.approx(-0.25) and rows[("alpha", "margin")].n == 4
    assert rows[("beta", "margin")].value == pytest.approx(5.0)
    task = rows[("", "margin")]
    assert task.value == pytest.approx((-0.25 + 5.0) / 2) and task.n == 6 and task.n_ties == 0
    assert rows[("", "accuracy")].n_ties == 1  # ties belong to the accuracy rows only


def test_limit_takes_the_first_items_and_rows_record_it(pair_data, fixed):
    result = MinimalPairTask(_spec(), None).run(_ctx(pair_data, limit=1, log_samples=True))
    assert fixed.calls[0]["good"] == ["g1", "g5"]
    assert all(row.limit == 1 for row in result.rows)
    assert [item["item_id"] for item in result.items] == ["0", "0"]  # no id field: the line index
    assert any("--limit 1" in note for note in result.notes)


def test_items_keep_both_sentences_and_scores(pair_data, fixed):
    result = MinimalPairTask(_spec(), None).run(_ctx(pair_data, log_samples=True))
    first = result.items[0]
    assert (first["task"], first["subtask"], first["sentence_good"], first["sentence_bad"]) == ("pairs", "alpha", "g1",
                                                                                               "b1")
    assert (first["score_good"], first["score_bad"], first["correct"]) == (-1.0, -2.0, 1.0)


def test_subtask_names_are_file_stems():
    assert subtask_name("adjunct_island.jsonl.xz") == "adjunct_island"
    assert subtask_name("ewok_filtered/social-relations.jsonl") == "social-relations"


def test_missing_folder_says_where_it_looked_and_what_to_do(tmp_path, fixed):
    with pytest.raises(UserError) as err:
        MinimalPairTask(_spec(), None).run(_ctx(tmp_path))
    message = str(err.value)
    assert str(tmp_path / "pairs") in message and "--data-dir" in message and "\n" not in message


def test_incomplete_data_is_refused(pair_data, fixed):
    with pytest.raises(UserError, match="found 2 of 67"):
        MinimalPairTask(_spec(expected=67), None).run(_ctx(pair_data))


def test_malformed_line_names_file_and_line(pair_data, fixed):
    path = pair_data / "pairs" / "beta.jsonl"
    path.write_text(path.read_text() + '{"sentence_good": "g1", \n')
    with pytest.raises(UserError, match=rf"{path}:3: not valid JSON"):
        MinimalPairTask(_spec(), None).run(_ctx(pair_data))


def test_missing_field_names_the_record(pair_data, fixed):
    _write(pair_data / "pairs" / "beta.jsonl", [_pair(5), {"sentence_good": "g6"}])
    with pytest.raises(UserError, match=r"beta.jsonl: record 2: field 'sentence_bad'"):
        MinimalPairTask(_spec(), None).run(_ctx(pair_data))


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(UserError) as err:
        resolve_tasks("blimp,blimpp")
    assert "blimpp" in str(err.value) and "blimp_supplement" in str(err.value) and "ewok" in str(err.value)


def test_shipped_specs_resolve_to_these_adapters():
    classes = {r.name: type(r.adapter()) for r in resolve_tasks("blimp,blimp_supplement,ewok")}
    assert classes == {"blimp": MinimalPairTask, "blimp_supplement": MinimalPairTask, "ewok": EwokTask}


# -- EWoK -------------------------------------------------------------------------------------------------------------

EWOK_SPEC = {
    "name": "ewok", "class": "EwokTask",
    "data": {"zip": "toy.zip", "password": "pw", "folder": "toy", "expected_subtasks": 2},
    "fields": {"context": "Context1", "good": "Target1", "bad": "Target2"},
}


def _toy_ewok(folder: Path) -> None:
    """Placeholder items in EWoK's layout (line 2k, then its swapped twin), in a zip."""
    def lines(n):
        out = []
        for k in range(n):
            a, b = f"g{k + 1}", f"b{k + 1}"
            out.append({"Context1": f"c{k}", "Context2": f"d{k}", "Target1": a, "Target2": b})
            out.append({"Context1": f"d{k}", "Context2": f"c{k}", "Target1": b, "Target2": a})
        return "".join(json.dumps(x) + "\n" for x in out)

    with zipfile.ZipFile(folder / "toy.zip", "w") as archive:
        archive.writestr("toy/one.jsonl", lines(2))
        archive.writestr("toy/two.jsonl", lines(1))


def test_ewok_scores_targets_after_context1_and_pairs_the_swapped_twin(tmp_path, fixed):
    _toy_ewok(tmp_path)
    spec = TaskSpec.model_validate(EWOK_SPEC)
    result = EwokTask(spec, None).run(_ctx(tmp_path, log_samples=True))
    call = fixed.calls[0]
    assert call["contexts"] == ["c0", "d0", "c1", "d1", "c0", "d0"]
    assert call["good"] == ["g1", "b1", "g2", "b2", "g1", "b1"]
    one = [i for i in result.items if i["subtask"] == "one"]
    assert [i["group_id"] for i in one] == ["0", "0", "1", "1"]
    assert [i["item_id"] for i in one] == ["0", "1", "2", "3"]
    # the interval resamples twins together: it is the grouped bootstrap of the item outcomes
    row = next(r for r in result.rows if r.subtask == "one" and r.metric == "accuracy")
    grouped = bootstrap_mean([i["correct"] for i in one], [i["group_id"] for i in one])
    assert (row.ci_low, row.ci_high) == (grouped.low, grouped.high)
    # and so does the margin's: EWoK's margin is over its pairs (clusters) too
    margin = next(r for r in result.rows if r.subtask == "one" and r.metric == "margin")
    grouped = bootstrap_mean([i["score_good"] - i["score_bad"] for i in one], [i["group_id"] for i in one])
    assert (margin.value, margin.ci_low, margin.ci_high) == pytest.approx((grouped.value, grouped.low, grouped.high))
    # EWoK's terms: no plain-text copy in the items table
    assert all(i["sentence_good"] is None and i["sentence_bad"] is None and i["context"] is None for i in result.items)


def test_ewok_missing_zip_says_where_it_looked(tmp_path, fixed):
    with pytest.raises(UserError, match=r"toy\.zip not found.*--data-dir"):
        EwokTask(TaskSpec.model_validate(EWOK_SPEC), None).run(_ctx(tmp_path))


def test_real_ewok_lines_come_in_swapped_twins(real_data_dir, fixed):
    """The pairing the adapter assumes holds in the real data: line 2k+1 swaps line 2k's contexts and targets."""
    task = EwokTask(resolve_tasks("ewok")[0].spec, None)
    subtasks = task.load(real_data_dir)
    assert len(subtasks) == 11 and sum(len(s.good) for s in subtasks) == 7618
    for sub in subtasks:
        assert len(sub.good) % 2 == 0
        for k in range(0, len(sub.good), 2):
            assert (sub.good[k + 1], sub.bad[k + 1]) == (sub.bad[k], sub.good[k])
            assert sub.groups[k] == sub.groups[k + 1] == str(k // 2)
    assert len(task.data_hash) == 64


def test_real_blimp_has_67_paradigms_with_pair_ids(real_data_dir):
    task = MinimalPairTask(resolve_tasks("blimp")[0].spec, None)
    subtasks = task.load(real_data_dir, limit=3)
    assert len(subtasks) == 67 and subtasks[0].name == "adjunct_island"
    assert all(len(s.good) == 3 for s in subtasks) and sum(s.n_total for s in subtasks) == 59875
    assert subtasks[0].item_ids == ["0", "1", "2"]  # pair_id
