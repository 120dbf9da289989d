"""clm rows that continue shared bases' keys and values (scoring/shared_bases.py, BabyLlama's prefix_hidden_states)
and whole-string tokens computed from shared pieces (scoring/offsets.py): the same numbers and tokens as the
plain paths and the batch-1 reference."""

from __future__ import annotations

import copy
import functools
import json
import lzma

import numpy as np
import pytest
import torch
from babylm2025_reference import span_score
from tiny_models import build_tiny_bert, build_tiny_llama, build_tiny_tokenizer
from tokenizers import Tokenizer, processors
from transformers import PreTrainedTokenizerFast

from antlm_bench.models import build_model
from antlm_bench.recipes import load_recipe
from antlm_bench.scoring import offsets, wrap_model
from antlm_bench.scoring.babylm2025 import merge_prefix_groups, span_seqs
from antlm_bench.scoring.encode import Seq, dedupe
from antlm_bench.scoring.engine import score_seqs
from antlm_bench.scoring.model import ScoringModel
from antlm_bench.scoring.shared_bases import shared_bases

ITEM_TOL = 1e-6


@functools.cache
def babyllama(dtype: torch.dtype = torch.float64):
    """The tiny BabyLlama preset, weights spread 10x (so that what a token sees moves its score), in float64."""
    tok = build_tiny_tokenizer("bpe")
    torch.manual_seed(0)
    model = build_model(load_recipe("antlm-babyllama").resolve("tiny"), tok).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" not in name:
                parameter.mul_(10)
    return model.to(dtype), tok


def _plain(sm: ScoringModel, monkeypatch, seqs, batch_tokens=2048, groups=None, tree=False) -> np.ndarray:
    """Scores without continuation rows: prefix-tree rows (``tree``) or one sequence per row."""
    with monkeypatch.context() as patch:
        patch.setattr(type(sm), "keeps_prefixes", property(lambda self: False))
        if not tree:
            patch.setattr(type(sm), "shares_prefixes", property(lambda self: False))
        return score_seqs(sm, seqs, "clm", batch_tokens, groups=groups)


def _fives(n: int) -> list:
    return [np.arange(k, min(k + 5, n)) for k in range(0, n, 5)]


def test_which_models_continue_prefixes() -> None:
    assert wrap_model(*babyllama()).keeps_prefixes
    assert not wrap_model(build_tiny_llama(), build_tiny_tokenizer("bpe")).keeps_prefixes  # HF: prefix trees
    assert not wrap_model(build_tiny_bert(), build_tiny_tokenizer("bert")).keeps_prefixes
    tok = build_tiny_tokenizer("bpe")
    torch.manual_seed(0)
    ltgbert = wrap_model(build_model(load_recipe("antlm-ltgbert").resolve("tiny"), tok).eval(), tok)
    assert not ltgbert.keeps_prefixes


def _entity_records(data_dir, per_file: int) -> list[dict]:
    out = []
    for name in ("regular", "ambiref", "move_contents"):
        with lzma.open(data_dir / "entity_tracking" / f"{name}.jsonl.xz", "rt") as handle:
            records = [json.loads(line) for line in handle]
        out += records[: per_file // 2] + records[len(records) // 2: len(records) // 2 + per_file // 2]
    return out


@pytest.mark.parametrize("batch_tokens", [300, 4096])
def test_entity_tracking_continuations_match_batch1(real_data_dir, monkeypatch, batch_tokens) -> None:
    """Per option within 1e-6 of the batch-1 reference (float64 BabyLlama), with an item's options as groups and
    with a scenario's items merged; a small budget splits bases over batches."""
    model, tok = babyllama()
    records = _entity_records(real_data_dir, 16)
    sentences = [r["input_prefix"] + o for r in records for o in r["options"]]
    completions = [o for r in records for o in r["options"]]
    unique, index = dedupe(span_seqs(tok, sentences, completions, "clm"))
    sm = wrap_model(model, tok)
    expected = np.asarray([span_score(model, tok, s, c, "clm") for s, c in zip(sentences, completions)])
    fives = _fives(len(unique))
    for groups in (fives, merge_prefix_groups(unique, fives)):
        got = score_seqs(sm, unique, "clm", batch_tokens, groups=groups)[index]
        assert np.max(np.abs(got - expected)) < ITEM_TOL
    tree = _plain(sm, monkeypatch, unique, batch_tokens, groups=fives, tree=True)[index]
    assert np.max(np.abs(tree - expected)) < ITEM_TOL


def _random_groups(seed: int):
    """Groups over sequences that share bases of several lengths, tails of 0 to 9 tokens (a member whose input
    is the group's prefix has no tail), scored positions anywhere from 1 on."""
    rng = np.random.default_rng(seed)
    seqs, groups = [], []
    bases = [rng.integers(5, 60, size=rng.integers(1, 40)) for _ in range(6)]
    for _ in range(30):
        base = bases[rng.integers(len(bases))]
        prefix = np.concatenate([[1], base, rng.integers(5, 60, size=rng.integers(0, 12))])
        members = []
        for _ in range(rng.integers(1, 7)):
            tail = rng.integers(5, 60, size=rng.integers(1, 10))
            ids = np.concatenate([prefix, tail]).astype(np.int64)
            first = rng.integers(1, len(ids))
            members.append(len(seqs))
            seqs.append(Seq(ids, np.arange(first, len(ids), dtype=np.int64)))
        groups.append(np.asarray(members))
    return seqs, groups


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("batch_tokens", [64, 1024])
def test_random_groups_match_one_sequence_per_row(monkeypatch, seed, batch_tokens) -> None:
    model, tok = babyllama()
    sm = wrap_model(model, tok)
    seqs, groups = _random_groups(seed)
    unique, index = dedupe(seqs)
    groups = [np.unique(index[g]) for g in groups]
    got = score_seqs(sm, unique, "clm", batch_tokens, groups=groups)
    plain = _plain(sm, monkeypatch, unique, batch_tokens)
    np.testing.assert_allclose(got, plain, atol=ITEM_TOL, rtol=0)


def test_float32_continuations_agree_with_prefix_trees(real_data_dir, monkeypatch) -> None:
    model, tok = babyllama(torch.float32)
    records = _entity_records(real_data_dir, 6)
    sentences = [r["input_prefix"] + o for r in records for o in r["options"]]
    unique, _ = dedupe(span_seqs(tok, sentences, [o for r in records for o in r["options"]], "clm"))
    sm = wrap_model(model, tok)
    groups = merge_prefix_groups(unique, _fives(len(unique)))
    got = score_seqs(sm, unique, "clm", 4096, groups=groups)
    tree = _plain(sm, monkeypatch, unique, 4096, groups=groups, tree=True)
    np.testing.assert_allclose(got, tree, atol=1e-3, rtol=1e-6)  # float32 sums of ~100 nats


def test_shared_bases_are_common_beginnings() -> None:
    rng = np.random.default_rng(3)
    stems = [rng.integers(0, 9, size=40) for _ in range(3)]
    prefixes = [np.concatenate([stems[k % 3][: 20 + k % 17], rng.integers(0, 9, size=k % 5)]) for k in range(40)]
    prefixes.append(np.asarray([7]))  # short and alone
    cuts, runs = shared_bases(prefixes)
    assert cuts[-1] == 1 and (runs == runs[-1]).sum() == 1
    for run in np.unique(runs):
        members = np.flatnonzero(runs == run)
        cut = cuts[members[0]]
        assert (cuts[members] == cut).all() and cut >= 1
        assert all(len(prefixes[m]) >= cut and np.array_equal(prefixes[m][:cut], prefixes[members[0]][:cut])
                   for m in members)
    base_tokens = sum(int(cuts[np.flatnonzero(runs == r)[0]]) for r in np.unique(runs))
    rest = sum(len(p) - int(c) for p, c in zip(prefixes, cuts))
    assert base_tokens + rest < 0.5 * sum(len(p) for p in prefixes)  # the stems run once each, nearly


# ----------------------------------------------------------------------------------------------- piecewise tokens


def _whole(tok, texts):
    encoded = tok(list(texts), return_offsets_mapping=True)
    return [(np.asarray(ids), np.asarray(off).reshape(-1, 2))
            for ids, off in zip(encoded["input_ids"], encoded["offset_mapping"])]


def _assert_same(tok, texts) -> None:
    got = offsets.encode_with_offsets(tok, texts)
    for text, (ids, offs), (want_ids, want_offs) in zip(texts, got, _whole(tok, texts)):
        assert np.array_equal(ids, want_ids) and np.array_equal(offs, want_offs), text


def _gpt2_style(tok) -> PreTrainedTokenizerFast:
    """The tiny BPE with GPT-2's post-processor (ByteLevel, trimmed offsets: a token's span leaves out its
    space), no BOS."""
    backend = Tokenizer.from_str(tok.backend_tokenizer.to_str())
    backend.post_processor = processors.ByteLevel(trim_offsets=True)
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", pad_token="<pad>")


ADVERSARIAL = [
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 contains ",
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 contains the hat.",
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 contains  the hat.",  # two spaces at a cut
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 contains\tthe hat.",
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 contains\n the hat.",
    "Box 0 contains the hat, Box 1 contains the pot.  \n  Box 2 contains 12 345 hats.",
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 's hat isn't there 've 'll 'd",
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 '  s",
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 contains the café, the naïve 東京 🎩 hat.",
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 contains <s> the <mask> hat </s>.",
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 contains<mask> the hat",
    "Box 0 contains the hat, Box 1 contains the pot. Box 1 contains ... !! ?? the hat",
    "Box 0 contains the hat, Box 1 contains the pot.",
    "Box 0 contains the hat, Box 1 contains the pot. ",
    "Box 0 contains the hat, Box 1 contains the pot. Box",
    " Box 0 contains the hat, Box 1 contains the pot. Box 1 contains the hat.",
    "",
    " ",
    "   leading spaces and a shared start: Box 0 contains the hat, Box 1 contains the pot.",
    "   leading spaces and a shared start: Box 0 contains the hat, Box 1 contains the jar.",
    "x" * 300 + " y",
    "x" * 300 + " z",
]


@pytest.mark.parametrize("kind", ["bpe", "gpt2", "bert"])
def test_piecewise_tokens_equal_whole_on_adversarial_texts(kind) -> None:
    base = build_tiny_tokenizer("bert" if kind == "bert" else "bpe")
    tok = _gpt2_style(base) if kind == "gpt2" else base
    assert offsets.piecewise_safe(tok) == (kind != "bert")  # BERT's normalizer: tokenized whole
    _assert_same(tok, ADVERSARIAL)
    _assert_same(tok, ADVERSARIAL[::-1] * 2)


def test_piecewise_tokens_equal_whole_on_entity_tracking(real_data_dir) -> None:
    tok = build_tiny_tokenizer("bpe")
    records = _entity_records(real_data_dir, 400)
    texts = [r["input_prefix"] + o for r in records for o in r["options"]]
    split = offsets.split_shared(texts)
    assert all("".join(pieces) == text for pieces, text in zip(split, texts))
    distinct = {piece for pieces in split for piece in pieces}
    assert sum(map(len, distinct)) < 0.3 * sum(map(len, texts))  # the shared beginnings are tokenized once
    _assert_same(tok, texts)
    _assert_same(_gpt2_style(tok), texts[:500])


def test_a_wrong_split_falls_back_to_whole_tokenization(real_data_dir, monkeypatch) -> None:
    """Cut inside words (not at a space): the sample check sees the difference and every text is tokenized whole."""
    tok = build_tiny_tokenizer("bpe")
    records = _entity_records(real_data_dir, 20)
    texts = [r["input_prefix"] + o for r in records for o in r["options"]]
    monkeypatch.setattr(offsets, "split_shared", lambda ts: [[t[:len(t) // 2 + 1], t[len(t) // 2 + 1:]] for t in ts])
    _assert_same(tok, texts)


def test_span_seqs_equal_whole_tokenization(real_data_dir) -> None:
    tok = build_tiny_tokenizer("bpe")
    records = _entity_records(real_data_dir, 20)
    sentences = [r["input_prefix"] + o for r in records for o in r["options"]]
    completions = [o for r in records for o in r["options"]]
    seqs = span_seqs(tok, sentences, completions, "clm")
    for seq, sentence, completion in zip(seqs, sentences, completions):
        encoded = tok(sentence, return_offsets_mapping=True)
        start = len(sentence) - len(completion)
        assert seq.ids.tolist() == encoded["input_ids"]
        assert seq.scored.tolist() == [i for i, (_, end) in enumerate(encoded["offset_mapping"]) if end > start and i]


@pytest.mark.parametrize("kernel", ["eager", "sdpa"])
def test_babyllama_attention_and_norm_in_double_stay_double(kernel) -> None:
    """Run in ``.double()``, the attention kernel and RMSNorm compute in double: a softmax or a norm rounded
    through float32 is off by ~1e-7 (float32's epsilon), which made the past-key-values check below fail on some
    CPUs; against a float64 reference written out here the error must be float64-sized."""
    from antlm_bench.models.babyllama import ATTENTION_FUNCTIONS, RMSNorm

    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 9, 8, generator=generator, dtype=torch.float64) * 3 for _ in range(3))
    mask = torch.ones(9, 9, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-1, -2)) * 0.35
    weights = scores.masked_fill(~mask, float("-inf")).exp()
    reference = (weights / weights.sum(-1, keepdim=True)) @ v
    out = ATTENTION_FUNCTIONS[kernel](q, k, v, None, True, 0.0, 0.35)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, reference, atol=1e-12, rtol=0)
    norm = RMSNorm(8, 1e-6).double()
    x = torch.randn(3, 8, generator=generator, dtype=torch.float64) * 5
    expected = x / (x.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt()
    torch.testing.assert_close(norm(x), expected, atol=1e-13, rtol=0)


@pytest.mark.parametrize("kv_heads,kernel", [(None, "sdpa"), (None, "eager"), (1, "sdpa"), (1, "eager")])
def test_babyllama_past_key_values_equal_the_whole_forward(kv_heads, kernel) -> None:
    """Keys and values kept from a first part, continued by the rest: the whole forward's hidden states, with
    grouped-query attention and with the eager kernel too; and the prefix check passes for each."""
    model, tok = babyllama()
    config = copy.deepcopy(model.config)
    config.antlm_attention = kernel
    if kv_heads:
        config.num_key_value_heads = kv_heads
    torch.manual_seed(1)
    copy_ = type(model)(config).eval().double()
    with torch.no_grad():
        for name, parameter in copy_.named_parameters():
            if "norm" not in name:
                parameter.mul_(10)
    ids = torch.randint(5, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    whole = copy_.hidden_states(ids)
    kept: list = []
    first = copy_.model(ids[:, :7], keep_key_values=kept)
    mask = torch.ones(2, 1, 5, 12, dtype=torch.bool).tril(7)
    rest = copy_.model(ids[:, 7:], mask, "causal", torch.arange(7, 12).expand(2, 5), past_key_values=kept)
    torch.testing.assert_close(torch.cat([first, rest], 1), whole, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="past_key_values"):
        copy_.model(ids[:, 7:], past_key_values=kept)
    assert wrap_model(copy_, tok).keeps_prefixes
