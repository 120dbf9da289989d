"""Tiny seeded models and tokenizers built by the tests themselves (no downloads), cached per process.

Other test modules (and benchmarks/) may reuse them::

    from tiny_models import build_tiny_llama, build_tiny_bert, build_tiny_tokenizer, save_tiny

- ``build_tiny_tokenizer("bpe")``: byte-level BPE with ``<s>`` prepended by the post-processor (as Llama's
  tokenizer does), plus ``</s> <pad> <mask> <unk>``; ``build_tiny_tokenizer("bert")``: BERT-style
  ``[CLS] ... [SEP]`` WordPiece with ``[MASK] [PAD] [UNK]``. Both are trained on a few thousand lines of the
  real pre-training sample when it is there (else on a small built-in text), with fixed settings, so the result
  is the same on every run.
- ``build_tiny_llama()`` / ``build_tiny_bert()``: a 2-layer ``LlamaForCausalLM`` / ``BertForMaskedLM`` with
  hidden size 64 and seeded random weights (a larger init range than usual, so that the scores spread out).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import BertConfig, BertForMaskedLM, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

_DATA_CANDIDATES = [os.environ.get("ANTLM_BENCH_DATA"), str(Path(__file__).resolve().parents[2] / "shared" / "data")]

_FALLBACK_TEXT = (
    "the cat sat on the mat . who should derek hug after shocking richard ? "
    "a lot different . that's right . well , you all have a nice day there . thank you very much . "
    "these dogs were barking loudly while the children slept in their beds . "
    "some teachers had seen the new books about the old city that every student reads ."
)


def training_lines(max_lines: int = 4000, words_per_line: int = 40) -> list[str]:
    """A few thousand lines of the real pre-training sample (snippets cut to short lines), else built-in text."""
    for candidate in _DATA_CANDIDATES:
        folder = Path(candidate) / "pretrain_sample" / "train" if candidate else None
        if folder is not None and folder.is_dir():
            files = sorted(folder.glob("*.train"))
            lines: list[str] = []
            for path in files:  # the same share of lines from every source
                words = path.read_text(encoding="utf-8").split()
                chunks = [" ".join(words[i:i + words_per_line]) for i in range(0, len(words), words_per_line)]
                lines.extend(chunks[: max_lines // len(files)])
            return lines
    return [_FALLBACK_TEXT] * 50


def build_tiny_tokenizer(kind: str = "bpe", vocab_size: int = 2000) -> PreTrainedTokenizerFast:
    """One cached tokenizer per (kind, vocab_size); "wordpiece" is the name earlier versions used for "bert"."""
    return _train_tokenizer("bert" if kind == "wordpiece" else kind, vocab_size)


@functools.cache
def _train_tokenizer(kind: str, vocab_size: int) -> PreTrainedTokenizerFast:
    lines = training_lines()
    if kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        specials = ["<s>", "</s>", "<pad>", "<mask>", "<unk>"]
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(lines, trainer)
        bos = tok.token_to_id("<s>")
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", mask_token="<mask>",
            unk_token="<unk>",
        )
    if kind == "bert":
        # BERT's normalizer, pre-tokenizer and [CLS] ... [SEP] template with BPE subwords: the WordPiece trainer
        # numbers its "##" pieces in hash-map order, so its vocabulary changes from run to run; BPE's does not
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.BPEDecoder()
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
        tok.train_from_iterator(lines, trainer)
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]",
            unk_token="[UNK]",
        )
    raise ValueError(f"unknown tokenizer kind {kind!r}")


@functools.cache
def build_tiny_llama(seed: int = 0, hidden: int = 64, layers: int = 2) -> LlamaForCausalLM:
    tok = build_tiny_tokenizer("bpe")
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.2,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


@functools.cache
def build_tiny_bert(seed: int = 0, hidden: int = 64, layers: int = 2) -> BertForMaskedLM:
    tok = build_tiny_tokenizer("bert")
    config = BertConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, max_position_embeddings=512, initializer_range=0.2, pad_token_id=tok.pad_token_id,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(seed)
    return BertForMaskedLM(config).eval()


def save_tiny(kind: str, folder: Path) -> Path:
    """Save the tiny ``llama`` or ``bert`` model with its tokenizer as a plain Hugging Face folder."""
    model, tok = (build_tiny_llama(), build_tiny_tokenizer("bpe")) if kind == "llama" else (
        build_tiny_bert(), build_tiny_tokenizer("bert"))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
