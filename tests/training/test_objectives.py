"""Batches of each objective: mask rates, the 80/10/10 split, label alignment, loss only where labelled."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from antlm_bench.recipes import Masking
from antlm_bench.training.objectives import IGNORE, BatchBuilder, draw_mix_objective, sequence_loss_sum

VOCAB, MASK, SPECIALS = 500, 3, (0, 1, 2, 3, 4)


def _corpus(rows: int = 512, length: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(len(SPECIALS), VOCAB, size=(rows, length))
    ids[:, 0] = 1  # a BOS at the start and an EOS somewhere, as packed documents have
    ids[np.arange(rows), rng.integers(10, length, rows)] = 2
    word_starts = rng.random((rows, length)) < 0.6  # words of 1..several tokens
    return ids, word_starts


def _builder(strategy: str = "token", seed: int = 7, **masking) -> BatchBuilder:
    return BatchBuilder(Masking(strategy=strategy, **masking), MASK, VOCAB, SPECIALS, seed=seed)


def _units(word_starts: np.ndarray, ids: np.ndarray) -> list[list[list[int]]]:
    """Per row, the words as lists of positions (specials alone)."""
    special = np.isin(ids, SPECIALS)
    out = []
    for r in range(ids.shape[0]):
        words: list[list[int]] = []
        for t in range(ids.shape[1]):
            if t == 0 or word_starts[r, t] or special[r, t] or special[r, t - 1]:
                words.append([t])
            else:
                words[-1].append(t)
        out.append(words)
    return out


def test_clm_batch_is_the_sequence_itself() -> None:
    ids, ws = _corpus(8)
    batch = _builder().build("CLM", ids, ws, step=0)
    assert batch.attention_mode == "causal" and batch.shift == 1
    assert np.array_equal(batch.input_ids, ids) and np.array_equal(batch.labels, ids)
    assert batch.n_targets == ids.shape[0] * (ids.shape[1] - 1)


@pytest.mark.parametrize("strategy", ["token", "whole_word", "span", "span_budget", "whole_word_span"])
@pytest.mark.parametrize("objective", ["MLM", "MNTP"])
def test_mask_rate_and_80_10_10(strategy: str, objective: str) -> None:
    ids, ws = _corpus()
    batch = _builder(strategy).build(objective, ids, ws, step=3)
    assert batch.attention_mode == "bidirectional"
    assert batch.shift == (1 if objective == "MNTP" else 0)
    chosen = batch.labels != IGNORE
    eligible = ~np.isin(ids, SPECIALS)
    if objective == "MNTP":
        eligible[:, 0] = False
        assert not chosen[:, 0].any()
    assert not (chosen & ~eligible).any(), "special tokens are never chosen"
    if strategy == "span":  # LTG-BERT's last span runs over the budget (parity with their rule: test_masking_rates)
        assert 0.16 < chosen.sum() / eligible.sum() < 0.19
    else:
        assert abs(chosen.sum() / eligible.sum() - 0.15) < 0.005
    # every row gets its own Binomial(n, rate) share (LTG-BERT's count), not just the total: at least one token,
    # and no row far beyond what the binomial allows (P(X > 0.4 n) < 1e-8 for n ~ 60)
    per_row = chosen.sum(1) / eligible.sum(1)
    assert np.all(per_row < 0.4)
    if strategy in ("token", "span", "span_budget"):  # whole units may not fit a budget of one token (then taken by chance)
        assert np.all(chosen.sum(1) >= 1)
    assert 0.03 < per_row.std() < 0.07  # binomial spread (sqrt(0.15 * 0.85 / 60) ~ 0.046), not a fixed count
    # labels: the original tokens at chosen positions, nothing elsewhere; unchosen inputs untouched
    assert np.array_equal(batch.labels[chosen], ids[chosen])
    assert np.array_equal(batch.input_ids[~chosen], ids[~chosen])
    masked = batch.input_ids[chosen] == MASK
    kept = batch.input_ids[chosen] == ids[chosen]
    replaced = ~masked & ~kept
    n = chosen.sum()
    # one draw per span under span / span_budget: the tokens of a span move together, so the shares of ~5,000
    # tokens spread like those of ~2,000 spans (sd ~0.008 for the 10% shares instead of 0.004)
    spread = 1.7 if strategy.startswith("span") else 1.0
    assert abs(masked.mean() - 0.8) < 0.02 * spread
    # a random replacement may draw the token itself (1 / vocab), which then counts as kept
    assert abs(replaced.mean() - 0.1) < 0.015 * spread and abs(kept.mean() - 0.1) < 0.015 * spread, n
    assert not np.isin(batch.input_ids[chosen][replaced], SPECIALS).any()
    assert batch.n_targets == int(chosen[:, batch.shift:].sum())


def test_whole_word_masks_every_token_of_a_word() -> None:
    ids, ws = _corpus(64)
    chosen = _builder("whole_word").build("MLM", ids, ws, step=1).labels != IGNORE
    n_partial = 0
    for r, words in enumerate(_units(ws, ids)):
        for word in words:
            flags = {bool(chosen[r, t]) for t in word if not np.isin(ids[r, t], SPECIALS)}
            n_partial += len(flags) > 1
    assert n_partial == 0
    token_chosen = _builder("token").build("MLM", ids, ws, step=1).labels != IGNORE
    partial_token = sum(
        len({bool(token_chosen[r, t]) for t in w}) > 1 for r, words in enumerate(_units(ws, ids)) for w in words
    )
    assert partial_token > 0  # the check above can fail: token masking does split words


def test_whole_word_span_masking_takes_runs_of_whole_words() -> None:
    ids, ws = _corpus(256)
    chosen = _builder("whole_word_span", max_span=3).build("MLM", ids, ws, step=2).labels != IGNORE
    span_words = []
    for r, words in enumerate(_units(ws, ids)):
        flags = [all(chosen[r, t] for t in w) for w in words]
        partial = [any(chosen[r, t] for t in w) and not f for w, f in zip(words, flags)]
        assert not any(partial)
        run = 0
        for f in flags + [False]:
            if f:
                run += 1
            elif run:
                span_words.append(run)
                run = 0
    lengths = np.bincount(span_words)
    # adjacent spans may touch, so runs can exceed max_span; but multi-word runs must be common, as spans make
    assert lengths[2:].sum() > 0.3 * lengths[1:].sum()
    token_runs = []
    tchosen = _builder("whole_word").build("MLM", ids, ws, step=2).labels != IGNORE
    for r, words in enumerate(_units(ws, ids)):
        run = 0
        for w in words + [[None]]:
            f = w[0] is not None and all(tchosen[r, t] for t in w)
            if f:
                run += 1
            elif run:
                token_runs.append(run)
                run = 0
    assert np.mean(span_words) > np.mean(token_runs) + 0.3


def test_ltgbert_span_masking_decides_the_replacement_per_subword_span() -> None:
    ids, ws = _corpus(512)
    builder = _builder("span")
    eligible = ~np.isin(ids, SPECIALS)
    rng = np.random.default_rng(5)
    budget = rng.binomial(eligible.sum(1), 0.15)
    chosen, draw = builder._ltgbert_spans(eligible, np.maximum(budget, 1), np.random.default_rng(6))
    # LTG-BERT's last span runs over the budget (by at most one span, 8 subwords past the last one needed)
    assert np.all(chosen.sum(1) >= np.maximum(budget, 1)) and np.all(chosen.sum(1) <= np.maximum(budget, 1) + 8)
    assert (chosen.sum(1) > np.maximum(budget, 1)).mean() > 0.3
    assert not chosen[:, -1].any()  # their slice stops before the row's last position
    cut, _ = builder._ltgbert_spans(eligible, np.maximum(budget, 1), np.random.default_rng(6), cut_to_budget=True)
    assert np.array_equal(cut.sum(1), np.maximum(budget, 1))  # span_budget: the budget exactly
    assert not (chosen & ~eligible).any()
    # runs of chosen positions share one replacement draw per span: far fewer distinct draws than tokens
    runs, distinct = 0, 0
    for r in range(ids.shape[0]):
        values = draw[r][chosen[r]]
        distinct += len(set(values.tolist()))
        runs += int(chosen[r].sum())
    assert distinct < 0.6 * runs  # Geometric(1/3) % 10 spans: ~2.6 subwords each, some overlapping or cut
    # subword spans, not whole words: spans end inside words as often as not
    batch = builder.build("MLM", ids, ws, step=4)
    chosen = batch.labels != IGNORE
    cut_words = sum(
        any(chosen[r, t] for t in w) and not all(chosen[r, t] for t in w if eligible[r, t])
        for r, words in enumerate(_units(ws, ids)) for w in words
    )
    assert cut_words > 0
    # 80/10/10 per span: a whole run of [MASK], never [MASK] next to a kept token inside one span's run
    masked = batch.input_ids[chosen] == MASK
    assert abs(masked.mean() - 0.8) < 0.05


def test_masks_are_a_pure_function_of_seed_and_step() -> None:
    ids, ws = _corpus(32)
    a = _builder("span").build("MLM", ids, ws, step=11)
    b = _builder("span").build("MLM", ids, ws, step=11)
    c = _builder("span").build("MLM", ids, ws, step=12)
    d = _builder("span", seed=8).build("MLM", ids, ws, step=11)
    assert np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.labels, b.labels)
    assert not np.array_equal(a.labels, c.labels) and not np.array_equal(a.labels, d.labels)
    part = a.rows(slice(8, 16))
    assert np.array_equal(part.labels, a.labels[8:16]) and part.shift == a.shift


def test_mix_draws_by_weight() -> None:
    weights = {"CLM": 1.0, "MLM": 15.0}
    draws = [draw_mix_objective(weights, seed=3, step=s) for s in range(4000)]
    assert draws == [draw_mix_objective(weights, seed=3, step=s) for s in range(4000)]
    assert abs(draws.count("CLM") / len(draws) - 1 / 16) < 0.015
    assert set(draws) == {"CLM", "MLM"}


class _CountingModel(torch.nn.Module):
    """Embedding + one mixing layer + head; counts how many positions the head sees."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(VOCAB, 16)
        self.mix = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, VOCAB)
        self.head_rows = 0

    def hidden_states(self, input_ids, attention_mask=None, attention_mode="causal"):
        x = self.emb(input_ids)
        if attention_mode == "causal":  # a causal running mean stands in for attention
            x = x.cumsum(1) / torch.arange(1, x.shape[1] + 1)[None, :, None]
        else:
            x = x + x.mean(1, keepdim=True)
        return torch.tanh(self.mix(x))

    def lm_features(self, hidden):
        self.head_rows += hidden.reshape(-1, hidden.shape[-1]).shape[0]
        return hidden

    def get_output_embeddings(self):
        return self.head

    def lm_logits(self, hidden):
        return self.head(self.lm_features(hidden))


@pytest.mark.parametrize("objective", ["CLM", "MLM", "MNTP"])
def test_loss_reads_the_right_position_and_runs_the_head_only_there(objective: str) -> None:
    ids, ws = _corpus(4, 32)
    batch = _builder().build(objective, ids, ws, step=0)
    model = _CountingModel()
    x, y = torch.from_numpy(batch.input_ids), torch.from_numpy(batch.labels)
    loss = sequence_loss_sum(model, x, y, batch.shift, batch.attention_mode)
    assert model.head_rows == batch.n_targets
    # reference: the head over every position, then the labelled ones picked by hand
    with torch.no_grad():
        logits = model.lm_logits(model.hidden_states(x, None, batch.attention_mode))
    total = 0.0
    for r in range(x.shape[0]):
        for t in range(x.shape[1]):
            source = t - batch.shift  # position whose output predicts token t
            if source >= 0 and batch.labels[r, t] != IGNORE:
                total += F.cross_entropy(logits[r, source][None], y[r, t][None], reduction="sum").item()
    assert loss.item() == pytest.approx(total, rel=1e-5)
    if objective == "CLM":
        assert batch.n_targets == 4 * 31
