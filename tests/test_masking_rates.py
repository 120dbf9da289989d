"""Every masking strategy selects its configured rate (within 0.3 points) on a real corpus batch: the packed
BabyLM pretraining sample, as the tiny preset trains on it (real words, real BPE splits, real specials)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from antlm_bench.recipes import Masking, load_recipe
from antlm_bench.training.objectives import IGNORE, BatchBuilder


@pytest.fixture(scope="module")
def real_batch(real_data_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    from antlm_bench.data.corpus import prepare_training_data

    recipe = load_recipe("antlm-ltgbert")
    tokenizer, corpus = prepare_training_data(real_data_dir / "pretrain_sample", recipe, "tiny",
                                              tmp_path_factory.mktemp("cache"), progress=False)
    assert corpus.word_starts is not None
    # one real global batch is 32 rows; the rate is checked over many of them (1024 rows, ~62k tokens) so that
    # the binomial noise (~0.15 points) stays well inside the 0.3-point tolerance
    rows = np.random.default_rng(0).permutation(corpus.input_ids.shape[0])[:1024]
    return tokenizer, corpus.input_ids[rows], corpus.word_starts[rows]


@pytest.mark.parametrize("strategy", ["token", "whole_word", "whole_word_span", "span"])
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
