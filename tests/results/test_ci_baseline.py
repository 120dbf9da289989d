"""The CI gate as docs/ci-workflow.md describes it: the committed baseline exists, is the documented tiny run, and
the documented `check` passes against it; a missing baseline is named as the baseline."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from antlm_bench.cli import app

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "ci" / "baseline"
DOCS = ROOT / "docs" / "ci-workflow.md"


def _documented_commands() -> list[list[str]]:
    block = re.search(r"```bash\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S).group(1)
    return [shlex.split(command) for command in block.replace("\\\n", " ").splitlines() if command.strip()]


def test_the_committed_baseline_is_the_documented_tiny_run():
    run, _, check = _documented_commands()
    assert check[:2] == ["antlm-bench", "check"] and check[check.index("--baseline") + 1] == "ci/baseline"
    runs = sorted(p.parent for p in BASELINE.glob("*/scores.parquet"))
    # the gate's one seed is tested against the seed SD of its own configuration: three seeds, the least that work
    assert len(runs) == 3, "docs/ci-workflow.md promises a three-seed baseline at ci/baseline/"
    option = {run[i]: run[i + 1] for i in range(2, len(run) - 1) if run[i].startswith("--")}
    records = [json.loads((folder / "run.json").read_text(encoding="utf-8")) for folder in runs]
    for record in (r["config"] for r in records):
        assert record["model"] == option["--model"] and record["preset"] == option["--preset"]
        assert record["schedule"] == option["--schedule"] and record["max_words"] == int(option["--max-words"])
        assert record["eval_limit"] == int(option["--eval-limit"])
    assert sorted(r["config"]["seed"] for r in records) == [1, 2, 3] and int(option["--seeds"]) in (1, 2, 3)
    assert len({r["config_fingerprint"] for r in records}) == 1  # one configuration, three seed draws
    assert len({r["weights_digest"] for r in records}) == 3 and all(r["weights_digest"] for r in records)
    # made with this version: a new run of the documented command is the same configuration (case 2 of the gate)
    from antlm_bench import __version__

    assert {r["package_version"] for r in records} == {__version__} and {r["schema_version"] for r in records} == {2}
    yml = (ROOT / "docs" / "github-actions-example.yml").read_text(encoding="utf-8")
    assert "--schedule 1_CLM+1_MLM" in yml and "--max-words 20000" in yml and "--limit 40" in yml


def test_documented_check_passes_against_the_baseline_itself(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, ["check", "--results", "ci/baseline", "--baseline", "ci/baseline",
                                      "--tolerance", "0.5", "--alpha", "0.05", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["verdict"] == "no regression"
    # the baseline has no GLUE: its average of three tasks is named by them, never "macro" (the paper's four)
    average = "mean(blimp,blimp_supplement,ewok)"
    assert {line["task"] for line in report["lines"]} == {"blimp", "blimp_supplement", "ewok", average,
                                                          "blimp.margin", "blimp_supplement.margin", "ewok.margin"}
    assert all(line["paired_by_item"] and line["n_items"] > 0 for line in report["lines"] if line["task"] != average)


def test_a_missing_baseline_is_named_as_the_baseline(tmp_path):
    result = CliRunner().invoke(app, ["check", "--results", str(BASELINE), "--baseline", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: --baseline {tmp_path / 'none'}: no such file or folder")
    result = CliRunner().invoke(app, ["check", "--results", str(tmp_path / "new"), "--baseline", str(BASELINE)])
    assert result.exit_code == 2 and result.output.startswith(f"error: --results {tmp_path / 'new'}:")


@pytest.mark.slow
def test_the_tiny_run_reproduces_the_baseline(real_data_dir, tmp_path):
    """The whole gate: the documented tiny run, then the documented check (deterministic on one CPU type)."""
    run, _, check = _documented_commands()
    env = {**os.environ, "ANTLM_BENCH_DATA": str(real_data_dir), "OMP_NUM_THREADS": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = tmp_path / "results" / "ci"
    args = [a if a != "results/ci" else str(out) for a in run[1:]]
    subprocess.run([sys.executable, "-m", "antlm_bench", *args], env=env, check=True, timeout=900, cwd=tmp_path,
                   capture_output=True)
    gate = subprocess.run([sys.executable, "-m", "antlm_bench", "check", "--results", str(out), "--baseline",
                           str(BASELINE)], env=env, timeout=300, capture_output=True, text=True)
    assert gate.returncode == 0, gate.stdout + gate.stderr
