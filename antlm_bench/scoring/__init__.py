"""Minimal-pair scoring: clm, pll, pll-word-l2r and mntp, batched by a token budget.

    sm = load_scoring_model("path/to/checkpoint")            # or wrap_model(model, tokenizer)
    good, bad = score_pairs(sm, goods, bads, method="clm")   # summed natural-log scores, float64
    contexts=[...] scores each text as a continuation of its context (EWoK).

Conventions (docs/design.md): texts are tokenized as given (``leading_space=True`` scores ``" " + text`` as the
stock lm-eval blimp tasks do); clm conditions on BOS, else EOS; special tokens are never scored in the PLL
family; log-softmax in float32 whatever the model's dtype; scores are sums.

Modules, from text to scores: ``offsets`` and ``encode`` (texts -> token sequences and the positions scored,
``babylm2025`` for the BabyLM 2025 zero-shot tasks' sequences), ``rows`` (the rows the engine runs), ``clm_rows``,
``prefix_tree`` and ``shared_bases`` (clm rows: plain, prefix trees, shared prefixes), ``masked_rows`` (one masked
copy per scored token for pll, pll-word-l2r and mntp), ``model`` and ``heads`` (one face for every model, its LM
head found and checked) and ``engine`` (the batched loop every method shares).

The tasks built on scoring live in ``adapters``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from antlm_bench.errors import UserError
from antlm_bench.scoring.encode import Seq, dedupe, encode
from antlm_bench.scoring.engine import score_seqs
from antlm_bench.scoring.model import ScoringModel, load_scoring_model, resolve_device_dtype, wrap_model

METHODS = ("clm", "pll", "pll-word-l2r", "mntp")


def check_method(method: str) -> str:
    if method not in METHODS:
        raise UserError(f"--scoring {method}: unknown; use auto, {', '.join(METHODS)}")
    return method


def score_texts(
    sm: ScoringModel,
    texts: Sequence[str],
    method: str,
    contexts: Sequence[str | None] | None = None,
    batch_tokens: int = 4096,
    leading_space: bool = False,
    progress: Callable[[float], None] | None = None,
) -> np.ndarray:
    """Score each text (as a continuation of its context, when given). ``progress`` gets texts finished."""
    check_method(method)
    sm.check_mode("causal" if method == "clm" else "bidirectional", method)
    contexts = [None] * len(texts) if contexts is None else list(contexts)
    if len(contexts) != len(texts):
        raise ValueError("contexts and texts differ in length")
    seqs = encode(sm.tokenizer, list(zip(contexts, texts)), method, leading_space)
    unique, index = dedupe(seqs)
    scale = len(seqs) / max(1, len(unique))  # report progress in input texts, not unique sequences
    report = None if progress is None else (lambda done: progress(done * scale))
    return score_seqs(sm, unique, method, batch_tokens, report)[index]


def score_pairs(
    sm: ScoringModel,
    good: Sequence[str],
    bad: Sequence[str],
    method: str,
    contexts: Sequence[str | None] | None = None,
    batch_tokens: int = 4096,
    leading_space: bool = False,
    progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Scores of both members of every pair; ``progress`` gets pairs finished (fractional)."""
    if len(good) != len(bad):
        raise ValueError("good and bad differ in length")
    both_contexts = None if contexts is None else [*contexts, *contexts]
    report = None if progress is None else (lambda done: progress(done / 2))
    scores = score_texts(sm, [*good, *bad], method, both_contexts, batch_tokens, leading_space, report)
    return scores[: len(good)], scores[len(good):]


__all__ = [
    "METHODS", "ScoringModel", "Seq", "check_method", "load_scoring_model", "resolve_device_dtype", "score_pairs",
    "score_texts", "wrap_model",
]
