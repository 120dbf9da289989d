"""Texts to token sequences with the positions whose tokens are scored (docs/design.md, "Scoring minimal pairs").

- ``clm``: the text is tokenized as given (no special tokens, no added space) and prefixed with BOS, else EOS;
  every text token is scored. With a context (EWoK), the text is ``context + " " + target`` and the split
  follows lm-eval: encode the whole, the first ``len(encode(context))`` tokens are context and are not scored.
  As in lm-eval, a text whose first token already is the prefix token gets no second one.
- ``pll`` / ``pll-word-l2r`` / ``mntp``: the text is tokenized with the tokenizer's own special tokens
  (``[CLS] ... [SEP]``, ``<s> ...``); those are present but never scored, and neither are context tokens.
  ``mntp`` reads token i at position i-1, so a text without a leading special token gets the prefix token.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from antlm_bench.errors import UserError


@dataclass
class Seq:
    """One unique sequence to score."""

    ids: np.ndarray  # int64 [L], special tokens and prefix included
    scored: np.ndarray  # int64 positions whose token counts, ascending
    word_ids: np.ndarray | None = None  # int64 [L] word index per position (-1: special), pll-word-l2r only
    # masked methods only: the token to predict at each scored position when it is not the one in ``ids``
    # (reading: the positions hold the appended mask tokens, the target is the word's sub-token)
    targets: np.ndarray | None = None


def prefix_token_id(tokenizer) -> int:
    """BOS, else EOS (lm-eval's ``prefix_token_id``)."""
    for candidate in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    raise UserError(f"{getattr(tokenizer, 'name_or_path', 'tokenizer')}: has neither a BOS nor an EOS token; "
                    "clm scoring needs one to condition the first token on")


def _masked_prefix_id(tokenizer) -> int:
    for candidate in (tokenizer.cls_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    raise UserError("the tokenizer has no CLS, BOS or EOS token; mntp scoring needs one before the first token")


def _texts(items: Sequence[tuple[str | None, str]], leading_space: bool) -> tuple[list[str | None], list[str]]:
    contexts, wholes = [], []
    for context, text in items:
        if context is None:
            contexts.append(None)
            wholes.append((" " if leading_space else "") + text)
        else:
            context = (" " if leading_space else "") + context
            contexts.append(context)
            wholes.append(context + " " + text)
    return contexts, wholes


TOKENIZERS_PARALLELISM = "TOKENIZERS_PARALLELISM"


@contextmanager
def serial_tokenizer() -> Iterator[None]:
    """Our scoring's encode calls run without the Hugging Face tokenizers' Rust thread pool.

    With ``TOKENIZERS_PARALLELISM`` unset (a user's plain shell) a fast tokenizer's ``encode_batch`` runs on a
    rayon pool, and PLL evaluation of a 0.23M-parameter model grew to 9.6 GB RSS over BLiMP + supplement (735 MB
    with the variable false): what the pool's threads allocate per call is not given back. Scoring encodes short
    sentences, a few seconds of a whole evaluation, so the pool buys nothing here. The variable is read by the
    Rust side at every call: it is set to false for the call and put back after, so the corpus tokenization of
    training keeps the pool (benchmarks/eval_memory.py measures the peak).
    """
    before = os.environ.get(TOKENIZERS_PARALLELISM)
    os.environ[TOKENIZERS_PARALLELISM] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TOKENIZERS_PARALLELISM, None)
        else:
            os.environ[TOKENIZERS_PARALLELISM] = before


@dataclass
class _Encoded:
    """What scoring reads of an encoding: the attributes of a ``tokenizers.Encoding``."""

    ids: list[int]
    special_tokens_mask: list[int]  # 1 where the tokenizer added a special token
    word_ids: list[int | None]


# texts encoded per call: a tokenizers ``Encoding`` holds ids, tokens, offsets, masks and word ids (some 3 KB for a
# BLiMP sentence), so a whole task at once held 400 MB of them for BLiMP alone; a chunk's are freed as it is read
ENCODE_CHUNK = 2048


def _encode_batch(tokenizer, texts: list[str], add_special_tokens: bool) -> Iterator[_Encoded]:
    """Token ids, special-token mask and word ids of each text, exactly as ``tokenizer(texts)`` gives them, in
    order, encoded ``ENCODE_CHUNK`` texts at a time without the tokenizers' thread pool (:func:`serial_tokenizer`).

    A fast tokenizer is asked directly (its Rust ``encode_batch``): transformers' Python conversion of each
    encoding into a dict costs more than the tokenization itself, and at tiny model sizes as much as scoring.
    Its ``Encoding`` objects have the same three attributes, each converted to a list only when read (clm
    reads the ids alone).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    direct = backend is not None and backend.truncation is None and backend.padding is None
    for begin in range(0, len(texts), ENCODE_CHUNK):
        chunk = texts[begin:begin + ENCODE_CHUNK]
        with serial_tokenizer():
            if direct:
                encodings: Sequence[_Encoded] = backend.encode_batch(chunk, add_special_tokens=add_special_tokens)
            else:
                encoded = tokenizer(chunk, add_special_tokens=add_special_tokens, return_special_tokens_mask=True)
                encodings = [
                    _Encoded(ids, special, encoded.word_ids(i) if getattr(tokenizer, "is_fast", False) else [])
                    for i, (ids, special) in enumerate(zip(encoded["input_ids"], encoded["special_tokens_mask"]))]
        yield from encodings


def _context_lengths(tokenizer, contexts: list[str | None]) -> list[int]:
    present = [c for c in contexts if c is not None]
    lengths = iter(len(e.ids) for e in _encode_batch(tokenizer, present, False)) if present else iter(())
    return [0 if c is None else next(lengths) for c in contexts]


def encode_clm(tokenizer, items: Sequence[tuple[str | None, str]], leading_space: bool = False) -> list[Seq]:
    prefix = prefix_token_id(tokenizer)
    contexts, wholes = _texts(items, leading_space)
    n_context = _context_lengths(tokenizer, contexts)
    out = []
    for ids, n_ctx in zip((e.ids for e in _encode_batch(tokenizer, wholes, False)), n_context):
        if n_ctx == 0 and ids and ids[0] == prefix:
            full = np.asarray(ids, dtype=np.int64)
            scored = np.arange(1, len(full), dtype=np.int64)
        else:
            full = np.asarray([prefix, *ids], dtype=np.int64)
            scored = np.arange(1 + n_ctx, len(full), dtype=np.int64)
        out.append(Seq(full, scored))
    return out


def encode_masked(
    tokenizer, items: Sequence[tuple[str | None, str]], method: str, leading_space: bool = False
) -> list[Seq]:
    if tokenizer.mask_token_id is None:
        raise UserError(f"--scoring {method} needs a mask token, and this tokenizer has none; use --scoring clm")
    word_level = method == "pll-word-l2r"
    if word_level and not getattr(tokenizer, "is_fast", False):
        raise UserError("--scoring pll-word-l2r needs a fast tokenizer (word_ids); save a tokenizer.json")
    contexts, wholes = _texts(items, leading_space)
    n_context = _context_lengths(tokenizer, contexts)
    out = []
    for encoded, n_ctx in zip(_encode_batch(tokenizer, wholes, True), n_context):
        full = np.asarray(encoded.ids, dtype=np.int64)
        positions = np.flatnonzero(np.asarray(encoded.special_tokens_mask) == 0)[n_ctx:].astype(np.int64)
        word_ids = None
        if word_level:
            word_ids = np.asarray([-1 if w is None else w for w in encoded.word_ids], dtype=np.int64)
        if method == "mntp" and len(positions) and positions[0] == 0:
            full = np.concatenate([[_masked_prefix_id(tokenizer)], full])
            positions = positions + 1
            word_ids = None if word_ids is None else np.concatenate([[-1], word_ids])
        out.append(Seq(full, positions, word_ids))
    return out


def encode(tokenizer, items: Sequence[tuple[str | None, str]], method: str, leading_space: bool = False) -> list[Seq]:
    if method == "clm":
        return encode_clm(tokenizer, items, leading_space)
    return encode_masked(tokenizer, items, method, leading_space)


def dedupe(seqs: list[Seq]) -> tuple[list[Seq], np.ndarray]:
    """Unique sequences (same tokens and scored positions score the same) and each input's index into them.

    Scoring a repeated sentence once also makes identical sentences score *exactly* the same, so that a pair of
    identically tokenized sentences is a tie, not a coin flip of float rounding in different batches.
    """
    unique: list[Seq] = []
    seen: dict[tuple[bytes, bytes, bytes, bytes], int] = {}
    index = np.empty(len(seqs), dtype=np.int64)
    for i, seq in enumerate(seqs):
        key = (seq.ids.tobytes(), seq.scored.tobytes(), b"" if seq.word_ids is None else seq.word_ids.tobytes(),
               b"" if seq.targets is None else seq.targets.tobytes())
        if key not in seen:
            seen[key] = len(unique)
            unique.append(seq)
        index[i] = seen[key]
    return unique, index
