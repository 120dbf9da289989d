"""An independent, deliberately plain re-implementation of the BabyLM 2025 zero-shot scoring rules, written from
../shared/EVAL-2025.md (one sentence, one forward pass; nothing shared with antlm_bench's scoring code), for the
parity tests and the speed benchmark (benchmarks/babylm2025.py: the "faithful batch-1" side).
"""

from __future__ import annotations

import math

import numpy as np
import torch


def _logits(model, ids: list[int]) -> torch.Tensor:
    """Logits in float32 at least (the official softmax runs in the model's float32; a float64 test model keeps
    float64, as antlm_bench's engine does, so that parity is not buried in float32 rounding)."""
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    return logits if logits.dtype == torch.float64 else logits.float()


def span_score(model, tok, sentence: str, completion: str, method: str) -> float:
    """EVAL-2025 section 1: the sum of ln p over the tokens whose offset end lies after the completion's start."""
    enc = tok(sentence, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    start_char = len(sentence) - len(completion) + offsets[0][0]
    span = [i for i, (_, end) in enumerate(offsets) if end > start_char]
    # the official sums in the model's dtype; its float32 rounding (~1e-5 nats on a 100-nat sum) is below what
    # the official run itself reproduces and above the 1e-6 the parity tests ask, so this sums in float64
    total = torch.zeros((), dtype=torch.float64)
    if method == "clm":
        logprobs = torch.log_softmax(_logits(model, ids), dim=-1)
        for i in span:
            if i >= 1:
                total += logprobs[i - 1, ids[i]].double()
        return float(total)
    for i in span:
        if method == "mntp" and i == 0:
            continue
        masked = list(ids)
        masked[i] = tok.mask_token_id
        read = i if method == "pll" else i - 1
        total += torch.log_softmax(_logits(model, masked)[read], dim=-1)[ids[i]].double()
    return float(total)


def p_next(model, tok, context: str, piece: str, method: str) -> float:
    """``get_p``: the float32 softmax after the context (clm) or at the appended masks (pll, mntp), read at the
    first token of the piece tokenized alone."""
    target = tok(piece, add_special_tokens=False)["input_ids"][0]
    if method == "clm":
        logits = _logits(model, tok(context)["input_ids"])[-1]
    else:
        ids = tok(context + tok.mask_token * 3)["input_ids"]
        follows = ids[-1] != tok.mask_token_id
        where = {"pll": -3, "mntp": -4}[method] - (1 if follows else 0)
        logits = _logits(model, ids)[where]
    return torch.softmax(logits, dim=-1)[target].item()


def surprisal(model, tok, context: str, word: str, method: str) -> float:
    """``get_p2`` then -ln: the product over the word's sub-tokens, each after the context string grown by the
    decoded sub-tokens before it."""
    pieces = tok(word, add_special_tokens=False)["input_ids"]
    probabilities = [p_next(model, tok, context, tok.decode(pieces[0]), method)] if len(pieces) > 1 else []
    if len(pieces) == 1:
        return -math.log(p_next(model, tok, context, word, method))
    grown = context + tok.decode(pieces[0])
    for piece in pieces[1:]:
        text = tok.decode(piece)
        probabilities.append(p_next(model, tok, grown, text, method))
        grown += text
    return -math.log(np.prod(probabilities))


def average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of average ranks."""
    ra, rb = average_ranks(np.asarray(a, float)), average_ranks(np.asarray(b, float))
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / math.sqrt((ra * ra).sum() * (rb * rb).sum()))


def wug_p_first(s0: float, s1: float) -> float:
    return float(torch.softmax(torch.tensor([s0, s1], dtype=torch.float32), dim=0)[0])


def entity_value(items: list[tuple[str, int, list[float]]]) -> float:
    """(file, numops, five scores): k tied maxima count 1/k; mean over groups per file, then over files."""
    groups: dict[str, dict[int, list[float]]] = {}
    for name, numops, scores in items:
        best = max(scores)
        tied = [i for i, s in enumerate(scores) if s == best]
        groups.setdefault(name, {}).setdefault(numops, []).append(1 / len(tied) if 0 in tied else 0.0)
    files = [np.mean([np.mean(v) for v in by_group.values()]) for by_group in groups.values()]
    return float(np.mean(files))


def _r2(y: np.ndarray, x: np.ndarray) -> float:
    from sklearn.linear_model import LinearRegression

    return float(LinearRegression().fit(x, y).score(x, y))


def gain(frame: dict[str, np.ndarray], dv: str, main: list[str], pred: np.ndarray) -> float:
    """statsmodels-style ``dv ~ main + pairwise products`` vs the same + pred, each on its own complete rows."""
    pairs = [(a, b) for i, a in enumerate(main) for b in main[i + 1:]]

    def fit(with_pred: bool) -> float:
        columns = [frame[m] for m in main] + [frame[a] * frame[b] for a, b in pairs]
        needed = [frame[dv]] + [frame[m] for m in main] + ([pred] if with_pred else [])
        rows = ~np.isnan(np.column_stack(needed)).any(axis=1)
        x = np.column_stack(columns + ([pred] if with_pred else []))[rows]
        return _r2(frame[dv][rows], x)

    base = fit(False)
    return (fit(True) - base) / (1 - base)
