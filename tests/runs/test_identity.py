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
from antlm_bench.training.trainer import Trainer


def _train(tmp: Path, name: str, draw_after_step: int | None = None, **overrides: object) -> Path:
    """A tiny run (1_CLM, a few steps); ``draw_after_step``: one extra number drawn from torch's global RNG after
    that step (the issue's one-line code change: the dropout stream moves, nothing at the start does)."""
    trainer = Trainer(tiny_config(tmp, tmp / name, **{"schedule": "1_CLM", "model": "antlm-ltgbert", **overrides}))
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
    base = dict(recipe=recipe, preset="tiny", schedule=schedule, precision="fp32", data_hash="d1",
                tokenizer_hash="t1")
    digest = checkpointer.config_fingerprint(**base)
    for change in ({"data_hash": "d2"}, {"tokenizer_hash": "t2"}, {"precision": "bf16"}, {"preset": "small"},
                   {"schedule": parse_schedule("2_CLM")}):
        assert checkpointer.config_fingerprint(**{**base, **change}) != digest, change
    monkeypatch.setattr(checkpointer, "__version__", "999.0")
    assert checkpointer.config_fingerprint(**base) != digest
    # seeds of one configuration share it: a trained run's seed is not in it
    a = Trainer(tiny_config(tmp_path, tmp_path / "s3", schedule="0.25_CLM")).facts
    b = Trainer(tiny_config(tmp_path, tmp_path / "s4", schedule="0.25_CLM", seed=4)).facts
    c = Trainer(tiny_config(tmp_path, tmp_path / "w", schedule="0.25_CLM", max_words=3000)).facts
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
    from antlm_bench.runs.identity import run_folder_name

    plain, labelled = _train(tmp_path, "plain"), _train(tmp_path, "labelled", label="negative-control")
    a, b = read_record(plain), read_record(labelled)
    assert a.config_fingerprint == b.config_fingerprint  # one configuration under two labels
    assert a.weights_digest != b.weights_digest and a.training_fingerprint != b.training_fingerprint
    assert b.label == "negative-control" and a.label is None and a.seed == b.seed
    run_file = json.loads((labelled.parents[1] / "run.json").read_text())
    assert run_file["label"] == "negative-control" and run_file["seed"] == b.seed
    assert run_folder_name("r", "tiny", "1_CLM", 3, "negative-control") == "r-tiny-1_CLM-negative-control-seed3"
    assert run_folder_name("r", "tiny", "1_CLM", 3) == "r-tiny-1_CLM-seed3"


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
