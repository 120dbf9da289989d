"""SIGINT / SIGTERM during training: the step under way finishes, a resume point is written, one line says
``interrupted at step N; rerun with --resume``, the exit status is 130 / 143; --resume then ends with the weights
of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from trainer_support import cli_args, tiny_config

from antlm_bench.runs.record import read_record
from antlm_bench.training.reporting import read_metrics

SCHEDULE = "2_CLM+2_MLM"
ENV_KEYS = {"OMP_NUM_THREADS": "1"}


def _env() -> dict[str, str]:
    return {**os.environ, **ENV_KEYS}


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(run / "checkpoints" / "phase-1-MLM" / "model.safetensors")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_in_process_stops_after_the_step_and_resume_is_bit_identical(tmp_path: Path, sig: int,
                                                                              code: int) -> None:
    from antlm_bench.training.trainer import Trainer, TrainingInterrupted, TrainJob, train

    common = dict(schedule=SCHEDULE)
    train(tiny_config(tmp_path, tmp_path / "reference", **common))
    config = tiny_config(tmp_path, tmp_path / "run", **common)

    def send(info) -> None:  # the signal arrives in the middle of the run, between two steps' work
        if info.step == 3:
            os.kill(os.getpid(), sig)

    # the handlers the trainer found are the ones it leaves (a shell's background job starts with SIGINT ignored:
    # compare with what was there, not with Python's default)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(TrainingInterrupted, match=r"^interrupted at step 3; rerun with --resume$") as caught:
        Trainer(TrainJob.of(config), callbacks=[send]).run()
    assert caught.value.exit_code == code and caught.value.step == 3
    assert read_record(tmp_path / "run" / "last").step == 3
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "interrupted"
    assert {s: signal.getsignal(s) for s in before} == before
    train(config.model_copy(update={"resume": True}))
    a, b = _weights(tmp_path / "reference"), _weights(tmp_path / "run")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_training_keeps_a_resume_point_and_resume_is_bit_identical(tmp_path: Path, sig: int,
                                                                                code: int) -> None:
    common = dict(schedule=SCHEDULE, deterministic=True)
    reference = tiny_config(tmp_path, tmp_path / "reference", **common)
    done = subprocess.run([sys.executable, "-m", "antlm_bench", *cli_args(reference)], env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]

    config = tiny_config(tmp_path, tmp_path / "run", **common)
    process = subprocess.Popen([sys.executable, "-m", "antlm_bench", *cli_args(config)], env=_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None:  # a few steps in, then the signal
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == code, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    step = len(read_metrics(tmp_path / "run"))
    assert lines[-1] == f"interrupted at step {step}; rerun with --resume"
    assert sum("interrupted" in line for line in lines) == 1 and "Traceback" not in stderr
    assert read_record(tmp_path / "run" / "last").step == step  # the resume point is the step it named
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["status"] == "interrupted" and record["step"] == step
    total = json.loads((tmp_path / "reference" / "run.json").read_text())["total_steps"]
    assert 3 <= step < total

    resumed = subprocess.run([sys.executable, "-m", "antlm_bench", *cli_args(config.model_copy(update={
        "resume": True}))], env=_env(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed from" in resumed.stderr and f"at step {step}" in resumed.stderr
    a, b = _weights(tmp_path / "reference"), _weights(tmp_path / "run")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [m["loss"] for m in read_metrics(tmp_path / "run")] == [m["loss"] for m in read_metrics(
        tmp_path / "reference")]
