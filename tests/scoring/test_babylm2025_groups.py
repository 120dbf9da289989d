"""Entity tracking's rows shared across the items of one scenario (merge_prefix_groups): the same numbers as the
batch-1 reference, and fewer rows than items."""

from __future__ import annotations

import collections
import copy
import json
import lzma
import re

import numpy as np
from babylm2025_reference import span_score
from tiny_models import build_tiny_llama, build_tiny_tokenizer

from antlm_bench.scoring import wrap_model
from antlm_bench.scoring.babylm2025 import merge_prefix_groups, span_seqs
from antlm_bench.scoring.encode import Seq, dedupe
from antlm_bench.scoring.engine import score_seqs


def test_merge_groups_by_their_shared_beginning() -> None:
    seqs = [Seq(np.asarray(ids, dtype=np.int64), np.asarray([len(ids) - 1])) for ids in (
        [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 7],  # group 0: prefix 1..5
        [9, 9, 9, 9, 9, 1], [9, 9, 9, 9, 9, 2],  # group 1: another beginning
        [1, 2, 3, 4, 8, 6], [1, 2, 3, 4, 8, 7],  # group 2: differs from group 0 in its last prefix token
    )]
    groups = [np.arange(0, 2), np.arange(2, 4), np.arange(4, 6)]
    merged = merge_prefix_groups(seqs, groups, slack=1)
    assert sorted(g.tolist() for g in merged) == [[0, 1, 4, 5], [2, 3]]
    assert sorted(g.tolist() for g in merge_prefix_groups(seqs, groups, slack=0)) == [[0, 1], [2, 3], [4, 5]]
    assert len(merge_prefix_groups(seqs, groups, slack=1, most=1)) == 3


def test_scenario_rows_match_batch1(real_data_dir) -> None:
    with lzma.open(real_data_dir / "entity_tracking" / "regular.jsonl.xz", "rt") as handle:
        records = [json.loads(line) for line in handle]
    by_scenario = collections.defaultdict(list)
    for record in records:
        by_scenario[re.sub(r"Box \d+ contains $", "", record["input_prefix"])].append(record)
    chosen = [r for group in list(v for v in by_scenario.values() if len(v) >= 2)[:4] for r in group]
    sentences = [r["input_prefix"] + o for r in chosen for o in r["options"]]
    completions = [o for r in chosen for o in r["options"]]
    model, tok = copy.deepcopy(build_tiny_llama()).double(), build_tiny_tokenizer("bpe")
    unique, index = dedupe(span_seqs(tok, sentences, completions, "clm"))
    fives = [np.arange(k, min(k + 5, len(unique))) for k in range(0, len(unique), 5)]
    merged = merge_prefix_groups(unique, fives)
    assert len(merged) < len(fives)  # the items of one scenario share a row
    got = score_seqs(wrap_model(model, tok), unique, "clm", 2048, groups=merged)[index]
    expected = np.asarray([span_score(model, tok, s, c, "clm") for s, c in zip(sentences, completions)])
    assert np.max(np.abs(got - expected)) < 1e-6
