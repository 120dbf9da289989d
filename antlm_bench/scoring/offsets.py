"""Token ids and character offsets of whole strings, as ``tokenizer(text, return_offsets_mapping=True)`` gives
them, computed from pieces where that provably gives the same tokens.

Entity tracking tokenizes 15,760 strings of ~1,300 characters whole (the official rule picks the scored tokens by
character offsets), and they repeat: an item's five options share a ~1,300-character prefix, and the items of a
scenario share all of it but "Box N contains". Tokenizing each distinct piece once is ~10x less work.

When the pieces give the same tokens. A byte-level BPE tokenizer (GPT-2, Llama 2/3-style ``ByteLevel``
pre-tokenizer with its GPT-2 pattern, no normalizer, no BPE dropout) splits the text into pre-tokens with the
pattern ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`` and runs BPE inside
each pre-token. Cut a text at a position ``c`` where ``text[c - 1]`` is not whitespace and ``text[c]`` is a
space. No alternative of the pattern matches a non-space character followed by a space (a space only ever
begins a match, or is inside a run of whitespace), so no pre-token crosses the cut; the matches left of the cut
look one character past their end at most, and a space there acts exactly as the end of the text does (every
alternative stops at both); the matches right of the cut start afresh (the pattern has no look-behind). So the
pre-tokens, hence the tokens, of the whole are those of the pieces, their offsets shifted by the piece's start;
the post-processor's special tokens (BOS, CLS/SEP) wrap the whole. Added tokens are matched before
pre-tokenization and may strip neighbouring spaces: a text that contains one is tokenized whole.

Anything else (another pre-tokenizer, a normalizer, BPE dropout, truncation or padding, a slow tokenizer) is
tokenized whole. And as a guard, a spread sample of the texts is also tokenized whole and must match exactly, ids
and offsets, or every text is tokenized whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from antlm_bench.scoring.encode import serial_tokenizer

_SAMPLE = 64  # texts checked against their whole tokenization (plus 0.5%)
_MIN_PIECE = 32  # characters: shorter shared pieces cost more bookkeeping than they save in tokenization


def plain_backend(tokenizer):
    """The fast tokenizer's Rust tokenizer when calling it directly gives what ``tokenizer(...)`` gives (no
    truncation or padding set on it), else None."""
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return None
    return backend


def piecewise_safe(tokenizer) -> bool:
    """Whether the tokenizer is one whose tokens never cross a cut before a space (see the module docstring)."""
    backend = plain_backend(tokenizer)
    if backend is None:
        return False
    try:
        spec = json.loads(backend.to_str())
    except (ValueError, TypeError):  # noqa: BLE001  (an unserialisable tokenizer: tokenize whole)
        return False
    pre, model = spec.get("pre_tokenizer") or {}, spec.get("model") or {}
    return (spec.get("normalizer") is None and pre.get("type") == "ByteLevel" and pre.get("use_regex", True)
            and not pre.get("add_prefix_space", False) and model.get("type") == "BPE" and not model.get("dropout"))


def _whole(backend, tokenizer, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(ids, offsets [n, 2]) of each text tokenized whole with the tokenizer's special tokens."""
    if backend is not None:
        with serial_tokenizer():
            pairs = [(e.ids, e.offsets) for e in backend.encode_batch(texts, add_special_tokens=True)]
    else:
        with serial_tokenizer():
            encoded = tokenizer(texts, return_offsets_mapping=True)
        pairs = list(zip(encoded["input_ids"], encoded["offset_mapping"]))
    return [(np.asarray(ids, dtype=np.int64), np.asarray(offsets, dtype=np.int64).reshape(-1, 2))
            for ids, offsets in pairs]


def _common_length(x: str, y: str) -> int:
    """The length of the longest common beginning of two strings (binary search on C-speed slice equality)."""
    lo, hi = 0, min(len(x), len(y))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[:mid] == y[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _branch_points(distinct: list[str]) -> list[set[int]]:
    """For each of the sorted distinct strings, the lengths of its longest common beginnings with the others:
    the places where other strings leave its path in their prefix tree. With the strings sorted, the common
    beginning with a string k places away is the minimum of the neighbours' common lengths in between, so the
    distinct values are the running minima either way, which a monotonic stack keeps."""
    common = [_common_length(a, b) for a, b in zip(distinct, distinct[1:])]
    points: list[set[int]] = [set() for _ in distinct]
    for indices, neighbour in ((range(len(distinct)), -1), (range(len(distinct) - 1, -1, -1), 0)):
        stack: list[int] = []
        for k in indices:
            j = k + neighbour  # the common length between k and its neighbour on the side already passed
            if 0 <= j < len(common) and (k > 0 if neighbour < 0 else k < len(common)):
                value = common[j]
                while stack and stack[-1] >= value:
                    stack.pop()
                stack.append(value)
            points[k].update(stack)
    return points


def last_cut(text: str, limit: int) -> int:
    """The last cut ``0 < c <= limit`` with ``text[c] == " "`` and ``text[c - 1]`` not whitespace, else 0."""
    c = text.rfind(" ", 0, min(limit, len(text) - 1) + 1)
    while c > 0:
        if not text[c - 1].isspace():
            return c
        c = text.rfind(" ", 0, c)
    return 0


def split_shared(texts: Sequence[str]) -> list[list[str]]:
    """Each text as pieces joined at cuts (see :func:`last_cut`) at or before each place where another text leaves
    it, so that its beginnings shared with other texts are whole pieces; no piece is shorter than ``_MIN_PIECE``
    characters, except a text's last."""
    distinct = sorted(set(texts))
    split: dict[str, list[str]] = {}
    for text, points in zip(distinct, _branch_points(distinct)):
        pieces, at = [], 0
        for point in sorted(points):
            if point - at < _MIN_PIECE:
                continue
            c = last_cut(text, point)
            if c - at >= _MIN_PIECE:
                pieces.append(text[at:c])
                at = c
        pieces.append(text[at:])
        split[text] = pieces
    return [split[text] for text in texts]


def encode_with_offsets(tokenizer, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(ids, character offsets [n, 2]) of each text, equal to its whole tokenization with special tokens."""
    texts = list(texts)
    backend = plain_backend(tokenizer)
    if not texts or not piecewise_safe(tokenizer):
        return _whole(backend, tokenizer, texts)
    added = [token.content for token in backend.get_added_tokens_decoder().values()]
    plain = [i for i, text in enumerate(texts) if not any(a in text for a in added)]
    out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(texts)
    sample = sorted({*np.linspace(0, len(plain) - 1, min(len(plain), _SAMPLE + len(plain) // 200)).astype(int)}) \
        if plain else []
    checked = _whole(backend, tokenizer, [texts[plain[k]] for k in sample])
    wrapped = backend.post_process(backend.encode("", add_special_tokens=False), add_special_tokens=True)
    wrap_ids = np.asarray(wrapped.ids, dtype=np.int64)
    wrap_offsets = np.asarray(wrapped.offsets, dtype=np.int64).reshape(-1, 2)
    # an empty text gets every special token; those before the text are those the whole encodings start with
    n_lead = 0
    if checked:
        first_ids = checked[0][0]
        while n_lead < len(wrap_ids) and n_lead < len(first_ids) and first_ids[n_lead] == wrap_ids[n_lead]:
            n_lead += 1
    lead, trail = (wrap_ids[:n_lead], wrap_offsets[:n_lead]), (wrap_ids[n_lead:], wrap_offsets[n_lead:])

    split = split_shared([texts[i] for i in plain])
    distinct = sorted({piece for pieces in split for piece in pieces})
    where = {piece: k for k, piece in enumerate(distinct)}
    encoded = backend.encode_batch(distinct, add_special_tokens=False)
    flat_ids = np.fromiter((t for e in encoded for t in e.ids), dtype=np.int64)
    flat_offsets = np.asarray([o for e in encoded for o in e.offsets], dtype=np.int64).reshape(-1, 2)
    n_tokens = np.fromiter((len(e.ids) for e in encoded), dtype=np.int64, count=len(encoded))
    first_token = np.cumsum(n_tokens) - n_tokens
    # every (text, piece) in order: the piece's tokens, their offsets moved by where the piece starts in the text
    chosen = np.fromiter((where[piece] for pieces in split for piece in pieces), dtype=np.int64)
    char_len = np.fromiter((len(piece) for pieces in split for piece in pieces), dtype=np.int64, count=len(chosen))
    per_text = np.fromiter((len(pieces) for pieces in split), dtype=np.int64, count=len(split))
    text_start = np.repeat(np.cumsum(per_text) - per_text, per_text)
    char_at = np.cumsum(char_len) - char_len
    char_at -= char_at[text_start]
    counts = n_tokens[chosen]
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    gather = np.repeat(first_token[chosen], counts) + within
    all_ids, all_offsets = flat_ids[gather], flat_offsets[gather] + np.repeat(char_at, counts)[:, None]
    text_tokens = np.add.reduceat(counts, np.cumsum(per_text) - per_text) if len(counts) else counts
    ends = np.cumsum(text_tokens)
    for i, a, b in zip(plain, (ends - text_tokens).tolist(), ends.tolist()):
        out[i] = (np.concatenate([lead[0], all_ids[a:b], trail[0]]),
                  np.concatenate([lead[1], all_offsets[a:b], trail[1]]))
    for k, (ids, offsets) in zip(sample, checked):
        got_ids, got_offsets = out[plain[k]]
        if not (np.array_equal(got_ids, ids) and np.array_equal(got_offsets, offsets)):
            return _whole(backend, tokenizer, texts)
    rest = [i for i, value in enumerate(out) if value is None]
    for i, value in zip(rest, _whole(backend, tokenizer, [texts[i] for i in rest])):
        out[i] = value
    return out  # type: ignore[return-value]
