"""An export loads whole in an evaluation set-up pinned to transformers 4.x (issue #55): the tokenizer through
``AutoTokenizer`` and the model through the Auto classes the BabyLM pipeline uses, giving the logits that
antlm-bench's own transformers 5 gives.

transformers 4.x cannot be imported beside 5 in one process, so the export is loaded in a subprocess of a second
environment with transformers 4.57.1 and tokenizers 0.22.1: ``$ANTLM_BENCH_TF4_PYTHON``, else
``.venv-tf4/bin/python`` (both made by ``make test``, the README's test command). Without it the test fails under
CI and skips elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from antlm_bench.data.tokenizer import PORTABLE_TOKENIZER_CLASS, train_tokenizer
from antlm_bench.export import export_babylm
from antlm_bench.models import build_model
from antlm_bench.recipes import load_recipe
from antlm_bench.runs.record import CheckpointRecord
from antlm_bench.training.checkpoint import write_checkpoint

REPO = Path(__file__).resolve().parents[2]
TEXT = ["the cat sat on the mat and the dog ran to the park with a ball"] * 20
SENTENCE = "the dog sat on the ball"

# run by the transformers 4.x interpreter: load each export as an evaluation pipeline does, print what it computed
LOADER = """
import json, sys
import torch, transformers
from transformers import (AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSequenceClassification,
                          AutoTokenizer)

folder, classes, sentence = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
tokenizer = AutoTokenizer.from_pretrained(folder)
ids = tokenizer(sentence, return_tensors="pt").input_ids
out = {"transformers": transformers.__version__, "tokenizer": type(tokenizer).__name__, "ids": ids[0].tolist(),
       "mask_token_id": tokenizer.mask_token_id, "pad_token_id": tokenizer.pad_token_id, "logits": {}}
for name in classes:
    auto = {"AutoModelForCausalLM": AutoModelForCausalLM, "AutoModelForMaskedLM": AutoModelForMaskedLM,
            "AutoModelForSequenceClassification": AutoModelForSequenceClassification}[name]
    model = auto.from_pretrained(folder, trust_remote_code=True).eval()
    out.setdefault("classes", {})[name] = type(model).__name__
    if name != "AutoModelForSequenceClassification":  # a fresh head: nothing to compare
        with torch.no_grad():
            out["logits"][name] = model(input_ids=ids).logits.double().tolist()
print(json.dumps(out))
"""


def _transformers4_python() -> Path:
    given = os.environ.get("ANTLM_BENCH_TF4_PYTHON")
    python = Path(given) if given else REPO / ".venv-tf4" / "bin" / "python"
    if python.is_file():
        return python
    message = (f"no transformers 4.x environment at {python} ($ANTLM_BENCH_TF4_PYTHON or .venv-tf4): `make test` "
               "makes it (python3 -m venv .venv-tf4; pip install torch transformers==4.57.1 tokenizers==0.22.1)")
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _export(tmp_path: Path, recipe: str) -> tuple[Path, torch.nn.Module, object]:
    tokenizer = train_tokenizer(TEXT, vocab_size=300)
    torch.manual_seed(0)
    model = build_model(load_recipe(recipe).resolve("tiny"), tokenizer).eval()
    record = CheckpointRecord(schedule="1_CLM", phase_index=0, phase_objective="CLM", step=1,
                              phases=({"index": 0, "objective": "CLM"},))
    checkpoint = write_checkpoint(tmp_path / recipe / "checkpoints" / "phase-0-CLM", model, tokenizer, record)
    # a checkpoint names the portable class too (plain transformers 4.x loads it where antlm-bench is not installed)
    assert json.loads((checkpoint / "tokenizer_config.json").read_text())["tokenizer_class"] == PORTABLE_TOKENIZER_CLASS
    out = tmp_path / f"{recipe}-export"
    export_babylm(checkpoint, out)
    return out, model, tokenizer


def _load_under_transformers4(python: Path, folder: Path, classes: list[str], tmp_path: Path) -> dict:
    # the 4.x environment alone: not this checkout's package, no hub, remote code copied into a cache of its own
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HF_HOME", "HF_MODULES_CACHE")}
    env.update({"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    done = subprocess.run([str(python), "-c", LOADER, str(folder), ",".join(classes), SENTENCE], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("recipe", "classes"), [
    ("antlm-babyllama", ["AutoModelForCausalLM", "AutoModelForSequenceClassification"]),
    ("antlm-ltgbert", ["AutoModelForMaskedLM", "AutoModelForCausalLM", "AutoModelForSequenceClassification"]),
])
def test_an_export_loads_whole_under_transformers_4(tmp_path, recipe, classes):
    python = _transformers4_python()
    out, model, tokenizer = _export(tmp_path, recipe)
    assert json.loads((out / "tokenizer_config.json").read_text())["tokenizer_class"] == PORTABLE_TOKENIZER_CLASS
    loaded = _load_under_transformers4(python, out, classes, tmp_path)
    assert loaded["transformers"].startswith("4."), loaded["transformers"]
    ids = tokenizer(SENTENCE).input_ids
    assert loaded["ids"] == ids  # the same tokens, specials included
    assert (loaded["mask_token_id"], loaded["pad_token_id"]) == (tokenizer.mask_token_id, tokenizer.pad_token_id)
    assert set(loaded["classes"]) == set(classes)
    with torch.no_grad():
        # the network as antlm-bench computes it: causal for the decoder, and for LTG-BERT each Auto class's mode
        expected = {"AutoModelForCausalLM": model(torch.tensor([ids])).logits} if recipe == "antlm-babyllama" else {
            "AutoModelForMaskedLM": model(torch.tensor([ids]), attention_mode="bidirectional").logits,
            "AutoModelForCausalLM": model(torch.tensor([ids]), attention_mode="causal").logits}
    for name, logits in expected.items():
        torch.testing.assert_close(torch.tensor(loaded["logits"][name], dtype=torch.float64), logits.double(),
                                   rtol=1e-4, atol=1e-4)
