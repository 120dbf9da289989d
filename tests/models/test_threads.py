"""``train`` and ``run`` choose torch's CPU threads as ``eval`` does (one function, models/threads.py): one thread
below 10M parameters unless ``--threads`` or ``$OMP_NUM_THREADS`` says otherwise, and they say what they chose."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
from cli_support import run_cli

import antlm_bench.evaluate as evaluate_module
import antlm_bench.pipeline.request as pipeline_module
from antlm_bench.models import threads


def test_train_run_and_eval_share_one_thread_choice():
    assert evaluate_module.choose_threads is threads.choose_threads
    assert pipeline_module.choose_threads is threads.choose_threads


def test_a_tiny_train_takes_one_thread_and_says_so(tmp_path, real_data_dir):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-m", "antlm_bench", "train", "-o", str(tmp_path / "run"), "--max-words",
                           "2000", "--max-steps", "1", "-q", "--cache-dir", str(tmp_path / "cache"), "--data-dir",
                           str(real_data_dir)], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "torch threads 1 (model size (0.23M parameters < 10M: 1 thread))" in done.stderr, done.stderr


def test_train_threads_option_is_applied(tmp_path, real_data_dir, monkeypatch, capsys):
    before = torch.get_num_threads()
    try:
        code, _, stderr = run_cli(monkeypatch, capsys, "train", "-o", str(tmp_path / "run"), "--max-words", "2000",
                                  "--max-steps", "1", "-q", "--cache-dir", str(tmp_path / "cache"), "--data-dir",
                                  str(real_data_dir), "--threads", "2")
        assert code == 0, stderr
        assert torch.get_num_threads() == 2 and "torch threads 2 (--threads)" in stderr
    finally:
        torch.set_num_threads(before)
    code, _, stderr = run_cli(monkeypatch, capsys, "train", "-o", str(tmp_path / "run2"), "--threads", "0")
    assert code == 2 and "--threads 0: must be at least 1" in stderr and not (tmp_path / "run2").exists()
