"""Kill -9 in the middle of a phase, --resume, and get bit-identical weights to an uninterrupted run."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from trainer_support import ENV, KILLER, cli_args, tiny_config, train_by_cli

from antlm_bench.runs.record import read_record
from antlm_bench.training.reporting import read_metrics
from antlm_bench.training.trainer import train


def _weights(run: Path, name: str) -> dict[str, torch.Tensor]:
    return load_file(run / "checkpoints" / name / "model.safetensors")


def _assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


def _losses(run: Path) -> list[tuple[int, str, float, float]]:
    return [(m["step"], m["objective"], m["loss"], m["lr"]) for m in read_metrics(run)]


def test_kill_mid_phase_then_resume_gives_identical_weights(tmp_path: Path) -> None:
    # LTG-BERT tiny: dropout 0.1 (so the RNG state must come back), span masking, MIX draws, MNTP
    schedule = "1_CLM+1_MIX(CLM:1,MLM:2)+0.5_MNTP"
    common = dict(model="antlm-ltgbert", schedule=schedule, save_every_steps=3, deterministic=True)
    reference = tiny_config(tmp_path, tmp_path / "reference", **common)
    train_by_cli(reference)
    final = read_record(tmp_path / "reference" / "checkpoints" / "phase-2-MNTP")
    spe = final.steps_per_epoch
    assert spe >= 3 and final.step == 2 * spe + max(1, round(0.5 * spe))

    # the second run dies right after a step that saved nothing, in the middle of the MIX phase
    interrupted = tiny_config(tmp_path, tmp_path / "interrupted", **common)
    kill_at = spe + 3 if (spe + 3) % 3 else spe + 2
    assert spe < kill_at < 2 * spe and kill_at % 3 != 0
    died = subprocess.run([sys.executable, "-c", KILLER, interrupted.model_dump_json(), str(kill_at)], env=ENV,
                          capture_output=True, text=True, timeout=600)
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    resumed_from = read_record(tmp_path / "interrupted" / "last")
    assert resumed_from.step == kill_at - kill_at % 3 and resumed_from.phase_index == 1
    assert not resumed_from.phase_complete
    assert [m["step"] for m in read_metrics(tmp_path / "interrupted")] == list(range(1, kill_at + 1))

    train_by_cli(interrupted.model_copy(update={"resume": True}))
    for name in ("phase-1-MIX", "phase-2-MNTP"):
        _assert_same_weights(_weights(tmp_path / "reference", name), _weights(tmp_path / "interrupted", name))
    # the metrics log tells the same story: the steps run twice were cut at the resume point, not duplicated
    assert _losses(tmp_path / "interrupted") == _losses(tmp_path / "reference")


def test_resume_of_a_finished_run_changes_nothing(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.5_CLM")
    first = train(config)
    before = _weights(tmp_path / "run", "phase-0-CLM")
    again = train(config.model_copy(update={"resume": True}))
    assert again.steps == first.steps and again.losses == []
    _assert_same_weights(before, _weights(tmp_path / "run", "phase-0-CLM"))
    assert [m["step"] for m in read_metrics(tmp_path / "run")] == list(range(1, first.steps + 1))


@pytest.mark.slow
def test_kill_at_random_moments_then_resume(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """kill -9 from outside at random times (inside checkpoint writes too), resume until done, compare."""
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("slow (about a minute): run with -m slow")
    common = dict(model="antlm-babyllama", schedule="1_CLM+1_MLM+1_CLM", save_every_steps=1, deterministic=True)
    reference = tiny_config(tmp_path, tmp_path / "reference", **common)
    train_by_cli(reference)
    run = tiny_config(tmp_path, tmp_path / "run", **common)
    rng = random.Random(0)
    metrics = tmp_path / "run" / "metrics.jsonl"
    kills = 0
    for attempt in range(40):
        args = cli_args(run.model_copy(update={"resume": attempt > 0}))
        proc = subprocess.Popen([sys.executable, "-m", "antlm_bench", *args], env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        lines = len(metrics.read_text().splitlines()) if metrics.exists() else 0
        while proc.poll() is None and (not metrics.exists() or len(metrics.read_text().splitlines()) <= lines):
            time.sleep(0.01)  # wait until this attempt trains (imports take seconds), then kill at a random moment
        try:
            # the first attempts die early so that at least three kills happen even on a fast, idle machine
            proc.wait(timeout=rng.uniform(0.0, 0.15 if attempt < 3 else 0.6))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        assert proc.returncode == 0
        break
    else:
        pytest.fail("the run never finished")
    assert kills >= 3
    _assert_same_weights(_weights(tmp_path / "reference", "phase-2-CLM"), _weights(tmp_path / "run", "phase-2-CLM"))
