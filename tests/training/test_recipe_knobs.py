"""A run's own knobs over its recipe (train --lr / --global-batch-size / --warmup-ratio): validated as the recipe
file's values are, applied to the run, recorded in run.json and its configuration fingerprint, and held by a
resume (a resume with other knobs is refused in one line)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError
from trainer_support import ENV, cli_args, tiny_config

from antlm_bench.errors import UserError
from antlm_bench.recipes import Recipe, load_recipe
from antlm_bench.training.reporting import read_metrics
from antlm_bench.training.trainer import Trainer, TrainJob


def test_overrides_replace_the_recipes_values_and_are_validated_like_them():
    recipe = load_recipe("antlm-babyllama")
    tiny = recipe.resolve("tiny")
    assert tiny.overridden() is tiny
    changed = tiny.overridden(lr=2e-3, global_batch_size=8, warmup_ratio=0.05)
    assert changed.name == "tiny" and changed.spec is changed.recipe.presets["tiny"]
    assert changed.recipe.optimizer.lr == 2e-3 and recipe.optimizer.lr == 7e-4
    assert changed.spec.global_batch_size == 8 and changed.spec.micro_batch_size == 8
    assert tiny.spec.global_batch_size == 32  # the recipe it came from is untouched
    small = changed.recipe.presets["small"]
    assert small.global_batch_size == recipe.presets["small"].global_batch_size  # that preset only
    assert {spec.warmup_ratio for spec in changed.recipe.lr_schedules.values()} == {0.05}
    with pytest.raises(UserError, match=r"^recipe antlm-babyllama with this run's overrides: field optimizer.lr"):
        tiny.overridden(lr=3.0)
    with pytest.raises(UserError, match="warmup_ratio"):
        tiny.overridden(warmup_ratio=1.5)


def test_a_presets_own_rate_and_warmup_apply_to_that_preset_and_a_runs_knob_wins():
    document = load_recipe("antlm-babyllama").model_dump()
    document["presets"]["tiny"].update(lr=2e-3, warmup_ratio=0.02, lr_schedules={"MLM": {"kind": "cosine"}})
    recipe = Recipe.model_validate(document)
    tiny = recipe.resolve("tiny").overridden().recipe
    assert tiny.optimizer.lr == 2e-3 and {s.warmup_ratio for s in tiny.lr_schedules.values()} == {0.02}
    # the preset's own MLM schedule replaces the recipe's restarts; CLM keeps the recipe's kind
    assert tiny.lr_schedules["MLM"].kind == "cosine" and tiny.lr_schedules["CLM"].kind == "cosine"
    assert recipe.lr_schedules["MLM"].kind == "cosine_with_restarts"
    assert recipe.resolve("small").overridden().recipe.optimizer.lr == 7e-4  # another preset keeps the recipe's rate
    assert recipe.resolve("tiny").overridden(lr=5e-4).recipe.optimizer.lr == 5e-4  # the run's knob over the preset's
    document["presets"]["tiny"]["lr"] = 0.0
    with pytest.raises(ValidationError, match="lr"):
        Recipe.model_validate(document)


def test_knobs_drive_the_run_and_its_identity(tmp_path):
    plain = Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "plain", max_steps=1)))
    tuned = Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "tuned", max_steps=1, lr=3e-3, global_batch_size=8)))
    assert tuned.facts.global_batch == 8 and plain.facts.global_batch == 32
    n = plain.facts.n_sequences
    assert (plain.facts.steps_per_epoch, tuned.facts.steps_per_epoch) == (-(-n // 32), -(-n // 8))
    assert tuned.facts.config_fingerprint != plain.facts.config_fingerprint
    assert tuned.job.preset.recipe.optimizer.lr == 3e-3 and plain.job.preset.recipe.optimizer.lr == 7e-4
    assert tuned.facts.preset is tuned.job.preset  # the parts get the one resolved preset


def test_the_cli_records_the_knobs_and_a_resume_must_repeat_them(tmp_path):
    run = tmp_path / "run"
    config = tiny_config(tmp_path, run, schedule="1_CLM", max_steps=3, save_every_steps=1)
    out = subprocess.run([sys.executable, "-m", "antlm_bench", *cli_args(config), "--lr", "0.002",
                          "--warmup-ratio", "0", "--max-steps", "3"], env=ENV, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads((run / "run.json").read_text())
    assert record["config"]["lr"] == 0.002 and record["config"]["warmup_ratio"] == 0
    first = read_metrics(run)[0]
    assert first["lr"] == pytest.approx(0.002)  # no warm-up: the first step runs at the peak rate
    with pytest.raises(UserError, match=r"started with --lr 0.002, now the recipe's"):
        Trainer(TrainJob.of(config.model_copy(update={"resume": True})))
    # the same knobs resume
    Trainer(TrainJob.of(config.model_copy(update={"resume": True, "lr": 0.002, "warmup_ratio": 0.0})))
    refused = subprocess.run([sys.executable, "-m", "antlm_bench", *cli_args(config), "--resume", "--lr", "0"],
                             env=ENV, capture_output=True, text=True, timeout=600)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "--lr" in refused.stderr


def test_a_presets_measured_line_is_prose_not_configuration():
    """`measured:` documents what a preset was shown to do (`list models`): editing it must not change any run's
    fingerprints, or every later seed would be another configuration than the seeds it documents."""
    from antlm_bench.recipes import load_recipe
    from antlm_bench.runs.schedule import parse_schedule
    from antlm_bench.training.checkpointer import config_fingerprint, start_fingerprint_config

    recipe = load_recipe("babyllama-clm-only")
    schedule = parse_schedule("2_CLM")
    edited = recipe.model_copy(update={"presets": {**recipe.presets, "cpu": recipe.presets["cpu"].model_copy(
        update={"measured": "something else entirely"})}})
    assert recipe.presets["cpu"].measured and edited.presets["cpu"].measured != recipe.presets["cpu"].measured
    cpu, edited_cpu = recipe.resolve("cpu"), edited.resolve("cpu")
    for precision in ("fp32", "bf16"):
        assert (config_fingerprint(cpu, schedule, precision, "d", "t")
                == config_fingerprint(edited_cpu, schedule, precision, "d", "t"))
        assert (start_fingerprint_config(cpu, schedule, precision)
                == start_fingerprint_config(edited_cpu, schedule, precision))
    lr = recipe.model_copy(update={"presets": {**recipe.presets, "cpu": recipe.presets["cpu"].model_copy(
        update={"lr": 1e-3})}})
    assert config_fingerprint(cpu, schedule, "bf16", "d", "t") != config_fingerprint(
        lr.resolve("cpu"), schedule, "bf16", "d", "t")  # a knob that trains differently still changes it
