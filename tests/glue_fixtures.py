"""A small learnable sentence-pair task of the tests' own making, and a GLUE-shaped data folder holding it.

The label sits in the *second* sentence (one of a few cue words among random filler words), so a model that
cannot see the end of the pair (a decoder pooled on the wrong token, a truncation that drops text_b) stays at
chance. The filler words are common English words that every tiny test tokenizer knows.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from antlm_bench.adapters.glue.data import Example

FILLER = ["the", "a", "cat", "dog", "man", "woman", "house", "tree", "car", "book", "sat", "ran", "saw",
    "took", "gave", "little", "big", "old", "new", "red", "blue", "green", "in", "on", "at", "with",
    "from", "very", "quite", "then", "there", "here", "and", "but", "so", "it", "they", "we", "you", "he",
    "she"]
CUES = {0: ["bad", "sad", "wrong"], 1: ["good", "happy", "right"]}


def cue_examples(n: int, seed: int, prefix: str = "x") -> list[Example]:
    """``n`` balanced examples; text_a is filler only, text_b carries the cue word at a random place."""
    rng = random.Random(seed)
    examples = []
    for i in range(n):
        label = i % 2
        words_a = rng.choices(FILLER, k=rng.randint(3, 12))
        words_b = rng.choices(FILLER, k=rng.randint(2, 10))
        words_b.insert(rng.randint(0, len(words_b)), rng.choice(CUES[label]))
        examples.append(Example(f"{prefix}{i}", " ".join(words_a), " ".join(words_b), label))
    rng.shuffle(examples)
    return examples


def write_glue_folder(root: Path, n_train: int = 240, n_valid: int = 80, seed: int = 0) -> Path:
    """``root/glue_filtered`` with rte (train + valid), wsc-shaped fields and a boolq without a train file."""
    folder = root / "glue_filtered"
    folder.mkdir(parents=True, exist_ok=True)

    def dump(name: str, records: list[dict]) -> None:
        with open(folder / name, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(record) + "\n" for record in records)

    def rte(examples: list[Example]) -> list[dict]:
        # RTE's convention: 0 = entailment; make label 0 the "good" cue so that it is learnable either way
        return [{"sentence1": e.text_a, "sentence2": e.text_b, "label": 1 - e.label, "idx": i}
                for i, e in enumerate(examples)]

    dump("rte.train.jsonl", rte(cue_examples(n_train, seed)))
    dump("rte.valid.jsonl", rte(cue_examples(n_valid, seed + 1)))
    boolq = [{"question": e.text_a, "passage": e.text_b, "label": e.label, "idx": 1000 + i}
             for i, e in enumerate(cue_examples(n_train + n_valid, seed + 2))]
    dump("boolq.valid.jsonl", boolq)
    return root


def tiny_classifier_backbones() -> dict[str, tuple[object, object]]:
    """name -> (freshly seeded tiny LM, tokenizer): plain HF decoder and encoder (standard 0.02 init, which
    fine-tunes far better than the wide init of tiny_models' scoring fixtures), and our two models."""
    import torch
    from tiny_models import build_tiny_tokenizer
    from transformers import BertConfig, BertForMaskedLM, LlamaConfig, LlamaForCausalLM

    bpe, wordpiece = build_tiny_tokenizer("bpe"), build_tiny_tokenizer("wordpiece")
    out: dict[str, tuple[object, object]] = {}
    torch.manual_seed(0)
    out["hf-llama"] = (LlamaForCausalLM(LlamaConfig(
        vocab_size=len(bpe), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, pad_token_id=bpe.pad_token_id,
    )).eval(), bpe)
    torch.manual_seed(0)
    out["hf-bert"] = (BertForMaskedLM(BertConfig(
        vocab_size=len(wordpiece), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=512, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, pad_token_id=wordpiece.pad_token_id,
    )).eval(), wordpiece)
    try:
        from antlm_bench.models import build_model
        from antlm_bench.recipes import load_recipe
    except ImportError:  # the model backends not there yet
        return out
    for name, recipe in (("babyllama", "babyllama-clm-only"), ("ltgbert", "ltgbert-mlm-only")):
        torch.manual_seed(0)
        out[name] = (build_model(load_recipe(recipe).resolve("tiny"), bpe).eval(), bpe)
    return out
