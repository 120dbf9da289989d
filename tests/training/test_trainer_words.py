"""--save-at-words: chck_<N> folders at the first step where the words seen (repeats counted) reach each count,
and a kill -9 / --resume that neither skips nor duplicates one (bit-identical weights)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from safetensors.torch import load_file
from trainer_support import ENV, KILLER, tiny_config

from antlm_bench.config import TrainConfig
from antlm_bench.errors import UserError
from antlm_bench.options import BABYLM_STRICT_SMALL_WORDS, BABYLM_STRICT_WORDS, parse_save_at_words
from antlm_bench.pipeline import score_checkpoint
from antlm_bench.runs.layout import words_checkpoint_name
from antlm_bench.runs.record import read_record
from antlm_bench.training.reporting import read_metrics
from antlm_bench.training.trainer import train

WORDS = "1K,2.5K,5K,6000,9K,11K,500K"  # about 6700 words an epoch, two epochs: 500K is never reached


def test_parse_save_at_words() -> None:
    assert parse_save_at_words("1M,2M, 500K,2M") == [500_000, 1_000_000, 2_000_000]
    # the BabyLM checkpoint grids: strict-small every 1M to 10M then every 10M to 100M; strict adds every 100M
    # to 1000M; "babylm" is the strict-small grid
    small, strict = parse_save_at_words("babylm-strict-small"), parse_save_at_words("Babylm-Strict")
    assert small == BABYLM_STRICT_SMALL_WORDS == parse_save_at_words("babylm") and len(small) == 19
    assert small == [n * 1_000_000 for n in range(1, 10)] + [n * 10_000_000 for n in range(1, 11)]
    assert strict == BABYLM_STRICT_WORDS and len(strict) == 28
    assert strict == small + [n * 100_000_000 for n in range(2, 11)]
    assert [words_checkpoint_name(w) for w in strict[-3:]] == ["chck_800M", "chck_900M", "chck_1000M"]
    assert parse_save_at_words("babylm,babylm-strict,5K") == [5_000] + strict
    assert parse_save_at_words("2.5k,1000") == [1000, 2500]
    assert parse_save_at_words(None) == [] and parse_save_at_words("") == []
    for bad in ("0", "1.5", "2X", "M", "-1M", "babylm-strict-tiny"):
        with pytest.raises(UserError):
            parse_save_at_words(bad)
    assert [words_checkpoint_name(w) for w in (1_000_000, 20_000_000, 5_000, 2_500)] == \
        ["chck_1M", "chck_20M", "chck_5K", "chck_2500"]


def test_config_checks_words(tmp_path: Path) -> None:
    config = TrainConfig(output=tmp_path / "r", save_at_words="5K,1K")  # type: ignore[arg-type]
    assert config.save_at_words == [1000, 5000]
    assert TrainConfig.model_validate_json(config.model_dump_json()).save_at_words == [1000, 5000]
    with pytest.raises(ValidationError):
        TrainConfig(output=tmp_path / "r", eval_every="words")


def test_babylm_strict_plans_28_checkpoints_and_names_those_the_run_cannot_reach(tmp_path: Path, monkeypatch,
                                                                                  capsys) -> None:
    """`train --save-at-words babylm-strict` plans the 28 checkpoints; a run whose schedule ends below some of them
    says at the start which ones it will never reach (here, on ~6,700 words an epoch, every one of them)."""
    from cli_support import run_cli
    from trainer_support import cli_args

    # 1.3 epochs of 4 steps: 5 steps, the 4th an epoch's short last batch (126 sequences, batches of 32)
    config = tiny_config(tmp_path, tmp_path / "run", schedule="1.3_CLM")
    code, _, err = run_cli(monkeypatch, capsys, *cli_args(config), "--save-at-words", "babylm-strict,1K,50K")
    assert code == 0, err[-2000:]
    planned = json.loads((tmp_path / "run" / "run.json").read_text())["config"]["save_at_words"]
    assert planned == [1_000, 50_000] + BABYLM_STRICT_WORDS
    (line,) = [line for line in err.splitlines() if line.startswith("--save-at-words:")]
    never = line.split("never reached: ")[1].split(", ")
    assert never == ["chck_50K"] + [words_checkpoint_name(w) for w in BABYLM_STRICT_WORDS], line
    # the words the line announces are the words the run ends at
    assert f"ends at {read_metrics(tmp_path / 'run')[-1]['words_seen']:,} words seen" in line
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("chck_*")) == ["chck_1K"]


def _expected_steps(run: Path, thresholds: list[int]) -> dict[str, int]:
    """Each count's first step at or after it, from the run's own sizes and the tokens each step logged."""
    record = json.loads((run / "run.json").read_text())
    per_epoch_tokens = record["n_sequences"] * record["seq_len"]
    words = {m["step"]: m["tokens_seen"] * record["n_words"] // per_epoch_tokens for m in read_metrics(run)}
    out = {}
    for threshold in thresholds:
        steps = [s for s in sorted(words) if words[s] >= threshold]
        if steps:
            out[words_checkpoint_name(threshold)] = steps[0]
    return out


def test_words_checkpoints_and_resume(tmp_path: Path) -> None:
    common = dict(schedule="1_CLM+1_MLM", save_every_steps=3, deterministic=True, save_at_words=WORDS)
    reference = tiny_config(tmp_path, tmp_path / "reference", **common)
    train(reference)
    run = tmp_path / "reference"
    record = json.loads((run / "run.json").read_text())
    assert record["n_words"] > 5000  # the test corpus: about 6000 words an epoch
    expected = _expected_steps(run, parse_save_at_words(WORDS))
    folders = sorted(p.name for p in (run / "checkpoints").glob("chck_*"))
    assert folders == sorted(expected) == sorted(["chck_1K", "chck_2500", "chck_5K", "chck_6K", "chck_9K", "chck_11K"])
    for name, step in expected.items():
        state = read_record(run / "checkpoints" / name)
        assert state.step == step, name
        assert state.words_seen >= parse_save_at_words(name[5:])[0]
        # the step before had not reached it: the first step at or after the count
        assert state.words_seen == [m for m in read_metrics(run) if m["step"] == step][0]["words_seen"]
    assert read_record(run / "checkpoints" / "chck_6K").words_seen >= 6000
    metrics = {m["step"]: m["words_seen"] for m in read_metrics(run)}
    for name, step in expected.items():
        assert step == 1 or metrics[step - 1] < int(name[5:].replace("K", "000"))

    # every words checkpoint brings a resume point: kill -9 one step after one (a step that saves nothing) and the
    # resumed run goes on from that words checkpoint's step, redoes the step after it, and skips no checkpoint
    spe = record["steps_per_epoch"]
    saved_at = set(expected.values())
    words_step = max(step for step in saved_at if (step + 1) not in saved_at and (step + 1) % 3 and (step + 1) % spe
                     and step + 1 < record["total_steps"])
    kill_at = words_step + 1
    assert kill_at > 3
    interrupted = tiny_config(tmp_path, tmp_path / "interrupted", **common)
    died = subprocess.run([sys.executable, "-c", KILLER, interrupted.model_dump_json(), str(kill_at)], env=ENV,
                          capture_output=True, text=True, timeout=600)
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    assert read_record(tmp_path / "interrupted" / "last").step == words_step
    train(interrupted.model_copy(update={"resume": True}))
    other = tmp_path / "interrupted"
    assert sorted(p.name for p in (other / "checkpoints").glob("chck_*")) == folders
    for name in folders:
        a = load_file(run / "checkpoints" / name / "model.safetensors")
        b = load_file(other / "checkpoints" / name / "model.safetensors")
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
        assert read_record(other / "checkpoints" / name).step == expected[name]
    assert [m["words_seen"] for m in read_metrics(other)] == [m["words_seen"] for m in read_metrics(run)]


def test_eval_every_words_scores_each_with_the_fast_suite(tmp_path: Path, real_data_dir: Path) -> None:
    import pyarrow.parquet as pq

    config = tiny_config(tmp_path, tmp_path / "run", schedule="1_CLM", save_at_words="2K,5K",
                         eval_every="words", eval_tasks="blimp", eval_limit=2, data_dir=real_data_dir)
    train(config, scorer=score_checkpoint)
    rows = pq.read_table(tmp_path / "run" / "scores.parquet").to_pylist()
    assert {r["checkpoint"] for r in rows} == {"checkpoints/chck_2K", "checkpoints/chck_5K"}
    assert {r["eval_set"] for r in rows} == {"fast-first-2"}  # the fast suite, its first 2 items a subtask
    assert {r["checkpoint"]: r["words_seen"] for r in rows} == {
        f"checkpoints/{name}": read_record(tmp_path / "run" / "checkpoints" / name).words_seen
        for name in ("chck_2K", "chck_5K")}
