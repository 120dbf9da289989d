"""Token sequences for the BabyLM 2025 zero-shot tasks, as the official pipeline (evaluation-pipeline-2025) builds
them (see docs/babylm-2025.md for the rules, each with its place in the official code).

- :func:`span_seqs` (entity tracking, WUG): the whole sentence is tokenized at once with the tokenizer's own
  special tokens and offsets; the scored tokens are those whose character span ends after the completion's first
  character (a token that straddles the boundary, such as ``Ġthe`` carrying the prefix's trailing space, counts).
  clm never scores position 0; mntp skips position 0 too (it would be read at position -1).
- :func:`next_token_seqs` (reading): ln p(target | context) with the context tokenized alone with its special
  tokens, read after its last token (clm), or at the first of three appended mask tokens (pll; mntp one earlier).

Both return :class:`~antlm_bench.scoring.encode.Seq` objects for the shared batched engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from antlm_bench.errors import UserError
from antlm_bench.scoring.encode import Seq, serial_tokenizer
from antlm_bench.scoring.offsets import encode_with_offsets, plain_backend

N_READING_MASKS = 3  # evaluation_functions.py: number_of_mask_tokens_to_append


def _need_fast(tokenizer, what: str) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"{what} needs a fast tokenizer (character offsets); save a tokenizer.json with the model")


def span_seqs(tokenizer, sentences: Sequence[str], completions: Sequence[str], method: str) -> list[Seq]:
    """One sequence per sentence, scored over the tokens that overlap its completion (the official span rule)."""
    _need_fast(tokenizer, "the BabyLM 2025 sentence tasks")
    if method not in ("clm", "pll", "mntp"):
        raise UserError(f"--scoring {method}: the BabyLM 2025 zero-shot tasks define clm, pll (the official 'mlm') "
                        "and mntp only; use one of them or auto")
    if method != "clm" and tokenizer.mask_token_id is None:
        raise UserError(f"--scoring {method} needs a mask token, and this tokenizer has none; use --scoring clm")
    out = []
    # the whole sentences' ids and offsets; their shared beginnings tokenized once where that is exact (offsets.py)
    for (ids, offsets), sentence, completion in zip(encode_with_offsets(tokenizer, sentences), sentences, completions):
        start_char = len(sentence) - len(completion) + (int(offsets[0, 0]) if len(offsets) else 0)
        scored = np.flatnonzero(offsets[:, 1] > start_char).astype(np.int64)
        if method in ("clm", "mntp"):
            scored = scored[scored >= 1]  # clm: position 0 has no context; mntp: nothing sits before it
        out.append(Seq(ids, scored))
    return out


def word_pieces(tokenizer, word: str) -> list[int]:
    """The word tokenized alone, without special tokens and without a leading space (the official behaviour)."""
    backend = plain_backend(tokenizer)  # the Rust tokenizer directly: the same ids, a tenth of the time per word
    if backend is not None:
        return list(backend.encode(word, add_special_tokens=False).ids)
    return list(tokenizer(word, add_special_tokens=False)["input_ids"])


def reading_queries(tokenizer, context: str, word: str) -> list[tuple[str, int]]:
    """(context string, target id) of each sub-token of ``word``, as the official ``get_p2`` chain asks them.

    The first sub-token is predicted after ``context``; each later one after the context string grown by the
    *decoded* earlier sub-tokens (re-tokenized from scratch), and it is the first token of its own decoded piece
    re-tokenized."""
    pieces = word_pieces(tokenizer, word)
    if not pieces:
        raise UserError(f"reading: the word {word!r} tokenizes to nothing")
    queries = [(context, pieces[0])]
    grown = context + tokenizer.decode(pieces[0])
    for piece in pieces[1:]:
        text = tokenizer.decode(piece)
        again = word_pieces(tokenizer, text)
        if not again:
            raise UserError(f"reading: the sub-token {text!r} of {word!r} re-tokenizes to nothing")
        queries.append((grown, again[0]))
        grown += text
    return queries


def next_token_seqs(tokenizer, queries: Sequence[tuple[str, int]], method: str) -> list[Seq]:
    """ln p(target | context) for each (context, target id): one sequence each, one scored position."""
    if method not in ("clm", "pll", "mntp"):
        raise UserError(f"--scoring {method}: reading defines clm, pll (the official 'mlm') and mntp only")
    contexts = [context for context, _ in queries]
    if method == "clm":
        with serial_tokenizer():
            encoded = tokenizer(contexts)["input_ids"]
        return [Seq(np.asarray([*ids, target], dtype=np.int64), np.asarray([len(ids)], dtype=np.int64))
                for ids, (_, target) in zip(encoded, queries)]
    mask = tokenizer.mask_token
    if mask is None:
        raise UserError(f"--scoring {method} needs a mask token, and this tokenizer has none; use --scoring clm")
    with serial_tokenizer():
        encoded = tokenizer([context + mask * N_READING_MASKS for context in contexts])["input_ids"]
    out = []
    for ids, (_, target) in zip(encoded, queries):
        ids = np.asarray(ids, dtype=np.int64)
        # the first appended mask: -3, or -4 when the tokenizer put a special token after the masks; mntp reads
        # the position before it (the engine's shift), i.e. -4 / -5 as the official get_p_mntp does
        position = len(ids) - N_READING_MASKS - (0 if ids[-1] == tokenizer.mask_token_id else 1)
        out.append(Seq(ids, np.asarray([position], dtype=np.int64), targets=np.asarray([target], dtype=np.int64)))
    return out


def merge_prefix_groups(seqs: Sequence[Seq], groups: Sequence[np.ndarray], slack: int = 8,
                        most: int = 8) -> list[np.ndarray]:
    """Groups of sequences known to share a beginning (an item's options), merged where their beginnings differ
    in at most their last ``slack`` tokens (up to ``most`` groups in one): entity tracking asks several boxes of
    one scenario, so its items repeat a ~300-token prefix that then goes through the body once for all of them.
    Only which sequences share a row changes; each sequence still sees exactly its own tokens."""
    if not groups:
        return []
    keys = []
    for group in groups:
        first = np.asarray(seqs[int(group[0])].ids)
        common = len(first)
        for m in group[1:]:
            other = np.asarray(seqs[int(m)].ids)
            n = min(common, len(other))
            differ = np.flatnonzero(first[:n] != other[:n])
            common = int(differ[0]) if len(differ) else n
        keys.append(first[:common])
    order = sorted(range(len(groups)), key=lambda k: keys[k].tolist())
    merged: list[np.ndarray] = []
    lead, members, count = None, [], 0
    for k in order:
        key = keys[k]
        if lead is not None and count < most:
            n = min(len(lead), len(key))
            differ = np.flatnonzero(lead[:n] != key[:n])
            shared = int(differ[0]) if len(differ) else n
            if shared > 0 and max(len(lead), len(key)) - shared <= slack:
                members.append(np.asarray(groups[k], dtype=np.int64))
                count += 1
                continue
        if members:
            merged.append(np.unique(np.concatenate(members)))
        lead, members, count = key, [np.asarray(groups[k], dtype=np.int64)], 1
    if members:
        merged.append(np.unique(np.concatenate(members)))
    return merged
