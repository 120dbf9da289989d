"""Masking on real rows: the packed BabyLM pretraining sample, as the tiny preset trains on it (real words, real BPE
splits, real specials). Every strategy but ``span`` selects its configured rate (within 0.3 points); ``span``
selects what LTG-BERT's own rule selects on the same rows (rate and run lengths within 0.5 points of an independent
re-implementation of ``SpanMaskingStrategy`` in ltgoslo/ltg-bert's ``babylm/train/dataset.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from antlm_bench.recipes import Masking, load_recipe
from antlm_bench.training.objectives import IGNORE, BatchBuilder


@pytest.fixture(scope="module")
def real_batch(real_data_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    from antlm_bench.data.corpus import prepare_training_data

    recipe = load_recipe("antlm-ltgbert")
    tokenizer, corpus = prepare_training_data(real_data_dir / "pretrain_sample", recipe.resolve("tiny"),
                                              tmp_path_factory.mktemp("cache"), progress=False)
    assert corpus.word_starts is not None
    # one real global batch is 32 rows; the rate is checked over many of them (1024 rows, ~62k tokens) so that
    # the binomial noise (~0.15 points) stays well inside the 0.3-point tolerance
    rows = np.random.default_rng(0).permutation(corpus.input_ids.shape[0])[:1024]
    return tokenizer, corpus.input_ids[rows], corpus.word_starts[rows]


@pytest.mark.parametrize("strategy", ["token", "whole_word", "whole_word_span", "span_budget"])
@pytest.mark.parametrize("rate", [0.15, 0.3])
def test_selection_rate_is_the_configured_rate(real_batch, strategy: str, rate: float) -> None:
    tokenizer, ids, word_starts = real_batch
    builder = BatchBuilder(Masking(strategy=strategy, rate=rate), tokenizer.mask_token_id, len(tokenizer),
                           tokenizer.all_special_ids, seed=11)
    chosen, eligible = 0, 0
    for step, start in enumerate(range(0, len(ids), 32)):  # batch by batch, as training builds them
        batch = builder.build("MLM", ids[start:start + 32], word_starts[start:start + 32], step)
        chosen += int((batch.labels != IGNORE).sum())
        eligible += int((~np.isin(ids[start:start + 32], tokenizer.all_special_ids)).sum())
    assert abs(100 * chosen / eligible - 100 * rate) < 0.3, (strategy, chosen / eligible)


def ltgbert_span_reference(ids: np.ndarray, special: np.ndarray, rate: float, generator: torch.Generator
                           ) -> np.ndarray:
    """LTG-BERT's span selection, one row at a time as their ``SpanMaskingStrategy.__call__`` runs it (torch's own
    binomial, geometric and randint draws): which positions a row masks. Written here from the rule, apart from the
    code under test."""
    length = ids.shape[1]
    chosen = np.zeros(ids.shape, dtype=bool)
    for r in range(ids.shape[0]):
        n_eligible = int((~special[r]).sum())
        n_masked = int(torch.binomial(torch.tensor([float(n_eligible)]), torch.tensor([rate]), generator=generator))
        n_masked = min(n_eligible, max(1, n_masked))
        mask, counter = np.zeros(length, dtype=bool), 100
        while n_masked > mask.sum() and counter > 0:
            span_length = int(torch.empty(1).geometric_(1 / 3, generator=generator).item()) % 10
            offset = int(torch.randint(-(span_length - 1), length + span_length, [], generator=generator))
            sub_mask = np.zeros(length, dtype=bool)
            sub_mask[max(0, offset):min(length - 1, offset + span_length)] = True
            sub_mask[special[r]] = False
            mask |= sub_mask
            counter -= 1
        chosen[r] = mask
    return chosen


def masked_runs(chosen: np.ndarray) -> np.ndarray:
    """Lengths of the runs of consecutive chosen positions, row by row."""
    padded = np.pad(chosen.astype(np.int8), ((0, 0), (1, 1)))
    edges = np.diff(padded, axis=1)
    starts, ends = np.nonzero(edges == 1), np.nonzero(edges == -1)
    return ends[1] - starts[1]  # row-major order pairs each run's start with its end


def _span_profile(chosen: np.ndarray, eligible: np.ndarray) -> dict[str, float]:
    """Selection rate and the run-length distribution (share of runs of 1..9 and of 10+ subwords), in points."""
    runs = masked_runs(chosen)
    profile = {"rate": 100 * chosen.sum() / eligible.sum(), "mean_run": float(runs.mean())}
    for n in range(1, 10):
        profile[f"runs={n}"] = 100 * float((runs == n).mean())
    profile["runs>=10"] = 100 * float((runs >= 10).mean())
    profile["runs>=5"] = 100 * float((runs >= 5).mean())
    return profile


def test_span_is_ltgbert_rule_on_real_rows(real_batch) -> None:
    """Rate and run lengths of ``span`` against the source rule on the same rows: 8 passes over the 1,024 real
    rows (~530k tokens, ~33k runs) on each side, so that sampling noise (~0.2 points on a run-length share) stays
    well inside the 0.5-point tolerance. ``span_budget`` (the last span cut to the budget) is the control: it must
    miss, or the comparison could not tell the two apart."""
    tokenizer, ids, _ = real_batch
    special = np.isin(ids, tokenizer.all_special_ids)
    passes = 8
    generator = torch.Generator().manual_seed(0)
    reference = np.concatenate([ltgbert_span_reference(ids, special, 0.15, generator) for _ in range(passes)])
    eligible = np.concatenate([~special] * passes)
    source = _span_profile(reference, eligible)
    profiles = {}
    for strategy in ("span", "span_budget"):
        builder = BatchBuilder(Masking(strategy=strategy, rate=0.15), tokenizer.mask_token_id, len(tokenizer),
                               tokenizer.all_special_ids, seed=11)
        batches = [ids[start:start + 32] for _ in range(passes) for start in range(0, len(ids), 32)]
        chosen = np.concatenate([builder.build("MLM", batch, None, step).labels != IGNORE
                                 for step, batch in enumerate(batches)])  # each step its own masks
        profiles[strategy] = _span_profile(chosen, eligible)
    print("\nspan masking on real rows (points; mean run in subwords):")
    for key in source:
        print(f"  {key:>9}: LTG-BERT {source[key]:6.2f}  span {profiles['span'][key]:6.2f}  "
              f"span_budget {profiles['span_budget'][key]:6.2f}")
    off = {key: round(profiles["span"][key] - source[key], 2) for key in source if key != "mean_run"}
    assert all(abs(gap) < 0.5 for gap in off.values()), off
    assert abs(profiles["span"]["mean_run"] - source["mean_run"]) < 0.05
    assert 16.5 < source["rate"] < 18  # the overshoot: above the configured 15%
    assert source["rate"] - profiles["span_budget"]["rate"] > 1.5  # the control misses
    assert source["runs>=5"] - profiles["span_budget"]["runs>=5"] > 3
