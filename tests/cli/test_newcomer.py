"""Newcomer polish (issue 16): the broken file is named, eval's --device default agrees with run and train, and
the CPU thread count follows the model's size and is recorded."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from cli_support import run_cli

from antlm_bench.errors import UserError
from antlm_bench.evaluate import evaluate
from antlm_bench.models.threads import choose_threads
from antlm_bench.scoring import load_scoring_model


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
def test_broken_json_is_named_not_the_tokenizer(llama_dir, tmp_path, name):
    folder = tmp_path / "model"
    shutil.copytree(llama_dir, folder)
    (folder / name).write_text('{"model_type": "llama",\n  "hidden_size": 64,,\n}')
    with pytest.raises(UserError) as caught:
        load_scoring_model(folder)
    message = str(caught.value)
    assert f"{folder / name}:2:" in message  # the broken file, with its line
    assert "no usable tokenizer" not in message and "save the tokenizer" not in message


def test_eval_device_defaults_to_auto_and_takes_cuda_n(llama_dir, real_data_dir, tmp_path, monkeypatch, capsys):
    code, stdout, _ = run_cli(monkeypatch, capsys, "eval", "--help")
    assert code == 0 and "auto" in stdout and "cuda:N" in stdout
    out = tmp_path / "out"
    code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(llama_dir), "--tasks", "blimp_supplement",
                              "--limit", "2", "--output", str(out), "--no-progress", "--data-dir", str(real_data_dir))
    assert code == 0, stderr
    record = json.loads((out / "eval.json").read_text())
    assert record["config"]["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(llama_dir), "--device", "cuda:1")
        assert code == 2 and "CUDA is not available" in stderr
    code, _, stderr = run_cli(monkeypatch, capsys, "eval", "--model", str(llama_dir), "--device", "gpu")
    assert code == 2 and "--device gpu: unknown; use auto, cpu, cuda or cuda:N" in stderr


def test_thread_choice_rules(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert choose_threads(None, 230_000, "cpu") == (1, "model size (0.23M parameters < 10M: 1 thread)")
    assert choose_threads(3, 230_000, "cpu") == (3, "--threads")
    big, why = choose_threads(None, 100_000_000, "cpu")
    assert big == torch.get_num_threads() and why.startswith("torch default")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert choose_threads(None, 230_000, "cpu")[1] == "$OMP_NUM_THREADS"
    with pytest.raises(UserError, match="--threads 0"):
        choose_threads(0, None, "cpu")


def test_tiny_model_scores_with_one_thread_and_records_it(llama_dir, real_data_dir, tmp_path, monkeypatch):
    import antlm_bench.scoring as scoring  # the minimal-pair adapter imports score_pairs from here when it scores

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    seen: list[int] = []
    original = scoring.score_pairs

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(scoring, "score_pairs", spy)
    torch.set_num_threads(2)
    try:
        evaluate(str(llama_dir), "blimp_supplement", limit=2, output_dir=tmp_path / "o",
               data_dir=real_data_dir, progress=False)
        assert torch.get_num_threads() == 2  # restored afterwards
        assert seen and set(seen) == {1}
        config = json.loads((tmp_path / "o" / "eval.json").read_text())["config"]
        assert config["torch_threads"] == 1 and config["torch_threads_reason"].startswith("model size")
        seen.clear()
        explicit = evaluate(str(llama_dir), "blimp_supplement", limit=2, data_dir=real_data_dir, progress=False,
                            threads=2)
        assert set(seen) == {2}
        assert explicit.run["config"]["torch_threads"] == 2
        assert explicit.run["config"]["torch_threads_reason"] == "--threads"
    finally:
        torch.set_num_threads(1)


def test_tokenizer_loader_names_a_broken_config(llama_dir, tmp_path):
    from antlm_bench.data.tokenizer import load_tokenizer

    folder = tmp_path / "model"
    shutil.copytree(llama_dir, folder)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(UserError) as caught:
        load_tokenizer(folder)
    assert f"{folder / 'config.json'}:1:2: not valid JSON" in str(caught.value)
