"""Examples -> token ids (the tokenizer's pair template, or "a <sep> b") -> length-grouped, dynamically padded
batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from antlm_bench.adapters.glue.data import Example

# ----------------------------------------------------------------------------------------------------------------
# tokenization


@dataclass
class Encoded:
    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    labels: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(ids) for ids in self.input_ids), dtype=np.int64, count=len(self.input_ids))


def truncate_longest_first(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Cut the ends so that both fit in ``budget`` tokens, as the tokenizers' ``longest_first`` does: the shorter
    sequence (the first on a tie) keeps up to half the budget, the longer one gets the rest."""
    budget = max(budget, 0)
    la, lb = len(a), len(b)
    if la + lb <= budget:
        return a, b
    if la <= lb:
        la = min(la, budget // 2)
        lb = min(lb, budget - la)
    else:
        lb = min(lb, budget // 2)
        la = min(la, budget - lb)
    return a[:la], b[:lb]


class PairEncoder:
    """Turns (text_a, text_b) into token ids the way the tokenizer expects.

    A tokenizer with a pair template (BERT's ``[CLS] a [SEP] b [SEP]``, Llama's ``<s> a <s> b``) encodes the
    pair itself. One without (GPT-2 style BPE: no special tokens at all) gets ``<prefix> a <sep> b <suffix>``,
    where prefix/suffix are what the tokenizer adds around one sentence and ``<sep>`` is its SEP token, else its
    EOS token: the model sees a boundary it knows from pre-training.
    """

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.has_pair_template = tokenizer.num_special_tokens_to_add(pair=True) > tokenizer.num_special_tokens_to_add(
            pair=False
        )
        probe_with = tokenizer("hello", add_special_tokens=True)["input_ids"]
        probe_without = tokenizer("hello", add_special_tokens=False)["input_ids"]
        start = _find_sublist(probe_with, probe_without)
        self.prefix = probe_with[:start] if start >= 0 else []
        self.suffix = probe_with[start + len(probe_without):] if start >= 0 else []
        sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        self.sep = [] if sep is None else [int(sep)]

    def describe(self) -> str:
        if self.has_pair_template:
            return "pairs joined by the tokenizer's pair template"
        sep = self.tokenizer.convert_ids_to_tokens(self.sep[0]) if self.sep else "nothing"
        return f"pairs joined as 'a {sep} b'"

    def encode(self, examples: Sequence[Example]) -> Encoded:
        labels = np.fromiter((e.label for e in examples), dtype=np.int64, count=len(examples))
        texts_a = [e.text_a for e in examples]
        pairs = [e.text_b is not None for e in examples]
        if not any(pairs):
            out = self.tokenizer(texts_a, truncation=True, max_length=self.max_length)
            return Encoded(out["input_ids"], out.get("token_type_ids"), labels)
        if not all(pairs):
            raise ValueError("mixed single sentences and pairs in one split")
        texts_b = [e.text_b for e in examples]
        if self.has_pair_template:
            out = self.tokenizer(texts_a, texts_b, truncation="longest_first", max_length=self.max_length)
            return Encoded(out["input_ids"], out.get("token_type_ids"), labels)
        ids_a = self.tokenizer(texts_a, add_special_tokens=False)["input_ids"]
        ids_b = self.tokenizer(texts_b, add_special_tokens=False)["input_ids"]
        budget = self.max_length - len(self.prefix) - len(self.suffix) - len(self.sep)
        joined = []
        for a, b in zip(ids_a, ids_b):
            a, b = truncate_longest_first(a, b, budget)
            joined.append(self.prefix + a + self.sep + b + self.suffix)
        return Encoded(joined, None, labels)


def _find_sublist(haystack: list[int], needle: list[int]) -> int:
    for start in range(len(haystack) - len(needle) + 1):
        if haystack[start: start + len(needle)] == needle:
            return start
    return -1


def pad_token_id(tokenizer: Any) -> int:
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id):
        if candidate is not None:
            return int(candidate)
    return 0  # any id: padded positions are masked out and never pooled


# ----------------------------------------------------------------------------------------------------------------
# batching


def length_grouped_batches(
    lengths: np.ndarray, batch_size: int, rng: np.random.Generator, mega: int = 50
) -> list[np.ndarray]:
    """Shuffled batches of similar length: shuffle, sort within chunks of ``mega`` batches, shuffle the batches.

    Padding then costs little, and the order still changes every epoch.
    """
    order = rng.permutation(len(lengths))
    batches: list[np.ndarray] = []
    chunk = batch_size * mega
    for start in range(0, len(order), chunk):
        part = order[start: start + chunk]
        part = part[np.argsort(-lengths[part], kind="stable")]
        batches.extend(part[i: i + batch_size] for i in range(0, len(part), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def shuffled_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(n)
    return [order[i: i + batch_size] for i in range(0, n, batch_size)]


def sorted_batches(lengths: np.ndarray, batch_size: int, max_tokens: int | None = None) -> list[np.ndarray]:
    """Inference batches, longest first (a too-big batch fails at once, not at the end), each at most
    ``batch_size`` rows and, when given, ``max_tokens`` padded tokens: long inputs go in small batches, short ones
    in full batches, and little compute goes to padding."""
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        width = int(lengths[order[start]])  # the longest row of this batch comes first
        rows = batch_size if max_tokens is None else max(1, min(batch_size, max_tokens // max(width, 1)))
        batches.append(order[start: start + rows])
        start += rows
    return batches


@dataclass
class EncodedBatch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    token_type_ids: torch.Tensor | None
    labels: torch.Tensor

    def to(self, device: torch.device | str) -> EncodedBatch:
        move = (lambda t: None if t is None else t.to(device, non_blocking=True))
        return EncodedBatch(*(move(t) for t in (self.input_ids, self.attention_mask, self.position_ids,
                                         self.token_type_ids, self.labels)))


def collate(encoded: Encoded, indices: Sequence[int], pad_id: int, padding_side: str = "right") -> EncodedBatch:
    """Pad the chosen examples to the longest of them. Position ids count real tokens only, so a left-padded
    sequence gets the same positions as a right-padded one."""
    rows = [encoded.input_ids[i] for i in indices]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    types = torch.zeros((len(rows), width), dtype=torch.long) if encoded.token_type_ids is not None else None
    for row, i in enumerate(indices):
        seq = encoded.input_ids[i]
        span = slice(0, len(seq)) if padding_side == "right" else slice(width - len(seq), width)
        ids[row, span] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, span] = 1
        if types is not None:
            types[row, span] = torch.as_tensor(encoded.token_type_ids[i], dtype=torch.long)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    labels = torch.as_tensor(encoded.labels[np.asarray(indices)], dtype=torch.long)
    return EncodedBatch(ids, mask, positions, types, labels)
