"""A run's identity (runs.identity): the weights digest decides "the same networks", the configuration digest what
seeds pool; both recorded when written, and what check does with them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from leaderboard_tables import write_run
from safetensors.torch import load_file, save_file
from trainer_support import tiny_config

from antlm_bench.errors import UserError
from antlm_bench.evaluate import scored_weights_digest
from antlm_bench.results.check import run_check
from antlm_bench.runs.identity import tensors_digest, weights_digest
from antlm_bench.runs.record import read_record
from antlm_bench.training.trainer import Trainer, TrainJob


def _train(tmp: Path, name: str, draw_after_step: int | None = None, **overrides: object) -> Path:
    """A tiny run (1_CLM, a few steps); ``draw_after_step``: one extra number drawn from torch's global RNG after
    that step (the issue's one-line code change: the dropout stream moves, nothing at the start does)."""
    config = tiny_config(tmp, tmp / name, **{"schedule": "1_CLM", "model": "antlm-ltgbert", **overrides})
    trainer = Trainer(TrainJob.of(config))
    if draw_after_step is not None:
        trainer.callbacks.append(lambda info: torch.rand(1) if info.step == draw_after_step else None)
    result = trainer.run()
    assert result.final_checkpoint is not None and result.steps >= 2
    return result.final_checkpoint


def test_same_everything_is_the_same_network_and_one_changed_draw_is_another(tmp_path: Path) -> None:
    first, again = _train(tmp_path, "a"), _train(tmp_path, "b")
    moved = _train(tmp_path, "c", draw_after_step=1)
    a, b, c = (read_record(folder) for folder in (first, again, moved))
    assert a.weights_digest and a.weights_digest == b.weights_digest  # recorded when written
    assert a.weights_digest == weights_digest(first)  # and what anyone recomputes from the files
    assert json.loads((first.parents[1] / "run.json").read_text())["weights_digest"] == a.weights_digest
    # the start is the same (the old fingerprint could not tell), the network is not
    assert c.training_fingerprint == a.training_fingerprint and c.config_fingerprint == a.config_fingerprint
    assert c.weights_digest != a.weights_digest
    # every checkpoint and resume point carries the digest of its own weights
    resume = first.parents[1] / "last"
    assert read_record(resume).weights_digest == weights_digest(resume)


def test_check_takes_the_same_seed_path_only_for_equal_weights(tmp_path: Path) -> None:
    """Scores of the same seed number: items-only (same-seed) when the weights digests are equal, the seed-aware
    path when they differ (a changed draw), whatever the seed label says."""
    tasks = {"blimp": {"p1": [1.0, 0.0] * 20, "p2": [1.0, 1.0, 0.0, 1.0] * 10}}

    def run(root: Path, digest: str) -> Path:
        return write_run(root, "run-seed1", [{"phase_index": 0, "tasks": tasks}], seed=1, weights_digest=digest,
                         config_fingerprint="cfg")

    base = run(tmp_path / "base", "a" * 64)
    same = run(tmp_path / "same", "a" * 64)
    other = run(tmp_path / "other", "c" * 64)
    assert {line.test for line in run_check([same], [base]).lines} == {"same-seed"}
    assert "same-seed" not in {line.test for line in run_check([other], [base]).lines}


def test_the_configuration_digest_covers_corpus_word_cap_precision_and_version(tmp_path: Path,
                                                                                monkeypatch) -> None:
    from antlm_bench.recipes import load_recipe
    from antlm_bench.runs.schedule import parse_schedule
    from antlm_bench.training import checkpointer

    recipe, schedule = load_recipe("antlm-babyllama"), parse_schedule("1_CLM")
    base = dict(preset=recipe.resolve("tiny"), schedule=schedule, precision="fp32", data_hash="d1",
                tokenizer_hash="t1")
    digest = checkpointer.config_fingerprint(**base)
    for change in ({"data_hash": "d2"}, {"tokenizer_hash": "t2"}, {"precision": "bf16"},
                   {"preset": recipe.resolve("small")}, {"schedule": parse_schedule("2_CLM")}):
        assert checkpointer.config_fingerprint(**{**base, **change}) != digest, change
    monkeypatch.setattr(checkpointer, "__version__", "999.0")
    assert checkpointer.config_fingerprint(**base) != digest
    # seeds of one configuration share it: a trained run's seed is not in it
    a = Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "s3", schedule="0.25_CLM"))).facts
    b = Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "s4", schedule="0.25_CLM", seed=4))).facts
    c = Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "w", schedule="0.25_CLM", max_words=3000))).facts
    assert a.config_fingerprint == b.config_fingerprint != c.config_fingerprint


def test_the_digest_reads_the_tensors_not_the_file_layout(tmp_path: Path) -> None:
    tensors = {"b": torch.arange(6, dtype=torch.float32).reshape(2, 3), "a": torch.ones(2, dtype=torch.bfloat16)}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    assert weights_digest(tmp_path) == tensors_digest(dict(reversed(list(tensors.items()))))
    changed = {**tensors, "a": torch.tensor([1.0, 1.0078125], dtype=torch.bfloat16)}
    assert tensors_digest(changed) != weights_digest(tmp_path)
    with pytest.raises(UserError, match="model.safetensors: missing"):
        weights_digest(tmp_path / "none")


def test_weights_changed_after_training_are_not_scored_under_the_recorded_identity(tmp_path: Path) -> None:
    final = _train(tmp_path, "a", model="antlm-babyllama")
    record = read_record(final)
    assert scored_weights_digest(record, final) == record.weights_digest
    weights = load_file(str(final / "model.safetensors"))
    name = sorted(weights)[0]
    weights[name] = weights[name] + 1e-3
    save_file(weights, str(final / "model.safetensors"))
    with pytest.raises(UserError, match="not the weights this checkpoint was saved with"):
        scored_weights_digest(record, final)


# the label (run --label): a name and other random draws, never another configuration


def test_a_label_draws_other_seeds_and_keeps_the_configuration() -> None:
    from antlm_bench.runs.identity import labelled_schedule, training_seed

    assert training_seed(7, None) == 7  # unlabelled runs train exactly as before labels existed
    drawn = {training_seed(7, "negative-control"), training_seed(8, "negative-control"), training_seed(7, "b")}
    assert len(drawn) == 3 and 7 not in drawn and all(0 <= s < 2**31 for s in drawn)
    assert training_seed(7, "negative-control") == training_seed(7, "negative-control")  # a function of both
    assert training_seed(1, "negative-control") == 4666654  # pinned: a change re-draws every labelled run
    assert labelled_schedule("2_CLM", "negative-control") == "2_CLM [negative-control]"
    assert labelled_schedule("2_CLM", None) == "2_CLM"


@pytest.mark.parametrize("bad", ["Negative", "-x", "x-", "a b", "a/b", "x" * 41, "../up"])
def test_a_label_that_cannot_name_a_folder_is_one_line(bad: str) -> None:
    from antlm_bench.options import parse_label

    with pytest.raises(UserError, match="--label .*lower-case letters"):
        parse_label(bad)
    assert parse_label("negative-control") == "negative-control" and parse_label("") is None


def test_a_labelled_run_is_another_network_of_the_same_configuration(tmp_path: Path) -> None:
    from antlm_bench.runs.identity import RunIdentity

    plain, labelled = _train(tmp_path, "plain"), _train(tmp_path, "labelled", label="negative-control")
    a, b = read_record(plain), read_record(labelled)
    assert a.config_fingerprint == b.config_fingerprint  # one configuration under two labels
    assert a.weights_digest != b.weights_digest and a.training_fingerprint != b.training_fingerprint
    assert b.label == "negative-control" and a.label is None and a.seed == b.seed
    run_file = json.loads((labelled.parents[1] / "run.json").read_text())
    assert run_file["label"] == "negative-control" and run_file["seed"] == b.seed
    assert RunIdentity("r", "tiny", "1_CLM", 3, "negative-control").folder_name == "r-tiny-1_CLM-negative-control-seed3"
    assert RunIdentity("r", "tiny", "1_CLM", 3).folder_name == "r-tiny-1_CLM-seed3"
    # a resume continues its own run only: a label is part of which run it is, either way round (the record's
    # missing label is "no label", not "unknown")
    config = tiny_config(tmp_path, tmp_path / "plain", schedule="1_CLM", model="antlm-ltgbert", resume=True)
    with pytest.raises(UserError, match=r"started with label=None, now 'negative-control'; resume with the same"):
        Trainer(TrainJob.of(config.model_copy(update={"label": "negative-control"})))
    with pytest.raises(UserError, match=r"started with label='negative-control', now None"):
        Trainer(TrainJob.of(config.model_copy(update={"output": tmp_path / "labelled"})))


def test_a_damaged_label_in_a_record_is_one_line(tmp_path: Path) -> None:
    from antlm_bench.runs.record import CheckpointRecord

    document = {"schedule": "1_CLM", "phase_index": 0, "phase_objective": "CLM", "step": 1, "label": "../x"}
    with pytest.raises(UserError, match=r"state.json: field label '../x'.*re-save"):
        CheckpointRecord.from_json(document, tmp_path / "state.json")


def test_the_board_keeps_a_labelled_run_in_a_row_of_its_own(tmp_path: Path) -> None:
    import numpy as np
    from leaderboard_tables import correctness

    from antlm_bench.results.leaderboard import build_leaderboard, read_results

    rng = np.random.default_rng(0)
    folders = []
    for seed in (1, 2):
        for label in (None, "negative-control"):
            name = f"run-{label or 'plain'}-{seed}"
            folders.append(write_run(tmp_path, name, [{"phase_index": 0, "tasks": {
                "blimp": {"s": correctness(rng, 200, 0.6)}}}], schedule="1_CLM", seed=seed, label=label,
                config_fingerprint="c" * 16))
    board = build_leaderboard(read_results(folders))
    rows = {row.key[-1]: row for row in board.rows}
    assert set(rows) == {"1_CLM", "1_CLM [negative-control]"}
    assert all(len(row.run_ids) == 2 for row in rows.values())


# the run (RunIdentity): its names, and the one "same run" check


def test_a_committed_run_folder_is_named_by_its_identity_and_its_rows_carry_that_name() -> None:
    """Every run folder committed under leaderboards/ was named by ``run`` (RunIdentity.folder_name): the identity its
    run.json records spells that very name, and every row in it carries it as run_id. A change of spelling would
    split a study's old seeds from its new ones."""
    import pyarrow.parquet as pq

    from antlm_bench.runs.identity import RunIdentity
    from antlm_bench.runs.run_file import read_run_record

    run_files = sorted((Path(__file__).resolve().parents[2] / "leaderboards").rglob("run.json"))
    assert len(run_files) >= 100  # the committed studies
    for run_file in run_files:
        identity = RunIdentity.of_record(read_run_record(run_file))
        assert identity.folder_name == run_file.parent.name
        assert identity.difference(read_run_record(run_file)) is None
        for table in run_file.parent.glob("**/*.parquet"):
            run_ids = set(pq.read_table(table, columns=["run_id"]).column("run_id").to_pylist())
            assert run_ids <= {identity.folder_name}, table


def test_the_run_ids_keep_their_two_spellings() -> None:
    """``run`` rows carry the folder name (the schedule's punctuation as _); ``eval`` of a checkpoint alone carries
    the record's fields joined (its +:() kept), as rows already committed do: both pinned here."""
    from antlm_bench.evaluate import run_info_from_record
    from antlm_bench.runs.identity import RunIdentity
    from antlm_bench.runs.record import CheckpointRecord

    paper = RunIdentity("antlm-babyllama", "tiny", "4_CLM+16_MLM+4_CLM", 42, None)
    assert paper.folder_name == "antlm-babyllama-tiny-4_CLM_16_MLM_4_CLM-seed42"
    assert paper.eval_run_id == "antlm-babyllama-tiny-4_CLM+16_MLM+4_CLM-seed42"
    assert paper.row == "4_CLM+16_MLM+4_CLM"
    mix = RunIdentity("gpt-bert", "cpu", "2_MIX(CLM:1,MLM:15)", 3, "negative-control")
    assert mix.folder_name == "gpt-bert-cpu-2_MIX_CLM_1_MLM_15-negative-control-seed3"
    assert mix.eval_run_id == "gpt-bert-cpu-2_MIX(CLM:1_MLM:15)-negative-control-seed3"
    assert mix.row == "2_MIX(CLM:1,MLM:15) [negative-control]"
    # a record that does not say its recipe, preset or seed (a foreign antlm_state.json): the parts it has
    bare = CheckpointRecord(schedule="1_CLM", phase_index=0, phase_objective="CLM", step=1)
    assert run_info_from_record(bare, None, check_record=False).run_id == "1_CLM-seed"
    record = CheckpointRecord(schedule="2_MIX(CLM:1,MLM:15)", phase_index=0, phase_objective="MIX(CLM:1,MLM:15)",
                              step=1, recipe="gpt-bert", preset="cpu", seed=3, label="negative-control")
    assert run_info_from_record(record, None, check_record=False).run_id == mix.eval_run_id
    assert RunIdentity.of_record(record) == mix


def test_the_same_run_check_names_the_first_field_that_differs() -> None:
    from antlm_bench.runs.identity import RunIdentity
    from antlm_bench.runs.run_file import RunRecord

    mine = RunIdentity("antlm-babyllama", "tiny", "1_CLM+1_MLM", 3, None)
    same = RunRecord(recipe="antlm-babyllama", preset="tiny", schedule="1_CLM+1_MLM", seed=3)
    assert mine.difference(same) is None
    for field, value, words in (("recipe", "antlm-ltgbert", "recipe='antlm-ltgbert', now 'antlm-babyllama'"),
                                ("preset", "cpu", "preset='cpu', now 'tiny'"),
                                ("schedule", "1_MLM", "schedule='1_MLM', now '1_CLM+1_MLM'"),
                                ("seed", 4, "seed=4, now 3"),
                                ("label", "negative-control", "label='negative-control', now None"),
                                ("seed", None, "seed=None, now 3")):  # a record that does not say is not this run
        assert mine.difference(same.model_copy(update={field: value})) == words
    other = same.model_copy(update={"preset": "cpu", "seed": 4})
    assert mine.difference(other) == "preset='cpu', now 'tiny'"  # the first, in the order the fields name a run
