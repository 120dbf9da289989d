"""Recipe gpt-bert: LTG-BERT under a per-sample mixture of causal LM and MNTP at 1:15 (Charpentier & Samuel 2024)."""

from __future__ import annotations

import json

import torch
from trainer_support import tiny_config

from antlm_bench.recipes import load_recipe
from antlm_bench.runs.schedule import parse_schedule
from antlm_bench.training.trainer import train


def test_gpt_bert_recipe_is_ltgbert_under_per_sample_mix():
    recipe = load_recipe("gpt-bert")
    assert recipe.architecture == "ltgbert"
    (phase,) = parse_schedule(recipe.default_schedule).phases
    assert phase.objective == "MIX" and phase.weights == {"CLM": 1.0, "MNTP": 15.0} and phase.epochs == 72
    assert recipe.masking.rate == 0.15


def test_gpt_bert_trains_at_tiny_under_a_mixed_schedule(tmp_path):
    config = tiny_config(tmp_path, tmp_path / "run", model="gpt-bert", schedule="0.2_CLM+0.2_MIX(CLM:1,MNTP:15)+0.1_CLM")
    result = train(config)
    assert result.steps > 0 and all(torch.isfinite(torch.tensor(result.losses)))
    folder = result.final_checkpoint
    assert json.loads((folder / "config.json").read_text())["auto_map"]["AutoModelForCausalLM"]
    assert (folder / "modeling_ltgbert.py").is_file()
