"""GLUE fine-tuning: learning, padding-side invariance, honest selection, deterministic splits, metrics, errors."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from glue_fixtures import cue_examples, tiny_classifier_backbones, write_glue_folder
from hypothesis import given, settings
from hypothesis import strategies as st

from antlm_bench.adapters.base import EvalContext
from antlm_bench.adapters.glue.data import Example, SealedSplit, hash_unit, make_splits, split_by_key
from antlm_bench.adapters.glue.encoding import PairEncoder, pad_token_id, truncate_longest_first
from antlm_bench.adapters.glue.finetune import (
    EpochLog,
    FinetuneSettings,
    classification_metrics,
    finetune,
    predict_logits,
)
from antlm_bench.adapters.glue.model import Backbone, SequenceClassifier, fresh_copy
from antlm_bench.adapters.glue.options import GlueOptions
from antlm_bench.adapters.glue.probe import probe
from antlm_bench.errors import UserError
from antlm_bench.evaluate import eval_config
from antlm_bench.results.stats import bootstrap_classification
from antlm_bench.results.tables import CheckpointInfo, RunInfo, score_table
from antlm_bench.tasks import resolve_tasks


@functools.cache
def backbones() -> dict[str, tuple[object, object]]:
    return tiny_classifier_backbones()


FAST = {"lr": 3e-3, "batch_size": 16, "epochs": 5, "max_length": 64, "eval_batch_size": 32}


# ------------------------------------------------------------------------------------------------ learning


@pytest.mark.parametrize("name", ["hf-llama", "hf-bert", "babyllama", "ltgbert"])
def test_finetuning_beats_chance_on_a_learnable_task(name):
    if name not in backbones():
        pytest.skip("model backends not available")
    model, tokenizer = backbones()[name]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    splits = make_splits(cue_examples(320, 0), cue_examples(100, 1, "r"), 0.15, None, "cue")
    outcome = finetune(fresh_copy(model), tokenizer, splits, 2, FinetuneSettings(**FAST), seed=42)
    accuracy = float(np.mean(outcome.labels == outcome.predictions))
    # chance is 0.5; 100 reported examples: 0.75 is five standard errors above it
    assert accuracy >= 0.75, (name, accuracy, outcome.dev_history)
    assert outcome.best_epoch == int(np.argmax(outcome.dev_history)) + 1
    assert outcome.method == "finetune" and len(outcome.labels) == 100
    # the pre-trained model itself is never trained: every member and seed starts from it
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_probe_beats_chance_and_is_labelled():
    model, tokenizer = backbones()["hf-bert"]
    splits = make_splits(cue_examples(240, 0), cue_examples(100, 1, "r"), 0.1, None, "cue")
    outcome = probe(model, tokenizer, splits, 2, FinetuneSettings(max_length=64), seed=42)
    assert outcome.method == "probe" and outcome.best_epoch == 0
    assert float(np.mean(outcome.labels == outcome.predictions)) >= 0.7
    assert any("probe" in note for note in outcome.notes)


def test_a_probe_on_one_class_is_one_line_naming_the_member():
    """A small --max-train-examples can leave the training split with one class: scikit-learn raised a ValueError."""
    model, tokenizer = backbones()["hf-bert"]
    one_class = [e for e in cue_examples(80, 0) if e.label == 0]
    splits = make_splits(one_class, cue_examples(20, 1, "r"), 0.1, None, "cue")
    with pytest.raises(UserError, match=r"glue/rte: the probe's training split .* one class only"):
        probe(model, tokenizer, splits, 2, FinetuneSettings(max_length=64), seed=42, where="glue/rte")


# ------------------------------------------------------------------------------------------------ padding


@pytest.mark.parametrize("name", ["hf-llama", "hf-bert", "babyllama", "ltgbert"])
def test_predictions_do_not_depend_on_padding(name):
    if name not in backbones():
        pytest.skip("model backends not available")
    model, tokenizer = backbones()[name]
    torch.manual_seed(0)
    classifier = SequenceClassifier(Backbone(fresh_copy(model)), 3, dropout=0.0)
    examples = cue_examples(12, 5)  # lengths differ, so every batch is padded
    encoded = PairEncoder(tokenizer, 64).encode(examples)
    assert len(set(encoded.lengths.tolist())) > 3
    cfg = FinetuneSettings()
    pad = pad_token_id(tokenizer)
    alone = predict_logits(classifier, encoded, pad, batch_size=1, settings=cfg)  # no padding at all
    right = predict_logits(classifier, encoded, pad, batch_size=12, settings=cfg, padding_side="right")
    np.testing.assert_allclose(right, alone, atol=1e-5)
    if classifier.backbone.takes_positions:
        left = predict_logits(classifier, encoded, pad, batch_size=12, settings=cfg, padding_side="left")
        np.testing.assert_allclose(left, alone, atol=1e-5)
    else:
        with pytest.raises(ValueError):
            predict_logits(classifier, encoded, pad, batch_size=12, settings=cfg, padding_side="left")


def test_tokenizer_padding_side_does_not_change_results():
    model, tokenizer = backbones()["hf-llama"]
    results = []
    for side in ("left", "right"):
        tok = fresh_copy(tokenizer)
        tok.padding_side = side
        splits = make_splits(cue_examples(60, 0), cue_examples(30, 1, "r"), 0.2, None, "cue")
        outcome = finetune(fresh_copy(model), tok, splits, 2, FinetuneSettings(**{**FAST, "epochs": 1}), seed=1)
        results.append(outcome.probabilities)
    np.testing.assert_allclose(results[0], results[1], atol=1e-6)


def test_pooling_defaults_follow_the_model_kind():
    kinds = {name: SequenceClassifier(Backbone(m), 2, 0.0).pooling for name, (m, _) in backbones().items()}
    assert kinds["hf-llama"] == "last" and kinds["hf-bert"] == "first"
    if "babyllama" in kinds:
        assert kinds["babyllama"] == "last" and kinds["ltgbert"] == "first"
        assert Backbone(backbones()["ltgbert"][0]).attention == "bidirectional"
        assert Backbone(backbones()["babyllama"][0]).attention == "causal"


# ------------------------------------------------------------------------------------------------ selection


class Tripwire(list):
    """A list that fails any read while ``armed``: the reported split must stay untouched during selection."""

    armed = True
    reads = 0

    def _touch(self):
        if self.armed:
            raise AssertionError("the reported split was read before selection finished")
        self.reads += 1

    def __iter__(self):
        self._touch()
        return super().__iter__()

    def __getitem__(self, index):
        self._touch()
        return super().__getitem__(index)

    def __len__(self):
        self._touch()
        return super().__len__()


def test_selection_never_reads_the_reported_split():
    model, tokenizer = backbones()["hf-bert"]
    report = Tripwire(cue_examples(40, 1, "r"))
    settings_ = FinetuneSettings(**{**FAST, "epochs": 3})
    seen: list[EpochLog] = []

    def on_epoch(log: EpochLog) -> None:
        seen.append(log)
        if log.epoch == log.epochs:  # the last selection step is done when this is called
            report.armed = False

    splits = make_splits(cue_examples(80, 0), report, 0.2, None, "cue")
    with pytest.raises(RuntimeError):
        len(splits.report)  # sealed until the loop opens it
    outcome = finetune(fresh_copy(model), tokenizer, splits, 2, settings_, seed=3, on_epoch=on_epoch)
    assert report.reads > 0 and len(seen) == 3
    assert outcome.best_epoch == seen[-1].best_epoch
    assert outcome.dev_history == [log.dev_metric for log in seen]

    # and the choice does not move when the reported labels change
    flipped = [Example(e.id, e.text_a, e.text_b, 1 - e.label) for e in list.__iter__(report)]
    again = finetune(fresh_copy(model), tokenizer, make_splits(cue_examples(80, 0), flipped, 0.2, None, "cue"), 2,
                     settings_, seed=3)
    assert again.dev_history == outcome.dev_history and again.best_epoch == outcome.best_epoch


def test_adapter_reads_reported_split_only_after_selection(tmp_path, monkeypatch):
    import antlm_bench.adapters.glue.task as glue_module

    data_dir = write_glue_folder(tmp_path)
    model, tokenizer = backbones()["hf-bert"]
    task = resolve_tasks("glue:rte,boolq")[0].adapter()
    original_load, original_finetune = task.load_member, glue_module.finetune
    wires: dict[str, Tripwire] = {}

    def load_member(data_dir_, member):
        data = original_load(data_dir_, member)
        data.report = wires.setdefault(member, Tripwire(data.report))
        return data

    def guarded(model_, tokenizer_, splits, num_labels, settings_, seed, on_epoch=None, on_step=None):
        member = next(m for m, w in wires.items() if splits.report._examples is w)

        def epoch_hook(log):
            if log.epoch == log.epochs:
                wires[member].armed = False
            on_epoch(log)

        return original_finetune(model_, tokenizer_, splits, num_labels, settings_, seed, epoch_hook, on_step)

    monkeypatch.setattr(task, "load_member", load_member)
    monkeypatch.setattr(glue_module, "finetune", guarded)
    context = EvalContext(model_path=None, data_dir=data_dir, model=model, tokenizer=tokenizer,
                          options=GlueOptions(**{**FAST, "epochs": 2}, quiet=True))
    result = task.run(context)
    assert set(wires) == {"rte", "boolq"} and all(w.reads > 0 for w in wires.values())
    assert {r.subtask for r in result.rows} == {"rte", "boolq", ""}


# ------------------------------------------------------------------------------------------------ splits


def test_splits_are_deterministic_and_keep_groups_together():
    examples = [Example(str(i), "a", "b", i % 2, group=f"p{i // 7}") for i in range(700)]
    rest, held = split_by_key(examples, 0.2, salt="s")
    _, held2 = split_by_key(list(reversed(examples)), 0.2, salt="s")
    assert sorted(e.id for e in held) == sorted(e.id for e in held2)  # order does not matter
    assert {e.group for e in rest}.isdisjoint({e.group for e in held})  # a paragraph is on one side only
    assert 0.1 < len(held) / len(examples) < 0.3
    assert [e.id for e in split_by_key(examples, 0.2, salt="other")[1]] != [e.id for e in held]
    # the hash is the same everywhere (sha256, not Python's salted hash())
    assert hash_unit("123", "glue/boolq/report") == hash_unit("123", "glue/boolq/report")
    assert round(hash_unit("0", "x"), 12) == round(int.from_bytes(
        __import__("hashlib").sha256(b"x\x000").digest()[:8], "big") / 2**64, 12)


def test_budget_keeps_the_train_dev_ratio_and_is_seed_independent():
    train = cue_examples(1000, 0)
    a = make_splits(train, [], 0.1, 200, "m")
    b = make_splits(list(reversed(train)), [], 0.1, 200, "m")
    assert len(a.train) == 200 and len(a.dev) == 23
    assert [e.id for e in a.train] == [e.id for e in b.train] and [e.id for e in a.dev] == [e.id for e in b.dev]
    assert {e.id for e in a.train}.isdisjoint({e.id for e in a.dev})


def test_real_boolq_and_multirc_split_their_valid_file(real_data_dir):
    task = resolve_tasks("glue")[0].adapter()
    for member in task.members:
        data = task.load_member(real_data_dir, member)
        assert data.train and data.report
        assert all(0 <= e.label < len(task.members[member].labels) for e in data.train)
    boolq = task.load_member(real_data_dir, "boolq")
    assert (len(boolq.train), len(boolq.report)) == (1284, 351)
    assert "no train file" in boolq.notes[0]
    multirc = task.load_member(real_data_dir, "multirc")
    assert {e.group for e in multirc.train}.isdisjoint({e.group for e in multirc.report})
    assert len(multirc.train) + len(multirc.report) == 2424
    wsc = task.load_member(real_data_dir, "wsc")
    assert wsc.train[0].text_a == 'Does "He" refer to "Mark" in this passage?'


# ------------------------------------------------------------------------------------------------ metrics


def test_metrics_match_hand_computed_values():
    labels = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    preds = np.array([1, 1, 1, 0, 1, 0, 0, 0])
    metrics = classification_metrics(labels, preds)
    assert metrics["accuracy"] == pytest.approx(6 / 8)
    assert metrics["f1"] == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))  # tp 3, fp 1, fn 1
    assert "f1" not in classification_metrics(np.array([0, 1, 2]), np.array([0, 1, 1]))
    interval = bootstrap_classification({"m": (labels, preds, "f1")})
    assert interval.value == pytest.approx(0.75) and interval.low <= 0.75 <= interval.high
    perfect = bootstrap_classification({"m": (labels, labels, "accuracy")})
    assert (perfect.low, perfect.high) == (1.0, 1.0)
    macro = bootstrap_classification({"a": (labels, preds, "f1"), "b": (labels, preds, "accuracy")})
    assert macro.value == pytest.approx((0.75 + 0.75) / 2)


def test_bootstrap_classification_matches_resampling_examples():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 300)
    preds = np.where(rng.random(300) < 0.75, labels, 1 - labels)
    interval = bootstrap_classification({"m": (labels, preds, "f1")}, resamples=4000)
    picks = rng.integers(0, 300, size=(2000, 300))  # the plain bootstrap: resample the examples themselves
    y, p = labels[picks], preds[picks]
    tp, fp, fn = ((y == 1) & (p == 1)).sum(1), ((y == 0) & (p == 1)).sum(1), ((y == 1) & (p == 0)).sum(1)
    replicates = 2 * tp / (2 * tp + fp + fn)
    assert replicates[0] == pytest.approx(f1_score(y[0], p[0]))
    low, high = np.quantile(replicates, [0.025, 0.975])
    assert interval.low == pytest.approx(low, abs=0.015) and interval.high == pytest.approx(high, abs=0.015)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(0, 50))
def test_truncation_matches_the_tokenizers_longest_first(la, lb, budget):
    from tiny_models import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer("wordpiece")
    a, b = " ".join(["cat"] * la), " ".join(["dog"] * lb)
    cat, dog = tokenizer.convert_tokens_to_ids(["cat", "dog"])
    ours = truncate_longest_first([cat] * la, [dog] * lb, budget)
    if budget < 2:
        return  # the tokenizer refuses budgets smaller than its special tokens
    theirs = tokenizer(a, b, truncation="longest_first", max_length=budget + 3)["input_ids"]
    assert (len(ours[0]), len(ours[1])) == (theirs.count(cat), theirs.count(dog))


def test_pair_encoder_joins_pairs_without_a_template_with_the_separator():
    from tiny_models import build_tiny_tokenizer

    tokenizer = fresh_copy(build_tiny_tokenizer("bpe"))
    from tokenizers import processors

    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="$A", pair="$A $B", special_tokens=[])  # GPT-2 style: no special tokens at all
    encoder = PairEncoder(tokenizer, 20)
    assert not encoder.has_pair_template
    ids = encoder.encode([Example("1", "the cat sat", "on the mat " * 20, 0)]).input_ids[0]
    assert len(ids) == 20 and tokenizer.eos_token_id in ids  # joined with </s>, truncated longest-first
    assert "'a </s> b'" in encoder.describe()


# ------------------------------------------------------------------------------------------------ adapter


def test_adapter_rows_seeds_and_samples(tmp_path):
    data_dir = write_glue_folder(tmp_path)
    model, tokenizer = backbones()["hf-bert"]
    task = resolve_tasks("glue:rte,boolq")[0].adapter()
    context = EvalContext(model_path=None, data_dir=data_dir, model=model, tokenizer=tokenizer, seeds=[1, 2],
                          log_samples=True, options=GlueOptions(**{**FAST, "epochs": 2}, quiet=True))
    result = task.run(context)
    by = {(r.subtask, r.metric, r.seed): r for r in result.rows}
    assert set(by) == {(m, k, s) for s in (1, 2) for m, k in [("rte", "accuracy"), ("boolq", "accuracy"),
                                                               ("", "score")]}
    for seed in (1, 2):
        rte, boolq, score = by["rte", "accuracy", seed], by["boolq", "accuracy", seed], by["", "score", seed]
        assert score.value == pytest.approx((rte.value + boolq.value) / 2)
        assert score.n == rte.n + boolq.n and score.ci_low <= score.value <= score.ci_high
        assert all(r.scoring == "finetune" for r in (rte, boolq, score))
        assert "no train file" in boolq.notes and "best epoch" in rte.notes
    assert by["rte", "accuracy", 1].n == 80
    assert any("over seeds 1,2" in note for note in result.notes)
    assert any("majority-class guess" in note for note in result.notes)
    assert len(result.items) == 2 * (80 + by["boolq", "accuracy", 1].n)
    item = result.items[0]
    assert item["correct"] == float(item["score_good"] > item["score_bad"]) and item["task"] == "glue"
    table = score_table(RunInfo(run_id="r", git_commit=""), CheckpointInfo(), result.rows)
    assert sorted(set(table.column("seed").to_pylist())) == [1, 2]


def test_adapter_probe_rows_are_labelled(tmp_path):
    data_dir = write_glue_folder(tmp_path)
    model, tokenizer = backbones()["hf-bert"]
    task = resolve_tasks("glue:rte")[0].adapter()
    context = EvalContext(model_path=None, data_dir=data_dir, model=model, tokenizer=tokenizer,
                          options=GlueOptions(probe=True, max_length=64, quiet=True))
    result = task.run(context)
    assert {r.scoring for r in result.rows} == {"probe"}
    assert any("probe" in note for note in result.notes)


def test_options_override_member_settings_which_override_defaults():
    task = resolve_tasks("glue")[0].adapter()
    context = EvalContext(model_path=None, data_dir=Path("."))
    assert task.settings("boolq", task.options(context), context).batch_size == 16
    assert task.settings("wsc", task.options(context), context).epochs == 30
    assert task.settings("rte", task.options(context), context).epochs == 10
    assert task.settings("mrpc", task.options(context), context).selection_metric == "f1"
    context.options = GlueOptions(epochs=2, batch_size=8, lr=None)
    assert task.settings("wsc", task.options(context), context).epochs == 2
    assert task.settings("boolq", task.options(context), context).batch_size == 8
    assert task.settings("boolq", task.options(context), context).lr == 3e-5


# ------------------------------------------------------------------------------------------------ bad input


def _one_line_error(call) -> str:
    with pytest.raises(UserError) as err:
        call()
    message = str(err.value)
    assert "\n" not in message
    return message


def test_missing_split_and_unknown_label_give_one_clear_line(tmp_path):
    data_dir = write_glue_folder(tmp_path)
    task = resolve_tasks("glue")[0].adapter()
    message = _one_line_error(lambda: task.load_member(data_dir, "mrpc"))
    assert "mrpc" in message and "missing split" in message and "mrpc.valid.jsonl" in message
    (data_dir / "glue_filtered" / "mrpc.valid.jsonl").write_text(
        '{"sentence1": "a", "sentence2": "b", "label": 0, "idx": 0}\n')
    message = _one_line_error(lambda: task.load_member(data_dir, "mrpc"))
    assert "mrpc.train.jsonl" in message
    (data_dir / "glue_filtered" / "mrpc.train.jsonl").write_text(
        '{"sentence1": "a", "sentence2": "b", "label": 0, "idx": 0}\n'
        '{"sentence1": "a", "sentence2": "b", "label": 7, "idx": 1}\n')
    message = _one_line_error(lambda: task.load_member(data_dir, "mrpc"))
    assert "record 2" in message and "unknown label 7" in message and "0=not_equivalent" in message
    (data_dir / "glue_filtered" / "mrpc.train.jsonl").write_text('{"sentence1": "a", "label": 0, "idx": 0}\n')
    message = _one_line_error(lambda: task.load_member(data_dir, "mrpc"))
    assert "sentence2" in message and "record 1" in message
    assert _one_line_error(lambda: GlueOptions.of_flags({"lr": -1})).startswith("--lr: ")
    assert _one_line_error(lambda: GlueOptions.of_flags({"epochs": 0}, flags={"epochs": "--glue-epochs"})
                           ).startswith("--glue-epochs: ")
    assert "unknown field options.not_ours" in _one_line_error(
        lambda: eval_config("glue", options={"not_ours": 5}))


def test_member_selection_resolves():
    (request,) = resolve_tasks("glue:rte,mrpc")
    assert request.members == ["mrpc", "rte"]
    assert request.adapter().selected == ["mrpc", "rte"]
    assert resolve_tasks("glue")[0].adapter().selected == sorted(
        ["boolq", "mnli", "mrpc", "multirc", "qqp", "rte", "wsc"])
    with pytest.raises(UserError):
        resolve_tasks("glue:cola")


def test_sealed_split_refuses_reads_until_unsealed():
    sealed = SealedSplit([Example("1", "a", "b", 0)])
    for read in (len, list, lambda s: s[0]):
        with pytest.raises(RuntimeError):
            read(sealed)
    assert len(sealed.unseal()) == 1


# ------------------------------------------------------------------------------------------------ batching


def test_batches_cover_every_example_once_within_their_budgets():
    from antlm_bench.adapters.glue.encoding import length_grouped_batches, sorted_batches

    lengths = np.random.default_rng(0).integers(3, 300, size=500)
    for batches in (sorted_batches(lengths, 64, max_tokens=2048),
                    length_grouped_batches(lengths, 32, np.random.default_rng(1), mega=4)):
        flat = np.concatenate(batches)
        assert sorted(flat.tolist()) == list(range(500))
    inference = sorted_batches(lengths, 64, max_tokens=2048)
    assert all(len(b) * lengths[b].max() <= 2048 or len(b) == 1 for b in inference)
    assert len(inference[0]) < len(inference[-2])  # long rows go in small batches, short rows in big ones
    assert [len(b) for b in sorted_batches(lengths, 64)] == [64] * 7 + [52]
    # training batches hold similar lengths: far less padding than a plain shuffle
    grouped = length_grouped_batches(lengths, 32, np.random.default_rng(1), mega=4)
    shuffled = [np.random.default_rng(2).permutation(500)[i:i + 32] for i in range(0, 500, 32)]

    def padding(batches):
        return sum(len(b) * lengths[b].max() - lengths[b].sum() for b in batches)

    assert padding(grouped) < 0.5 * padding(shuffled)


# ------------------------------------------------------------------------------------------------ command line


def test_eval_command_runs_glue_with_its_flags(tmp_path):
    from typer.testing import CliRunner

    from antlm_bench.cli import app

    data_dir = write_glue_folder(tmp_path / "data")
    model, tokenizer = backbones()["hf-bert"]
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    result = CliRunner().invoke(app, [
        "eval", "--model", str(folder), "--tasks", "glue:rte", "--data-dir", str(data_dir), "--probe",
        "--max-length", "64", "--seeds", "3", "--output", str(tmp_path / "out"), "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "out" / "scores.parquet").to_pylist()
    assert {(r["subtask"], r["metric"], r["scoring"], r["seed"]) for r in rows} == {
        ("rte", "accuracy", "probe", 3), ("", "score", "probe", 3)}
    bad = CliRunner().invoke(app, ["eval", "--model", str(folder), "--tasks", "glue:rte", "--seeds", "4,x"])
    assert bad.exit_code != 0


def test_diverging_loss_stops_with_one_line():
    model, tokenizer = backbones()["hf-bert"]
    splits = make_splits(cue_examples(40, 0), cue_examples(10, 1, "r"), 0.2, None, "cue")
    broken = fresh_copy(model)
    with torch.no_grad():
        next(broken.parameters()).fill_(float("nan"))
    message = _one_line_error(lambda: finetune(broken, tokenizer, splits, 2, FinetuneSettings(epochs=1), seed=0))
    assert "lower the learning rate" in message


def test_progress_lines_name_the_metric_and_the_majority_score(real_data_dir, capsys):
    """Every line names its metric (MRPC counts by F1), shows the majority-class score beside it, and the notes
    say how the GLUE score is made, with each member's number: the lines add up to the score."""
    model, tokenizer = backbones()["hf-bert"]
    task = resolve_tasks("glue:mrpc,rte")[0].adapter()
    context = EvalContext(model_path=None, data_dir=real_data_dir, model=model, tokenizer=tokenizer, seeds=[1],
                          limit=40, options=GlueOptions(**{**FAST, "epochs": 1, "max_train_examples": 48}))
    result = task.run(context)
    err = capsys.readouterr().err
    assert "dev f1 " in err and "(best " in err and "@ epoch 1)" in err  # mrpc selects by F1 and says so
    assert "dev accuracy " in err  # rte by accuracy
    mrpc = next(line for line in err.splitlines() if line.startswith("glue/mrpc seed 1: reported"))
    assert re.search(r"reported f1 \d\.\d{4} \(majority class 0\.\d{4}, accuracy \d\.\d{4}\)", mrpc)
    rte = next(line for line in err.splitlines() if line.startswith("glue/rte seed 1: reported"))
    assert re.search(r"reported accuracy \d\.\d{4} \(majority class 0\.\d{4}\)", rte)
    explanation = next(note for note in result.notes if note.startswith("glue score = "))
    assert "F1 (positive class) for mrpc" in explanation and "accuracy for rte" in explanation
    numbers = [float(x) for x in re.findall(r"(?:f1|accuracy) (\d\.\d{4})", explanation.split(": ", 1)[1])]
    score = next(r for r in result.rows if r.subtask == "").value
    assert score == pytest.approx(sum(numbers) / 2, abs=1e-4)
    # the task score row records the same members' majority-class floor, which every summary prints beside it
    from antlm_bench.adapters.glue.task import majority_floor

    floors = [float(re.search(r"majority class (0\.\d{4})", line).group(1)) for line in (mrpc, rte)]
    floor = majority_floor(next(r for r in result.rows if r.subtask == "").notes)
    assert floor == pytest.approx(sum(floors) / 2, abs=1e-4)


def test_run_summary_explains_the_glue_score():
    from antlm_bench.cli.run import score_explanation

    text = score_explanation("glue")
    assert text.startswith("glue score = unweighted mean over 7 members")
    assert "F1 (positive class) for mrpc, qqp" in text
    assert score_explanation("blimp") is None
