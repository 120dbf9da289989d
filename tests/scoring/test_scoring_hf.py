"""Any Hugging Face causal or masked LM: the body/head split is found (or refused) and scores stay exact.

Each tiny model is scored by the engine (body once, head at the scored cells) and naively (one full forward per
scored token, log-softmax of the model's own logits); the two must agree.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as tf
from tiny_models import build_tiny_tokenizer

from antlm_bench.scoring import score_texts, wrap_model

TEXTS = ["Who should Derek hug after shocking Richard?", "A lot different.",
         "these dogs were barking loudly while the children slept", "Who should Derek hug after shocking?"]
V = 2000




def _gemma_with_large_logits():
    model = tf.Gemma2ForCausalLM(tf.Gemma2Config(
        vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, max_position_embeddings=128, final_logit_softcapping=5.0))
    with torch.no_grad():
        model.lm_head.weight.mul_(200.0)  # logits far beyond the cap: ignoring the cap would change every score
    return model


MODELS = {
    "gpt2": (lambda: tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=128)),
             "clm"),
    "opt": (lambda: tf.OPTForCausalLM(tf.OPTConfig(vocab_size=V, hidden_size=64, num_hidden_layers=2,
                                                   num_attention_heads=4, ffn_dim=128, max_position_embeddings=128,
                                                   word_embed_proj_dim=64, pad_token_id=2)), "clm"),
    "gemma2-softcap": (_gemma_with_large_logits, "clm"),
    "roberta": (lambda: tf.RobertaForMaskedLM(tf.RobertaConfig(
        vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=130, pad_token_id=0)), "pll"),
    "distilbert": (lambda: tf.DistilBertForMaskedLM(tf.DistilBertConfig(
        vocab_size=V, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=128, pad_token_id=0)),
        "pll"),
    "electra": (lambda: tf.ElectraForMaskedLM(tf.ElectraConfig(
        vocab_size=V, embedding_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=128, pad_token_id=0)), "pll"),
}


def _naive(model, tok, text: str, method: str) -> float:
    if method == "clm":
        ids = torch.tensor([tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            logprobs = torch.log_softmax(model(input_ids=ids[None]).logits[0].float(), -1)
        return float(sum(logprobs[j - 1, ids[j]] for j in range(1, len(ids))))
    encoded = tok(text, return_special_tokens_mask=True)
    ids = torch.tensor(encoded["input_ids"])
    total = 0.0
    for i, special in enumerate(encoded["special_tokens_mask"]):
        if not special:
            masked = ids.clone()
            masked[i] = tok.mask_token_id
            with torch.no_grad():
                logits = model(input_ids=masked[None]).logits[0, i].float()
            total += float(torch.log_softmax(logits, -1)[ids[i]])
    return total


@pytest.mark.parametrize("name", sorted(MODELS))
def test_hugging_face_models_score_exactly_through_their_own_head(name):
    make, method = MODELS[name]
    tok = build_tiny_tokenizer("bpe" if method == "clm" else "bert")
    torch.manual_seed(0)
    model = make().eval()
    sm = wrap_model(model, tok)
    assert sm.head_fn is not None, sm.notes  # the fast path: body once, head at the scored cells only
    # causal LMs take prefix-tree rows (the two "Who should ..." texts share one); eager Gemma 2 adds its mask
    assert sm.tree_mask_format == {"gpt2": "bool", "opt": "bool", "gemma2-softcap": "additive"}.get(name)
    ours = score_texts(sm, TEXTS, method, batch_tokens=40)
    np.testing.assert_allclose(ours, [_naive(model, tok, t, method) for t in TEXTS], atol=1e-4, rtol=0)


def test_a_forward_that_changes_logits_after_the_head_falls_back_to_full_logits():
    """An undeclared post-head transform is caught by the check and scored from the model's own logits."""

    class Doubled(tf.GPT2LMHeadModel):
        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            out.logits = torch.where(out.logits > 1.0, 2 * out.logits, out.logits)  # only large logits change
            return out

    tok = build_tiny_tokenizer("bpe")
    torch.manual_seed(0)
    model = Doubled(tf.GPT2Config(vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=128)).eval()
    sm = wrap_model(model, tok)
    assert sm.head_fn is None and "full logits" in sm.notes[0]
    np.testing.assert_allclose(score_texts(sm, TEXTS, "clm"), [_naive(model, tok, t, "clm") for t in TEXTS],
                               atol=1e-4, rtol=0)
