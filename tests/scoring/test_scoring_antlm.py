"""Scoring our own models (BabyLlama, LTG-BERT) through hidden_states / lm_logits, against their full forward.

For every method the batched engine (body once, head at the scored cells only, many copies per padded batch)
must equal the naive computation: one unpadded full forward per scored token, log-softmax of the whole logits.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import build_tiny_tokenizer

from antlm_bench.scoring import score_texts, wrap_model

models = pytest.importorskip("antlm_bench.models")
recipes = pytest.importorskip("antlm_bench.recipes")

TEXTS = [
    "Who should Derek hug after shocking Richard?",
    "These dogs were barking loudly.",
    "A lot different.",
    "Who cleaned?\nDavid cleaned.",
    "some teachers had seen the new books about the old city that every student reads",
    "Who should Derek hug after shocking?",  # shares a prefix tree with the first text
    "These dogs were barking.",
]




@pytest.fixture(scope="module", params=["antlm-babyllama", "antlm-ltgbert"])
def ours(request):
    tokenizer = build_tiny_tokenizer("bpe")
    torch.manual_seed(0)
    model = models.build_model(recipes.load_recipe(request.param).resolve("tiny"), tokenizer).eval()
    return wrap_model(model, tokenizer)


def _naive(sm, text: str, method: str) -> float:
    tok, model = sm.tokenizer, sm.module
    total = 0.0
    if method == "clm":
        ids = torch.tensor([tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            logits = model(input_ids=ids[None], attention_mode="causal").logits[0].float()
        logprobs = torch.log_softmax(logits, -1)
        return float(sum(logprobs[j - 1, ids[j]] for j in range(1, len(ids))))
    encoded = tok(text, return_special_tokens_mask=True)
    ids = torch.tensor(encoded["input_ids"])
    offset = 1 if method == "mntp" else 0
    for i, special in enumerate(encoded["special_tokens_mask"]):
        if special:
            continue
        masked = ids.clone()
        masked[i] = tok.mask_token_id
        with torch.no_grad():
            logits = model(input_ids=masked[None], attention_mode="bidirectional").logits[0, i - offset].float()
        total += float(torch.log_softmax(logits, -1)[ids[i]])
    return total


@pytest.mark.parametrize("method", ["clm", "pll", "mntp"])
def test_engine_equals_full_forward(ours, method):
    expected = [_naive(ours, text, method) for text in TEXTS]
    np.testing.assert_allclose(score_texts(ours, TEXTS, method, batch_tokens=64), expected, atol=1e-4, rtol=0)


def test_padding_does_not_change_scores(ours):
    """Rows of different lengths share padded batches; one row per batch has no padding at all."""
    for method in ("clm", "pll"):
        padded = score_texts(ours, TEXTS, method, batch_tokens=10_000)
        alone = np.array([score_texts(ours, [t], method, batch_tokens=1)[0] for t in TEXTS])
        np.testing.assert_allclose(padded, alone, atol=1e-4, rtol=0)


def test_our_models_score_prefix_trees(ours):
    """Both take position ids and a 4-D mask, so minimal pairs share their prefix in one row (LTG-BERT's relative
    positions then come from the position ids); test_engine_equals_full_forward checks the scores."""
    assert ours.shares_prefixes


def test_auto_assumption_follows_the_architecture(ours):
    assert ours.kind == "antlm"
    assert ours.is_masked_lm == (ours.module.config.antlm_architecture == "ltgbert")
