"""Multi-process training: `torchrun --nproc-per-node 2` (gloo, CPU) follows the 1-process loss curve."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from trainer_support import ENV, cli_args, tiny_config

from antlm_bench.runs.record import read_record
from antlm_bench.training.reporting import read_metrics


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two torchrun-style processes: ~50 s on 2 cores; -m slow
def test_two_processes_follow_the_one_process_loss_curve(tmp_path: Path) -> None:
    # BabyLlama tiny has no dropout: the two runs compute the same sums, only in another order
    schedule = "1_CLM+1_MLM"
    single = tiny_config(tmp_path, tmp_path / "single", schedule=schedule)
    out = subprocess.run([sys.executable, "-m", "antlm_bench", *cli_args(single)], env=ENV, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]

    # two processes, each accumulating micro-batches of 5 over its half of every global batch of 32
    double = tiny_config(tmp_path, tmp_path / "double", schedule=schedule, micro_batch_size=5)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
                "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), "-m", "antlm_bench"]
    out = subprocess.run([*launcher, *cli_args(double)], env=ENV, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-3000:])

    one, two = read_metrics(tmp_path / "single"), read_metrics(tmp_path / "double")
    assert [m["step"] for m in one] == [m["step"] for m in two] and len(one) >= 6
    assert [m["objective"] for m in one] == [m["objective"] for m in two]
    assert [m["tokens_seen"] for m in one] == [m["tokens_seen"] for m in two]
    loss_one, loss_two = np.array([m["loss"] for m in one]), np.array([m["loss"] for m in two])
    assert np.allclose(loss_one, loss_two, rtol=1e-4, atol=1e-5), np.abs(loss_one - loss_two).max()
    assert loss_one[-1] < loss_one[0]  # it learns at all (else equal curves would prove little)
    state = read_record(tmp_path / "double" / "checkpoints" / "phase-1-MLM")
    assert state.world_size == 2 and state.global_batch_size == 32
    a = load_file(tmp_path / "single" / "checkpoints" / "phase-1-MLM" / "model.safetensors")
    b = load_file(tmp_path / "double" / "checkpoints" / "phase-1-MLM" / "model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-4) for k in a)
