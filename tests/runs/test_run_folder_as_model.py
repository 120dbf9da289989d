"""A training run folder is accepted wherever a model is taken (``eval --model``, ``export``): its final
checkpoint, else its resume point ``last`` (a run stopped early), named in the output."""

from __future__ import annotations

import json
import shutil

from cli_support import run_cli

from antlm_bench.runs.layout import model_folder


def _run_folder(tmp_path, llama_dir, finished: bool):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"schedule": "1_CLM+1_CLM"}))
    if finished:
        shutil.copytree(llama_dir, run / "checkpoints" / "phase-1-CLM")
    else:
        shutil.copytree(llama_dir, run / ".resume" / "step-30")
        (run / "last").symlink_to(".resume/step-30")
    return run


def test_eval_takes_a_finished_run_folder_as_its_final_checkpoint(tmp_path, llama_dir, real_data_dir, monkeypatch,
                                                                   capsys):
    run = _run_folder(tmp_path, llama_dir, finished=True)
    code, stdout, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(run), "--tasks", "blimp", "--limit",
                                   "2", "-q", "--data-dir", str(real_data_dir))
    assert code == 0, stderr
    assert "run folder: its final checkpoint checkpoints/phase-1-CLM" in stderr and "blimp" in stdout


def test_eval_takes_a_run_stopped_early_as_its_resume_point(tmp_path, llama_dir, real_data_dir, monkeypatch, capsys):
    run = _run_folder(tmp_path, llama_dir, finished=False)
    code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(run), "--tasks", "blimp", "--limit", "2",
                              "-q", "--data-dir", str(real_data_dir))
    assert code == 0, stderr
    assert "did not finish: its resume point last (step-30)" in stderr


def test_model_folder_passes_model_folders_and_non_runs_through(tmp_path, llama_dir):
    assert model_folder(llama_dir) == (llama_dir, None)
    assert model_folder(tmp_path / "none") == (tmp_path / "none", None)  # the loader says what is wrong
    (tmp_path / "empty").mkdir()
    assert model_folder(tmp_path / "empty") == (tmp_path / "empty", None)
