"""Self-contained checkpoints: an LTG-BERT folder carries its modeling code and auto_map, and transformers loads
it with trust_remote_code=True in a process where antlm_bench cannot be imported, with the same logits."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from antlm_bench.models import babyllama, loss, ltgbert, masks
from antlm_bench.models.remote_code import CUT_MARKER, module_source
from antlm_bench.runs.record import CheckpointRecord
from antlm_bench.training.checkpoint import write_checkpoint

RECORD = CheckpointRecord(schedule="1_MLM", phase_index=0, phase_objective="MLM", step=0,
                          phases=({"index": 0, "objective": "MLM"},))

SPECIALS = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "mask_token_id": 4}

# runs with antlm_bench unimportable: a finder first on sys.meta_path refuses it (the editable install's own
# finder would otherwise find the checkout)
_CHILD = textwrap.dedent('''
    import sys

    class Blocked:
        def find_spec(self, name, path=None, target=None):
            if name == "antlm_bench" or name.startswith("antlm_bench."):
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, Blocked())
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSequenceClassification

    folder, expected = sys.argv[1], torch.load(sys.argv[2])
    masked = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
    causal = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    classifier = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True, num_labels=3)
    with torch.no_grad():
        print("masked", float((masked(input_ids=expected["ids"]).logits - expected["masked"]).abs().max()))
        print("causal", float((causal(input_ids=expected["ids"]).logits - expected["causal"]).abs().max()))
        print("classifier", tuple(classifier(input_ids=expected["ids"]).logits.shape),
              float((classifier.embedding.word_embedding.weight - expected["embedding"]).abs().max()))
    print("modules", type(masked).__module__, "antlm_bench" in sys.modules)
''')


def _ltgbert() -> ltgbert.LtgBertForMaskedLM:
    torch.manual_seed(0)
    config = ltgbert.make_config(vocab_size=61, hidden_size=32, n_layers=2, n_heads=4, intermediate_size=48,
                                 max_position_embeddings=64, position_bucket_size=8, tie_word_embeddings=True,
                                 dropout=0.0, **SPECIALS)
    return ltgbert.LtgBertForMaskedLM(config).eval()


def test_ltgbert_checkpoint_loads_without_antlm_bench(tmp_path):
    model = _ltgbert()
    folder = write_checkpoint(tmp_path / "ckpt", model, None, RECORD)
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"]["AutoModelForMaskedLM"] == "modeling_ltgbert.LtgBertForMaskedLM"
    assert set(config["auto_map"]) >= {"AutoConfig", "AutoModelForCausalLM", "AutoModelForSequenceClassification"}
    code = (folder / "modeling_ltgbert.py").read_text()
    assert not re.search(r"^\s*(import|from) antlm_bench", code, re.MULTILINE)
    assert "register_backend" not in code and CUT_MARKER not in code
    ids = torch.randint(5, 61, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = {"ids": ids, "masked": model(ids).logits, "causal": model(ids, attention_mode="causal").logits,
                    "embedding": model.embedding.word_embedding.weight.clone()}
    torch.save(expected, tmp_path / "expected.pt")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"),
           "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    child = subprocess.run([sys.executable, "-c", _CHILD, str(folder), str(tmp_path / "expected.pt")], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert child.returncode == 0, child.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in child.stdout.strip().splitlines())
    assert float(lines["masked"]) == 0.0 and float(lines["causal"]) == 0.0
    assert lines["classifier"].startswith("(2, 3)") and float(lines["classifier"].split()[-1]) == 0.0
    assert lines["modules"].split()[-1] == "False" and "antlm_bench" not in lines["modules"].split()[0]


def test_code_is_generated_from_the_package_modules():
    code = module_source(ltgbert, [masks, loss])
    for name in ("LtgBertForMaskedLM", "def full_mask", "class LinearCrossEntropySum", "def make_config"):
        assert name in code
    compile(code, "modeling_ltgbert.py", "exec")  # one file, valid Python
    # what the backend writes is this text, made at save time
    files, auto_map = ltgbert.LtgBertBackend.remote_code(_ltgbert().config)
    assert files == {"modeling_ltgbert.py": code} and auto_map["AutoConfig"] == "modeling_ltgbert.LtgBertConfig"


def test_stock_backends_write_no_code(tmp_path):
    torch.manual_seed(0)
    config = babyllama.make_config(vocab_size=61, hidden_size=32, n_layers=1, n_heads=4, intermediate_size=48,
                                   max_position_embeddings=64, tie_word_embeddings=True, dropout=0.0, **SPECIALS)
    folder = write_checkpoint(tmp_path / "llama", babyllama.BabyLlamaForCausalLM(config), None, RECORD)
    assert "auto_map" not in json.loads((folder / "config.json").read_text())
    assert not list(Path(folder).glob("*.py"))
