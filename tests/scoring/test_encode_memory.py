"""Scoring's encode calls: chunked (a task's tokenizers Encodings never all alive at once) and without the
tokenizers' thread pool, which made PLL evaluation memory grow (benchmarks/eval_memory.py measures the peak)."""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
from tiny_models import build_tiny_tokenizer

# the module (the package re-exports its function `encode` under the same name)
encode_module = importlib.import_module("antlm_bench.scoring.encode")


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer("wordpiece")


@pytest.mark.parametrize(("kind", "method"), [("bpe", "clm"), ("wordpiece", "pll"), ("wordpiece", "pll-word-l2r")])
def test_chunked_encoding_equals_one_call(monkeypatch, kind, method):
    tokenizer = build_tiny_tokenizer(kind)
    items = [(None if i % 3 else "the context is here", f"sentence number {i} of the test {'x' * (i % 7)}")
             for i in range(50)]
    whole = encode_module.encode(tokenizer, items, method)
    monkeypatch.setattr(encode_module, "ENCODE_CHUNK", 7)
    chunked = encode_module.encode(tokenizer, items, method)
    assert len(whole) == len(chunked) == 50
    for a, b in zip(whole, chunked):
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.scored, b.scored)
        assert (a.word_ids is None) == (b.word_ids is None)


@pytest.mark.parametrize("before", [None, "true"])
def test_encoding_runs_without_the_tokenizers_pool_and_restores_the_variable(tokenizer, monkeypatch, before):
    if before is None:
        monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    else:
        monkeypatch.setenv("TOKENIZERS_PARALLELISM", before)
    seen = []
    backend = tokenizer.backend_tokenizer
    original = type(backend).encode_batch

    class Spy:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def encode_batch(self, *args, **kwargs):
            seen.append(os.environ.get("TOKENIZERS_PARALLELISM"))
            return original(self.inner, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "backend_tokenizer", property(lambda self: Spy(backend)), raising=False)
    encode_module.encode(tokenizer, [(None, "a short sentence"), (None, "another one")], "pll")
    assert seen and set(seen) == {"false"}
    assert os.environ.get("TOKENIZERS_PARALLELISM") == before
