"""The GLUE protocols: ``babylm-official`` (as the BabyLM 2025 pipeline) selects on the reported split and pools the
first position of every model; its rows say so and are never ranked or checked together with the default's."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from glue_fixtures import cue_examples, tiny_classifier_backbones, write_glue_folder
from leaderboard_tables import correctness, write_run

from antlm_bench.adapters.base import EvalContext
from antlm_bench.adapters.glue.encoding import Encoded, collate, pad_token_id
from antlm_bench.adapters.glue.finetune import FinetuneSettings, finetune
from antlm_bench.adapters.glue.model import Backbone, SequenceClassifier, fresh_copy
from antlm_bench.adapters.glue.options import GlueOptions
from antlm_bench.adapters.glue.protocol import BABYLM_OFFICIAL, DEFAULT, PROTOCOLS, glue_protocol
from antlm_bench.errors import UserError
from antlm_bench.results.leaderboard import build_leaderboard, read_results
from antlm_bench.results.leaderboard.definition import FINETUNED_SCORING, SCORING_PREFERENCE, SEPARATE_SCORING
from antlm_bench.tasks import resolve_tasks

FAST = {"lr": 3e-3, "batch_size": 16, "epochs": 4, "max_length": 64, "eval_batch_size": 32}


@functools.cache
def backbones() -> dict[str, tuple[object, object]]:
    return tiny_classifier_backbones()


def _one_line(call) -> str:
    with pytest.raises(UserError) as err:
        call()
    assert "\n" not in str(err.value)
    return str(err.value)


# ------------------------------------------------------------------------------------------------ selection


def test_official_protocol_selects_on_the_reported_split_and_default_never_does():
    model, tokenizer = backbones()["hf-bert"]
    train, report = cue_examples(160, 0), cue_examples(60, 1, "r")
    settings = FinetuneSettings(**FAST)

    official = BABYLM_OFFICIAL.splits(train, report, BABYLM_OFFICIAL.settings(settings, "cue"), "cue")
    assert [e.id for e in official.dev] == [e.id for e in report]  # every reported example picks the epoch
    assert len(official.train) == len(train)  # and no training example is held out for it
    outcome = finetune(fresh_copy(model), tokenizer, official, 2, BABYLM_OFFICIAL.settings(settings, "cue"), seed=5)
    assert outcome.selected_on == "reported" and outcome.method == "finetune-official"
    # the reported number is the best of the epochs' scores on that very split: the selection read it
    reported = float(np.mean(outcome.labels == outcome.predictions))
    assert reported == pytest.approx(max(outcome.dev_history), abs=1e-12)
    assert outcome.dev_history[outcome.best_epoch - 1] == max(outcome.dev_history)

    default = DEFAULT.splits(train, report, DEFAULT.settings(settings, "cue"), "cue")
    assert not {e.id for e in default.dev} & {e.id for e in report}
    assert len(default.train) + len(default.dev) == len(train) and default.selected_on == "training slice"


def test_official_protocol_caps_training_examples_without_carving_a_slice():
    settings = BABYLM_OFFICIAL.settings(FinetuneSettings(**FAST, max_train_examples=50), "cue")
    first = BABYLM_OFFICIAL.splits(cue_examples(160, 0), cue_examples(20, 1, "r"), settings, "cue")
    again = BABYLM_OFFICIAL.splits(list(reversed(cue_examples(160, 0))), cue_examples(20, 1, "r"), settings, "cue")
    assert len(first.train) == 50 and [e.id for e in first.train] == [e.id for e in again.train]
    assert len(first.dev) == 20


# ------------------------------------------------------------------------------------------------ pooling


def _features(name: str, pooling: str, attention: str, rows: list[list[int]]) -> np.ndarray:
    model, tokenizer = backbones()[name]
    classifier = SequenceClassifier(Backbone(fresh_copy(model), attention), 2, 0.0, pooling).eval()
    encoded = Encoded(rows, None, np.zeros(len(rows), dtype=np.int64))
    batch = collate(encoded, list(range(len(rows))), pad_token_id(tokenizer))
    import torch

    with torch.inference_mode():
        return classifier.features(batch).numpy()


@pytest.mark.parametrize("name", ["hf-llama", "babyllama"])
def test_official_protocol_pools_the_first_position_of_a_decoder_with_its_causal_attention(name):
    if name not in backbones():
        pytest.skip("model backends not available")
    model, tokenizer = backbones()[name]
    official = BABYLM_OFFICIAL.settings(FinetuneSettings(**FAST), "rte")
    classifier = SequenceClassifier(Backbone(model, official.attention), 2, 0.0, official.pooling)
    assert (classifier.pooling, classifier.backbone.attention) == ("first", "causal")
    default = DEFAULT.settings(FinetuneSettings(**FAST), "rte")
    assert SequenceClassifier(Backbone(model, default.attention), 2, 0.0, default.pooling).pooling == "last"

    # what the pooled vector depends on: the same first token, different rest (and length)
    ids = tokenizer("the cat sat on the mat", add_special_tokens=False)["input_ids"]
    other = tokenizer("a dog ran", add_special_tokens=False)["input_ids"]
    rows = [ids, [ids[0], *other]]
    first = _features(name, official.pooling, official.attention, rows)
    np.testing.assert_allclose(first[0], first[1], atol=1e-5)  # position 0 under causal attention: token 0 only
    last = _features(name, "last", official.attention, rows)
    assert np.abs(last[0] - last[1]).max() > 1e-3  # the default's last position sees the whole input


def test_official_protocol_gives_a_decoder_that_starts_with_bos_one_class():
    """What the official pipeline measures for such a model: position 0 under causal attention is the BOS state,
    the same for every input, so the head can only learn one class (the default reads the last token and learns)."""
    model, tokenizer = backbones()["hf-llama"]
    assert tokenizer("the cat")["input_ids"][0] == tokenizer.bos_token_id
    train, report = cue_examples(160, 0), cue_examples(60, 1, "r")
    outcomes = {}
    for protocol in (DEFAULT, BABYLM_OFFICIAL):
        settings = protocol.settings(FinetuneSettings(**FAST), "cue")
        outcomes[protocol.name] = finetune(fresh_copy(model), tokenizer, protocol.splits(train, report, settings, "cue"),
                                           2, settings, seed=42)
    assert len(set(outcomes["babylm-official"].predictions.tolist())) == 1
    assert len(set(outcomes["default"].predictions.tolist())) == 2


def test_official_protocol_keeps_an_encoders_bidirectional_first_token():
    model, _ = backbones()["hf-bert"]
    official = BABYLM_OFFICIAL.settings(FinetuneSettings(**FAST), "rte")
    classifier = SequenceClassifier(Backbone(model, official.attention), 2, 0.0, official.pooling)
    assert (classifier.pooling, classifier.backbone.attention) == ("first", "bidirectional")
    assert official.length_grouped is False  # the official loader shuffles plainly


def test_a_setting_that_contradicts_the_protocol_is_one_line():
    message = _one_line(lambda: BABYLM_OFFICIAL.settings(FinetuneSettings(pooling="last"), "rte"))
    assert "pooling=last" in message and "babylm-official" in message
    assert "probe" in _one_line(lambda: BABYLM_OFFICIAL.settings(FinetuneSettings(probe=True), "rte"))
    assert "babylm-official" in _one_line(lambda: glue_protocol("official"))
    assert DEFAULT.settings(FinetuneSettings(pooling="last"), "rte").pooling == "last"
    assert glue_protocol(None) is DEFAULT


# ------------------------------------------------------------------------------------------------ rows


def test_adapter_rows_record_the_protocol(tmp_path):
    data_dir = write_glue_folder(tmp_path, n_train=120, n_valid=40)
    model, tokenizer = backbones()["hf-llama"]
    task = resolve_tasks("glue:rte,boolq")[0].adapter()
    context = EvalContext(model_path=None, data_dir=data_dir, model=model, tokenizer=tokenizer, log_samples=True,
                          options=GlueOptions(**{**FAST, "epochs": 2}, quiet=True, protocol="babylm-official"))
    result = task.run(context)
    assert {r.scoring for r in result.rows} == {"finetune-official"}
    assert {i["scoring"] for i in result.items} == {"finetune-official"}
    for row in result.rows:
        assert "glue protocol babylm-official" in row.notes
    rte = next(r for r in result.rows if r.subtask == "rte")
    assert "pooling=first" in rte.notes and "attention=causal" in rte.notes and "(reported accuracy" in rte.notes
    assert rte.n == 40  # the whole reported split, none of it held out
    assert any("glue protocol babylm-official" in note for note in result.notes)

    context.options = GlueOptions(**{**FAST, "epochs": 1, "max_train_examples": 30}, quiet=True)
    plain = task.run(context)
    assert {r.scoring for r in plain.rows} == {"finetune"}
    assert all("glue protocol default" in r.notes for r in plain.rows)
    assert "pooling=last" in next(r for r in plain.rows if r.subtask == "rte").notes


def test_task_spec_defaults_name_the_protocol_and_options_override_it(tmp_path):
    task = resolve_tasks("glue")[0].adapter()
    context = EvalContext(model_path=None, data_dir=Path("."))
    assert task.protocol(task.options(context)) is DEFAULT
    task.defaults = task.defaults.model_copy(update={"protocol": "babylm-official"})
    assert task.protocol(task.options(context)) is BABYLM_OFFICIAL
    assert task.settings("rte", task.options(context), context).scoring == "finetune-official"
    context.options = GlueOptions(protocol="default")
    assert task.protocol(task.options(context)) is DEFAULT
    assert "nope" in _one_line(lambda: GlueOptions(protocol="nope"))


# ------------------------------------------------------------------------------------------------ board, check


def test_every_protocols_scoring_is_known_to_the_board_and_only_the_default_shares_a_column():
    for protocol in PROTOCOLS.values():
        assert protocol.scoring in SCORING_PREFERENCE and protocol.scoring in FINETUNED_SCORING
        assert (protocol.scoring in SEPARATE_SCORING) == (protocol is not DEFAULT)
    assert len({p.scoring for p in PROTOCOLS.values()}) == len(PROTOCOLS)


def _same_run_two_protocols(tmp_path: Path) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    tasks = {t: {"a": correctness(rng, 200, 0.7)} for t in ("blimp", "blimp_supplement", "ewok")}
    default, official = correctness(rng, 100, 0.6), correctness(rng, 100, 0.8)
    write_run(tmp_path / "default", "r1", [{"phase_index": 0, "scoring": {"glue": "finetune"},
                                            "tasks": {**tasks, "glue": {"rte": default}}}])
    write_run(tmp_path / "official", "r1", [{"phase_index": 0, "scoring": {"glue": "finetune-official"},
                                             "tasks": {"glue": {"rte": official}}}])
    return default, official


def test_the_board_never_pools_the_official_protocol_with_the_default(tmp_path):
    default, official = _same_run_two_protocols(tmp_path)
    board = build_leaderboard(read_results([tmp_path]))
    (row,) = board.rows
    assert board.columns == ["blimp", "blimp_supplement", "ewok", "glue", "glue:finetune-official"]
    assert row.cells["glue"].scoring == "finetune" and row.cells["glue"].value == pytest.approx(default.mean())
    assert row.cells["glue:finetune-official"].value == pytest.approx(official.mean())
    four = [row.cells[t].value for t in ("blimp", "blimp_supplement", "ewok", "glue")]
    assert row.macro.value == pytest.approx(np.mean(four))  # the official column stays out of the macro

    alone = build_leaderboard(read_results([tmp_path / "official"]))
    assert alone.columns == ["glue:finetune-official"] and "glue" not in alone.rows[0].cells


def test_check_never_compares_the_official_protocol_with_the_default(tmp_path):
    from antlm_bench.results.check import run_check

    rng = np.random.default_rng(4)
    glue, blimp = correctness(rng, 200, 0.7), correctness(rng, 200, 0.7)

    def write(name: str, scoring: str, tasks: dict) -> Path:
        write_run(tmp_path / name, name, [{"phase_index": 0, "scoring": {"glue": scoring}, "tasks": tasks}],
                  weights_digest="net-0")
        return tmp_path / name

    # identical items: were the two protocols compared, this would pass with a zero gap
    only_glue = {"glue": {"rte": glue}}
    message = _one_line(lambda: run_check([write("new", "finetune-official", only_glue)],
                                          [write("base", "finetune", only_glue)]))
    assert "glue:finetune-official" in message and "baseline: glue" in message
    both = {"glue": {"rte": glue}, "blimp": {"a": blimp}}
    report = run_check([write("new2", "finetune-official", both)], [write("base2", "finetune", both)])
    assert [line.comparison.column for line in report.lines] == ["blimp"]
    assert report.exit_code == 1 and any("glue" in m for m in report.missing)  # a task left out is not a pass


# ------------------------------------------------------------------------------------------------ command line


def test_eval_and_run_take_the_glue_protocol(tmp_path):
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from antlm_bench.cli import app

    data_dir = write_glue_folder(tmp_path / "data", n_train=60, n_valid=20)
    model, tokenizer = backbones()["hf-bert"]
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    common = ["eval", "--model", str(folder), "--tasks", "glue:rte", "--data-dir", str(data_dir), "--no-progress",
              "--max-length", "64", "--epochs", "1"]
    result = CliRunner().invoke(app, [*common, "--glue-protocol", "babylm-official", "--output", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    rows = pq.read_table(tmp_path / "o" / "scores.parquet").to_pylist()
    assert {r["scoring"] for r in rows} == {"finetune-official"}
    assert all("glue protocol babylm-official" in r["notes"] for r in rows)

    bad = CliRunner().invoke(app, [*common, "--glue-protocol", "official"])
    assert bad.exit_code == 2 and "babylm-official" in bad.output
    assert "--glue-protocol" in CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output


def test_run_passes_the_protocol_to_the_glue_options():
    from antlm_bench.config import run_config
    from antlm_bench.pipeline import glue_options

    assert glue_options(run_config(flags={"--glue-protocol": "babylm-official"})).protocol == "babylm-official"
    assert glue_options(run_config()).protocol is None
    bad = run_config(flags={"--glue-protocol": "official"})
    assert "babylm-official" in _one_line(lambda: glue_options(bad))


def test_the_glue_official_board_ranks_only_official_rows(tmp_path):
    from antlm_bench.results.leaderboard import load_definition

    _, official = _same_run_two_protocols(tmp_path)
    board = build_leaderboard(read_results([tmp_path]), load_definition("glue-official"))
    (row,) = board.rows
    assert board.columns == ["glue:finetune-official"]
    assert row.macro.value == pytest.approx(official.mean())
