"""optimizer_at_phase: keep carries AdamW's moments and step count across a phase boundary, reset starts them
from zero; the LR schedule restarts either way, and a resumed run repeats either policy exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from trainer_support import tiny_config

import antlm_bench.training.trainer as trainer_module
from antlm_bench.recipes import Recipe, load_recipe
from antlm_bench.training.trainer import Trainer, TrainJob, train


def _with_policy(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    def patched(name: str) -> Recipe:
        return load_recipe(name).model_copy(update={"optimizer_at_phase": policy})

    monkeypatch.setattr(trainer_module, "load_recipe", patched)


def test_recipes_state_their_policy() -> None:
    assert load_recipe("antlm-babyllama").optimizer_at_phase in ("keep", "reset")
    assert Recipe.model_fields["optimizer_at_phase"].default == "keep"  # a recipe without the key: as always


@pytest.mark.parametrize("policy", ["keep", "reset"])
def test_the_policy_decides_adams_step_count_after_a_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            policy: str) -> None:
    _with_policy(monkeypatch, policy)
    seen: dict[int, float] = {}

    def record(info) -> None:
        state = next(iter(trainer.optimizer.state.values()))
        seen[info.step] = float(state["step"])

    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.5_CLM+0.5_MLM")
    trainer = Trainer(TrainJob.of(config), callbacks=[record])
    trainer.run()
    boundary = trainer.steps.plans[1].start_step
    assert seen[boundary] == boundary
    assert seen[boundary + 1] == (1 if policy == "reset" else boundary + 1)


def test_reset_resumes_bit_for_bit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_policy(monkeypatch, "reset")
    common = dict(schedule="0.5_CLM+0.5_MLM+0.5_CLM", save_every_steps=2, deterministic=True)
    train(tiny_config(tmp_path, tmp_path / "full", **common))
    # stop inside the second phase, and again exactly at a phase end, then resume each time
    part = tiny_config(tmp_path, tmp_path / "part", **common)
    phases = json.loads((tmp_path / "full" / "run.json").read_text())["phases"]
    second_end = phases[0]["steps"] + phases[1]["steps"]
    first = train(part.model_copy(update={"max_steps": phases[0]["steps"] + 1}))  # one step after the reset
    assert first.stopped_early
    # then to the end of the second phase: the next start resumes exactly at a boundary, before its reset
    assert train(part.model_copy(update={"resume": True, "max_steps": second_end})).steps == second_end
    train(part.model_copy(update={"resume": True}))
    for name in ("phase-1-MLM", "phase-2-CLM"):
        a = load_file(tmp_path / "full" / "checkpoints" / name / "model.safetensors")
        b = load_file(tmp_path / "part" / "checkpoints" / name / "model.safetensors")
        assert all(torch.equal(a[k], b[k]) for k in a), name
