"""The offline lm-eval task YAMLs shipped in antlm_bench/lm_eval_tasks: lm-eval reads the BabyLM data folder
through them, with the hub switched off, and its accuracy equals antlm-bench's own scorer's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.evaluate import evaluate

TASKS = Path(__file__).resolve().parents[2] / "antlm_bench" / "lm_eval_tasks"


def test_the_command_prints_the_include_path_and_lists_the_tasks():
    result = CliRunner().invoke(app, ["lm-eval-tasks"])
    assert result.exit_code == 0
    assert Path(result.output.strip()) == TASKS and (TASKS / "antlm_data.py").is_file()
    listed = CliRunner().invoke(app, ["lm-eval-tasks", "--list"])
    names = listed.output.split()
    assert "antlm_blimp_filtered" in names and "antlm_blimp_supplement_hypernym" in names
    assert "antlm_ewok_filtered_agent_properties" in names
    assert sum(n.startswith("antlm_blimp_filtered_") for n in names) == 67


def test_lm_eval_runs_offline_on_a_shipped_task_and_agrees_with_our_scorer(llama_dir, real_data_dir, tmp_path):
    """lm-eval's own CLI, in a fresh process with the hub off: BLiMP supplement (hypernym) and one EWoK domain
    read from the data folder; accuracy equals `antlm-bench eval --scoring clm` on the same items."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "ANTLM_BENCH_DATA": str(real_data_dir), "HF_DATASETS_CACHE": str(tmp_path / "ds")}
    include = subprocess.run([sys.executable, "-m", "antlm_bench", "lm-eval-tasks"], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
    out = tmp_path / "lm_eval"
    done = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={llama_dir},dtype=float32",
         "--include_path", include, "--tasks", "antlm_blimp_supplement_hypernym,antlm_ewok_filtered_social_properties",
         "--limit", "12", "--batch_size", "4", "--device", "cpu", "--output_path", str(out)],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    (result_file,) = out.rglob("results_*.json")
    results = json.loads(result_file.read_text())["results"]
    ours = evaluate(str(llama_dir), "blimp_supplement", scoring="clm", limit=12, data_dir=real_data_dir,
                    progress=False)
    mine = next(r for r in ours.scores.to_pylist() if r["subtask"] == "hypernym")
    assert results["antlm_blimp_supplement_hypernym"]["acc,none"] == pytest.approx(mine["value"], abs=1e-9)
    assert 0.0 <= results["antlm_ewok_filtered_social_properties"]["acc,none"] <= 1.0
