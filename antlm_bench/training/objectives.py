"""Training batches for each objective: input corruption, labels and the attention mode.

One set of parameters and one LM head serve every objective; the phase only picks how a batch of packed token
sequences is turned into (inputs, labels, label shift, attention mode):

- CLM: inputs unchanged, causal attention, position i predicts token i+1 (shift 1).
- MLM: ``rate`` of the (non-special) positions chosen; of those 80% become [MASK], 10% a random token, 10% stay;
  bidirectional attention; the loss only at the chosen positions, read at the same position (shift 0). How many
  tokens a sequence masks is drawn as Binomial(eligible tokens, rate) (LTG-BERT's rule; the expected rate is the
  configured one); which ones, as the recipe says: ``token`` (BERT), ``whole_word``, ``whole_word_span`` (spans of
  1..max_span whole words), ``span``: LTG-BERT's own subword spans with one replacement decision per span, the
  last span running over the budget as theirs does (so about 17% for 15%), or ``span_budget``: the same with
  the last span cut to the budget (the configured rate, shorter spans).
- MNTP: MLM's corruption, the chosen token i predicted from position i-1 (shift 1), bidirectional attention.
- MIX: every global batch is split by the weights, row by row (``mix_rows``): GPT-BERT's per-sample mixture. Each
  part is built as its own objective's batch (``MixedBatch``). The step's loss is the recipe's ``mix_loss``
  (``MixedBatch.loss_scales``): ``row_share`` (the default, GPT-BERT's without ``--token_weighted_loss``) weighs
  each objective's mean token loss by its share of the batch's rows, so MIX(CLM:1,MNTP:15) gives the CLM rows
  1/16 of the gradient; ``token`` is the mean over every labelled token of the global batch, where a CLM row,
  which labels every position, weighs about 1/rate times an MNTP row (the CLM rows then carry about 30% of it).
- BATCHMIX: each optimizer step draws ONE of its objectives by weight (``draw_mix_objective``).

All randomness comes from ``numpy`` generators keyed by (seed, step, purpose), never from a global state: the same
step gets the same masks whether the run was resumed or not and however many processes share the global batch.
A builder always corrupts the WHOLE global batch; each process then takes its rows (``Batch.rows``), so every
process also knows how many tokens the global batch (and each MIX part of it) predicts (``n_targets``), the
loss's denominators.

``sequence_loss_sum`` is the loss itself: hidden states, then the head ONLY at the positions that carry a loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from antlm_bench.models.loss import IGNORE, lm_loss_sum
from antlm_bench.recipes import Masking

SHIFT = {"CLM": 1, "MLM": 0, "MNTP": 1}
ATTENTION = {"CLM": "causal", "MLM": "bidirectional", "MNTP": "bidirectional"}
SPAN_CONTINUE_P = 0.5  # whole_word_span: a span takes in the next word with this probability (geometric lengths)
# LTG-BERT's span masking: span length Geometric(1/3) % 10 subwords, at most 100 tries per row
LTG_SPAN_P, LTG_SPAN_MOD, LTG_SPAN_TRIES = 1 / 3, 10, 100

# purposes mixed into the generator keys, so that two uses of randomness at one step never share a stream
_PURPOSE = {"MLM": 1, "MNTP": 2, "MIX": 3, "MIX_ROWS": 4}


@dataclass
class Batch:
    """A (global or per-process) batch. ``labels`` hold the token each position's prediction is scored against,
    IGNORE elsewhere; position i's output predicts ``labels[i + shift]``."""

    objective: str
    attention_mode: str
    input_ids: np.ndarray  # [B, T] int64 (corrupted for MLM / MNTP)
    labels: np.ndarray  # [B, T] int64
    shift: int

    @property
    def n_targets(self) -> int:
        return int((self.labels[:, self.shift :] != IGNORE).sum())

    def rows(self, index: slice | np.ndarray) -> Batch:
        return replace(self, input_ids=self.input_ids[index], labels=self.labels[index])

    def loss_scales(self, mix_loss: str) -> list[tuple[Batch, float]]:
        """(part, scale) pairs: the step's loss is the sum over parts of scale x the part's summed token loss. A
        plain batch is one part, its loss the mean over its labelled tokens whatever ``mix_loss`` says."""
        return [(self, 1.0 / max(self.n_targets, 1))]

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


@dataclass
class MixedBatch:
    """A per-sample MIX batch: the global batch's rows split among objectives, each part a ``Batch`` of its own
    (own corruption, labels, shift and attention mode). ``rows`` of the global batch, in part order."""

    parts: list[Batch]
    objective: str = "MIX"

    @property
    def n_targets(self) -> int:
        return sum(part.n_targets for part in self.parts)

    def loss_scales(self, mix_loss: str) -> list[tuple[Batch, float]]:
        """(part, scale) pairs: the step's loss is the sum over parts of scale x the part's summed token loss, all
        counts over the GLOBAL batch (so micro-batches and processes add up to the same gradient).

        ``row_share``: scale = (the part's share of the rows) / (its labelled tokens): each objective's mean token
        loss weighted by its share of the rows, as GPT-BERT trains by default (every GPU holds one objective and
        averages over its own tokens; DDP averages the GPUs). ``token``: 1 / (every labelled token of the batch),
        the mean over all of them (GPT-BERT's ``--token_weighted_loss``)."""
        if mix_loss == "token":
            per_token = 1.0 / max(self.n_targets, 1)
            return [(part, per_token) for part in self.parts]
        if mix_loss == "row_share":
            rows = len(self)
            return [(part, len(part) / rows / max(part.n_targets, 1)) for part in self.parts]
        raise ValueError(f"mix_loss {mix_loss!r}: use row_share or token")

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts)


def step_rng(seed: int, step: int, purpose: str) -> np.random.Generator:
    """The generator of one optimizer step and one purpose; a pure function of its arguments."""
    return np.random.default_rng([int(seed), int(step), _PURPOSE[purpose]])


def draw_mix_objective(weights: dict[str, float], seed: int, step: int) -> str:
    """BATCHMIX: which objective this step trains (the same on every process, and again after a resume)."""
    names = list(weights)
    p = np.asarray([weights[n] for n in names], dtype=np.float64)
    return names[int(step_rng(seed, step, "MIX").choice(len(names), p=p / p.sum()))]


def mix_rows(weights: dict[str, float], n_rows: int, seed: int, step: int) -> dict[str, np.ndarray]:
    """Per-sample MIX: which rows of a global batch of ``n_rows`` each objective trains (sorted row indices).

    Counts follow the weights by systematic rounding: objective i gets floor or ceil of ``n_rows * w_i / sum(w)``,
    its expected count exactly (one uniform offset for the cumulative boundaries), so the share per epoch matches
    the weights whatever the batch size; the rows are a random permutation. Both come from (seed, step) only: every
    process and every resume assigns the same rows."""
    rng = step_rng(seed, step, "MIX_ROWS")
    names = list(weights)
    w = np.asarray([weights[n] for n in names], dtype=np.float64)
    cumulative = np.cumsum(w) / w.sum() * n_rows
    offset = rng.random()
    bounds = np.minimum(np.floor(cumulative + offset).astype(np.int64), n_rows)
    bounds[-1] = n_rows  # float sums may end a hair below n_rows
    starts = np.concatenate([[0], bounds[:-1]])
    order = rng.permutation(n_rows)
    return {name: np.sort(order[a:b]) for name, a, b in zip(names, starts, bounds)}


class BatchBuilder:
    """Turns packed token sequences into the batches of each objective.

    ``special_ids`` are never chosen for masking nor drawn as random replacements; ``vocab_size`` is the
    tokenizer's (random replacements come from its non-special tokens).
    """

    def __init__(
        self, masking: Masking, mask_token_id: int, vocab_size: int, special_ids: Sequence[int], seed: int
    ) -> None:
        if masking.mask_token_ratio + masking.random_token_ratio > 1 + 1e-9:
            raise ValueError("mask_token_ratio + random_token_ratio must be at most 1")
        self.masking = masking
        self.mask_token_id = int(mask_token_id)
        self.special_ids = np.asarray(sorted({int(i) for i in special_ids}), dtype=np.int64)
        self.replacements = np.setdiff1d(np.arange(vocab_size, dtype=np.int64), self.special_ids)
        self.seed = int(seed)

    def build(
        self, objective: str, input_ids: np.ndarray, word_starts: np.ndarray | None, step: int
    ) -> Batch:
        ids = np.asarray(input_ids, dtype=np.int64)
        if objective == "CLM":
            return Batch("CLM", "causal", ids, ids.copy(), 1)
        if objective not in ("MLM", "MNTP"):
            raise ValueError(f"unknown objective {objective!r} (mixtures: build_mix, or draw_mix_objective)")
        rng = step_rng(self.seed, step, objective)
        chosen, draw = self.choose_positions(ids, word_starts, rng, skip_first=objective == "MNTP")
        corrupted = self.corrupt(ids, chosen, rng, draw)
        labels = np.where(chosen, ids, IGNORE)
        return Batch(objective, "bidirectional", corrupted, labels, SHIFT[objective])

    def build_mix(self, weights: dict[str, float], input_ids: np.ndarray, word_starts: np.ndarray | None,
                  step: int) -> MixedBatch:
        """Per-sample MIX: the rows ``mix_rows`` assigns to each objective, each built as that objective's batch
        (an objective that gets no rows this step has no part)."""
        parts = []
        for name, rows in mix_rows(weights, len(input_ids), self.seed, step).items():
            if len(rows):
                parts.append(self.build(name, input_ids[rows], None if word_starts is None else word_starts[rows],
                                        step))
        return MixedBatch(parts)

    # -- which positions ---------------------------------------------------------------------------------------
    def choose_positions(
        self, ids: np.ndarray, word_starts: np.ndarray | None, rng: np.random.Generator, skip_first: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(chosen, draw): boolean [B, T], the positions whose tokens the model must recover, and for ``span`` the
        replacement draw shared by each span's positions (None: ``corrupt`` draws one per token).

        Every strategy first draws how many tokens a row masks, Binomial(eligible tokens, rate) (at least one where
        any is eligible), as LTG-BERT does: the expected rate is exactly ``rate``, except under ``span``, whose
        last span runs over that budget as LTG-BERT's does."""
        eligible = ~np.isin(ids, self.special_ids)
        if skip_first:
            eligible[:, 0] = False  # MNTP reads token i at position i-1: position 0 has nothing before it
        n_eligible = eligible.sum(axis=1)
        budget = np.minimum(n_eligible, np.maximum(1, rng.binomial(n_eligible, self.masking.rate)))
        strategy = self.masking.strategy
        if strategy in ("span", "span_budget"):
            return self._ltgbert_spans(eligible, budget, rng, cut_to_budget=strategy == "span_budget")
        # the units that are masked as a whole: tokens, words, or spans of consecutive words
        if strategy == "token" or word_starts is None:
            unit_start = np.ones_like(eligible)
        else:
            unit_start = np.asarray(word_starts, dtype=bool).copy()
            unit_start |= ~eligible  # special tokens stand alone (and so never join a span) ...
            unit_start[:, 1:] |= ~eligible[:, :-1]  # ... and the token after one starts a unit
            unit_start[:, 0] = True
            if strategy == "whole_word_span":
                unit_start = self._group_into_spans(unit_start, eligible, rng)
        return self._take_units(unit_start, eligible, budget, rng), None

    def _take_units(self, unit_start: np.ndarray, eligible: np.ndarray, budget: np.ndarray,
                    rng: np.random.Generator) -> np.ndarray:
        """Units in a random order, taken whole while they fit the row's budget; the unit that would cross it is
        taken with probability (what is left) / (its size), so a row's expected count is its budget exactly (a
        greedy fill that takes the crossing unit, or skips it and fills the gap with later small units,
        overshoots: 15.8% for 15% was measured with whole words)."""
        n_rows, length = eligible.shape
        unit = np.cumsum(unit_start, axis=1) - 1  # [B, T] unit index within its row
        flat = unit + np.arange(n_rows)[:, None] * length
        size = np.bincount(flat.ravel(), weights=eligible.ravel(), minlength=n_rows * length).reshape(n_rows, length)
        keys = np.where(size > 0, rng.random(size.shape), 2.0)
        order = np.argsort(keys, axis=1, kind="stable")
        sorted_size = np.take_along_axis(size, order, axis=1)
        after = np.cumsum(sorted_size, axis=1)
        before = after - sorted_size
        need = budget[:, None].astype(np.float64)
        crossing = (sorted_size > 0) & (before < need) & (after > need)
        lucky = rng.random(sorted_size.shape) * np.maximum(sorted_size, 1) < need - before
        take_sorted = (sorted_size > 0) & ((after <= need) | (crossing & lucky))
        take = np.zeros_like(take_sorted)
        np.put_along_axis(take, order, take_sorted, axis=1)
        return np.take_along_axis(take, unit, axis=1) & eligible

    def _ltgbert_spans(self, eligible: np.ndarray, budget: np.ndarray, rng: np.random.Generator,
                       cut_to_budget: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """LTG-BERT's span masking (Samuel et al. 2023) as its BabyLM code writes it: ``SpanMaskingStrategy`` in
        ltgoslo/ltg-bert's ``babylm/train/dataset.py``. Per row: a budget of Binomial(eligible, rate) tokens (at
        least one); then, while fewer are chosen and fewer than 100 tries are spent, a SUBWORD span of length
        ``Geometric(1/3) % 10`` (0 is a spent try) at a uniform offset in ``[-(length - 1), T + length)``, cut to
        ``[0, T - 1)`` (spans hang over either end; the row's last position is never chosen: in LTG-BERT's rows it
        is always [SEP] or padding), special tokens skipped. The last span is NOT cut to the budget: it runs over,
        so the rate ends above the configured one (17.1% for 15% on 64-token rows) and long spans stay long. One
        replacement draw per span (80% [MASK] / 10% random / 10% kept for the whole span); a later span re-decides
        the positions it overlaps. (The repository's older ``training/mlm_dataset.py`` subtracts each span's size,
        overlaps counted twice, from the budget and has no try limit; the BabyLM code is the one its paper ran.)

        ``cut_to_budget`` (strategy ``span_budget``): the span that would pass the budget is cut to it, so the rate
        is the configured one, at the price of shorter spans (mean run 2.5 subwords instead of 2.9)."""
        n_rows, length = eligible.shape
        chosen = np.zeros_like(eligible)
        draw = np.ones((n_rows, length))  # positions never chosen keep 1.0 (not corrupted anyway)
        for row in range(n_rows):
            need, got, tries = int(budget[row]), 0, LTG_SPAN_TRIES
            while got < need and tries > 0:
                tries -= 1
                span = int(rng.geometric(LTG_SPAN_P)) % LTG_SPAN_MOD
                if span == 0:
                    continue
                offset = int(rng.integers(-(span - 1), length + span))
                lo, hi = max(0, offset), min(length - 1, offset + span)
                if lo >= hi:
                    continue
                seg = eligible[row, lo:hi]
                new = seg & ~chosen[row, lo:hi]
                excess = int(new.sum()) - (need - got)
                if cut_to_budget and excess > 0:
                    new[np.flatnonzero(new)[-excess:]] = False
                span_draw = rng.random()
                chosen[row, lo:hi] |= new
                draw[row, lo:hi] = np.where(seg, span_draw, draw[row, lo:hi])  # earlier picks in it: re-decided
                got += int(new.sum())
        return chosen, draw

    def _group_into_spans(self, word_start: np.ndarray, eligible: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """whole_word_span: spans of 1..max_span whole words, lengths geometric (truncated at max_span)."""
        n_rows, length = word_start.shape
        draws = rng.random((n_rows, length))
        span_start = np.zeros_like(word_start)
        words_in_span = np.zeros(n_rows, dtype=np.int64)
        for t in range(length):  # T vector steps over all rows
            starts_word = word_start[:, t]
            new = starts_word & (
                (t == 0) | (draws[:, t] >= SPAN_CONTINUE_P) | (words_in_span >= self.masking.max_span)
                | ~eligible[:, t] | ~eligible[:, t - 1 if t else 0]
            )
            span_start[:, t] = new
            words_in_span = np.where(new, 1, words_in_span + starts_word)
        return span_start

    # -- how they are corrupted --------------------------------------------------------------------------------
    def corrupt(self, ids: np.ndarray, chosen: np.ndarray, rng: np.random.Generator,
                draw: np.ndarray | None = None) -> np.ndarray:
        """80/10/10: [MASK], a random non-special token, or the token itself (ratios from the recipe); decided per
        token, or per span where ``draw`` gives one value per span."""
        own = rng.random(ids.shape)
        draw = own if draw is None else draw
        random_tokens = self.replacements[rng.integers(0, len(self.replacements), size=ids.shape)]
        out = ids.copy()
        to_mask = chosen & (draw < self.masking.mask_token_ratio)
        to_random = chosen & ~to_mask & (draw < self.masking.mask_token_ratio + self.masking.random_token_ratio)
        out[to_mask] = self.mask_token_id
        out[to_random] = random_tokens[to_random]
        return out


def sequence_loss_sum(model: torch.nn.Module, input_ids: torch.Tensor, labels: torch.Tensor, shift: int,
                      attention_mode: str) -> torch.Tensor:
    """Summed cross-entropy (float32) over the labelled positions; the LM head runs only there, its output
    projection fused with the loss (``models.loss.lm_loss_sum``).

    ``model`` offers ``hidden_states(input_ids, attention_mask, attention_mode)``, ``lm_features(hidden)`` and
    ``get_output_embeddings()``.
    """
    hidden = model.hidden_states(input_ids, None, attention_mode)
    return lm_loss_sum(model, hidden, labels, shift)[0]


class LossModule(torch.nn.Module):
    """The model plus its loss, as one module: DistributedDataParallel must wrap what ``forward`` runs."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, shift: int, attention_mode: str) -> torch.Tensor:
        return sequence_loss_sum(self.model, input_ids, labels, shift, attention_mode)
