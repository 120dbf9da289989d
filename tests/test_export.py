"""``antlm-bench export CKPT --format babylm OUT``: the final model with tokenizer and code, words-seen
checkpoints as chck_<N>M folders, no optimizer state; the folder loads with transformers' Auto classes."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.data.tokenizer import train_tokenizer
from antlm_bench.errors import UserError
from antlm_bench.export import export_babylm
from antlm_bench.models import ltgbert
from antlm_bench.training.checkpoint import write_checkpoint

TEXT = ["the cat sat on the mat and the dog ran to the park with a ball"] * 20


def _run(tmp_path):
    """A run folder: two phase checkpoints (one a resume point with optimizer state) and two words-seen ones."""
    tokenizer = train_tokenizer(TEXT, vocab_size=300)
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
           "pad_token_id": tokenizer.pad_token_id, "mask_token_id": tokenizer.mask_token_id}
    torch.manual_seed(0)
    config = ltgbert.make_config(vocab_size=300, hidden_size=32, n_layers=1, n_heads=2, intermediate_size=48,
                                 max_position_embeddings=64, position_bucket_size=8, tie_word_embeddings=True,
                                 dropout=0.0, **ids)
    model = ltgbert.LtgBertForMaskedLM(config).eval()
    run = tmp_path / "run"
    for name, step in (("phase-0-CLM", 5), ("phase-1-MLM", 10), ("chck_10M", 8), ("chck_1M", 2)):
        write_checkpoint(run / "checkpoints" / name, model, tokenizer, {"step": step},
                         trainer_state={"step": step} if name == "phase-1-MLM" else None)
    return run, model


def test_export_babylm_layout_and_loading(tmp_path):
    run, model = _run(tmp_path)
    out = tmp_path / "submission"
    result = CliRunner().invoke(app, ["export", str(run), "--format", "babylm", str(out)])
    assert result.exit_code == 0, result.output
    assert "phase-1-MLM" in result.output and "chck_1M, chck_10M" in result.output
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "modeling_ltgbert.py", "chck_1M", "chck_10M"} <= names
    assert "trainer_state.pt" not in names and json.loads((out / "antlm_state.json").read_text())["step"] == 10
    for folder in (out, out / "chck_1M"):
        assert (folder / "modeling_ltgbert.py").is_file() and "auto_map" in json.loads((folder / "config.json").read_text())
    loaded = AutoModelForMaskedLM.from_pretrained(out, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    ids = tokenizer("the cat sat", return_tensors="pt").input_ids
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, model(ids).logits)


def test_export_refuses_existing_output_and_non_models(tmp_path):
    run, _ = _run(tmp_path)
    out = tmp_path / "out"
    export_babylm(run / "checkpoints" / "phase-0-CLM", out)
    with pytest.raises(UserError, match="already exists"):
        export_babylm(run, out)
    assert export_babylm(run, out, overwrite=True).source.name == "phase-1-MLM"
    with pytest.raises(UserError, match="neither a model folder"):
        export_babylm(tmp_path / "nothing", tmp_path / "out2")
    result = CliRunner().invoke(app, ["export", str(run), "--format", "zip", str(tmp_path / "out3")])
    assert result.exit_code == 2 and "unknown" in result.output
