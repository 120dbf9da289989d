"""Scoring engines: parity with lm-eval 0.4.13 (clm) and minicons 0.3.39 (pll, pll-word-l2r), batching, modes.

Tiny seeded models and tokenizers of our own (tests/tiny_models.py); real pairs from the shared data.
"""

from __future__ import annotations

import json
import lzma

import numpy as np
import pytest
import torch
from tiny_models import build_tiny_bert, build_tiny_llama, build_tiny_tokenizer

from antlm_bench.data import list_zip_members, read_zip_jsonl
from antlm_bench.errors import UserError
from antlm_bench.scoring import engine, score_pairs, score_texts, wrap_model
from antlm_bench.scoring.model import resolve_device_dtype

TOL = 1e-4




@pytest.fixture(scope="module")
def real_pairs(real_data_dir) -> list[dict]:
    """Two pairs from every BLiMP paradigm and supplement file (144 pairs; newlines and odd punctuation included)."""
    pairs = []
    for folder in ("blimp_filtered", "supplement_filtered"):
        for path in sorted((real_data_dir / folder).glob("*.jsonl.xz")):
            with lzma.open(path, "rt", encoding="utf-8") as handle:
                for _, line in zip(range(2), handle):
                    pairs.append(json.loads(line))
    return pairs


@pytest.fixture(scope="module")
def sentences(real_pairs) -> list[str]:
    return [p["sentence_good"] for p in real_pairs] + [p["sentence_bad"] for p in real_pairs]


@pytest.fixture(scope="module")
def ewok_items(real_data_dir) -> list[dict]:
    """Eight lines of every EWoK domain, read in memory from the zip (never written anywhere)."""
    zip_path = real_data_dir / "ewok_filtered.zip"
    items = []
    for member in list_zip_members(zip_path, "ewok_filtered"):
        items.extend(read_zip_jsonl(zip_path, member, "ewok")[:8])
    return items


@pytest.fixture(scope="module")
def llama():
    return wrap_model(build_tiny_llama(), build_tiny_tokenizer("bpe"))


@pytest.fixture(scope="module")
def bert():
    return wrap_model(build_tiny_bert(), build_tiny_tokenizer("bert"))


@pytest.fixture(scope="module")
def minicons_scorer():
    from minicons import scorer

    model, tokenizer = build_tiny_bert(), build_tiny_tokenizer("bert")
    # minicons calls batch_encode_plus, which transformers 5 removed: a test-only shim on this instance
    tokenizer.batch_encode_plus = lambda *args, **kwargs: tokenizer(*args, **kwargs)
    try:
        yield scorer.MaskedLMScorer(model, "cpu", tokenizer=tokenizer)
    finally:
        del tokenizer.batch_encode_plus


# -- parity with lm-eval --------------------------------------------------------------------------------------------

def _lm_eval_task(folder, pairs, delimiter: str) -> None:
    (folder / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    (folder / "task.yaml").write_text(
        "task: antlm_parity_pairs\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {folder / 'pairs.jsonl'}\n  cache_dir: {folder / 'hf_cache'}\n"
        "test_split: test\noutput_type: multiple_choice\n"
        'doc_to_text: ""\n'
        'doc_to_choice: "{{[sentence_good, sentence_bad]}}"\n'
        "doc_to_target: 0\n"
        f"target_delimiter: {json.dumps(delimiter)}\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
    )


@pytest.mark.parametrize("leading_space", [False, True])
def test_clm_equals_lm_eval_on_a_local_json_task(tmp_path, real_pairs, llama, leading_space):
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    _lm_eval_task(tmp_path, real_pairs, " " if leading_space else "")
    lm = HFLM(pretrained=llama.module, tokenizer=llama.tokenizer, batch_size=32)
    results = lm_eval.simple_evaluate(
        model=lm, tasks=["antlm_parity_pairs"], log_samples=True, verbosity="ERROR",
        task_manager=TaskManager(include_path=str(tmp_path), include_defaults=False),
    )
    samples = sorted(results["samples"]["antlm_parity_pairs"], key=lambda s: s["doc_id"])
    ref_good = np.array([s["resps"][0][0][0] for s in samples])
    ref_bad = np.array([s["resps"][1][0][0] for s in samples])
    good, bad = score_pairs(llama, [p["sentence_good"] for p in real_pairs], [p["sentence_bad"] for p in real_pairs],
                            "clm", leading_space=leading_space, batch_tokens=512)
    assert len(samples) == len(real_pairs)
    np.testing.assert_allclose(good, ref_good, atol=TOL, rtol=0)
    np.testing.assert_allclose(bad, ref_bad, atol=TOL, rtol=0)


def test_leading_space_changes_the_bpe_tokens(llama, sentences):
    """Guard against the option being ignored: with byte-level BPE, ' Who' and 'Who' are different tokens."""
    plain = score_texts(llama, sentences[:20], "clm")
    spaced = score_texts(llama, sentences[:20], "clm", leading_space=True)
    assert np.abs(plain - spaced).max() > 1e-3


def test_ewok_clm_equals_lm_eval_continuations(ewok_items, llama):
    """EWoK: target as a continuation of the context, joined by one space, split as lm-eval splits it."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=llama.module, tokenizer=llama.tokenizer, batch_size=32)
    contexts = [item["Context1"] for item in ewok_items]
    for key in ("Target1", "Target2"):
        targets = [item[key] for item in ewok_items]
        requests = [Instance(request_type="loglikelihood", doc={}, arguments=(c, " " + t), idx=0)
                    for c, t in zip(contexts, targets)]
        reference = np.array([r[0] for r in lm.loglikelihood(requests, disable_tqdm=True)])
        ours = score_texts(llama, targets, "clm", contexts=contexts, batch_tokens=300)
        np.testing.assert_allclose(ours, reference, atol=TOL, rtol=0)


# -- parity with minicons ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "metric"), [("pll", "original"), ("pll-word-l2r", "within_word_l2r")])
def test_pll_equals_minicons(sentences, bert, minicons_scorer, method, metric):
    reference = []
    for start in range(0, len(sentences), 32):
        reference += minicons_scorer.sequence_score(sentences[start:start + 32], reduction=lambda x: x.sum().item(),
                                                    PLL_metric=metric)
    ours = score_texts(bert, sentences, method, batch_tokens=700)
    np.testing.assert_allclose(ours, np.array(reference), atol=TOL, rtol=0)


def test_word_l2r_differs_from_pll_where_words_have_several_pieces(bert, sentences):
    """Guard: the fixture tokenizer splits words into pieces, so the within-word masking is really exercised."""
    texts = sentences[:20]
    assert np.abs(score_texts(bert, texts, "pll") - score_texts(bert, texts, "pll-word-l2r")).max() > 1e-3


def test_ewok_pll_equals_minicons_conditional_score(ewok_items, bert, minicons_scorer):
    contexts = [item["Context1"] for item in ewok_items]
    targets = [item["Target2"] for item in ewok_items]
    reference = minicons_scorer.conditional_score(contexts, targets, reduction=lambda x: x.sum().item())
    ours = score_texts(bert, targets, "pll", contexts=contexts)
    np.testing.assert_allclose(ours, np.array(reference), atol=TOL, rtol=0)


def _naive_masked(sm, text: str, read_offset: int) -> float:
    """One full forward per masked copy; the logits of token i read at position i - read_offset."""
    tok = sm.tokenizer
    encoded = tok(text, return_special_tokens_mask=True)
    ids = torch.tensor(encoded["input_ids"])
    if read_offset and encoded["special_tokens_mask"][0] == 0:
        ids = torch.cat([torch.tensor([tok.cls_token_id]), ids])
    special = set(tok.all_special_ids)
    total = 0.0
    for i in range(len(ids)):
        if int(ids[i]) in special:
            continue
        masked = ids.clone()
        masked[i] = tok.mask_token_id
        with torch.no_grad():
            logits = sm.module(input_ids=masked[None]).logits[0, i - read_offset].float()
        total += float(torch.log_softmax(logits, -1)[ids[i]])
    return total


def test_mntp_reads_the_prediction_one_position_earlier(bert, sentences):
    texts = sentences[:6]
    ours = score_texts(bert, texts, "mntp", batch_tokens=64)
    np.testing.assert_allclose(ours, [_naive_masked(bert, t, 1) for t in texts], atol=TOL, rtol=0)
    # and pll, by the same naive reference, reads at the masked position itself
    np.testing.assert_allclose(score_texts(bert, texts, "pll"), [_naive_masked(bert, t, 0) for t in texts],
                               atol=TOL, rtol=0)


# -- batching ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["clm", "pll", "pll-word-l2r", "mntp"])
def test_scores_do_not_depend_on_the_token_budget(llama, bert, sentences, method):
    sm = llama if method == "clm" else bert
    texts = sentences[::12]
    small = score_texts(sm, texts, method, batch_tokens=7)  # smaller than most sentences: one row per batch
    large = score_texts(sm, texts, method, batch_tokens=100_000)
    np.testing.assert_allclose(small, large, atol=TOL, rtol=0)


def _record_forwards(sm, monkeypatch) -> list[list[int]]:
    """[rows, padded length, rows given to the head, real tokens] of every forward pass (plain or prefix tree)."""
    seen: list[list[int]] = []
    # the model's one-time self-checks run first, unspied: a spy in them would record their passes (or, with the
    # wrong signature, fail them, and the engine would silently fall back to plain rows)
    _ = sm.shares_prefixes, sm.keeps_prefixes
    hidden, tree_hidden, head = sm.hidden, sm.tree_hidden, sm.head
    pad = sm.tokenizer.pad_token_id

    def spy_hidden(ids, mask, mode):
        seen.append([ids.shape[0], ids.shape[1], 0, int(ids.numel() if mask is None else mask.sum())])
        return hidden(ids, mask, mode)

    def spy_tree_hidden(ids, positions, mask, mask_format=None):
        seen.append([ids.shape[0], ids.shape[1], 0, int(((ids != pad) | (positions > 0)).sum())])
        return tree_hidden(ids, positions, mask, mask_format)

    def spy_head(selected):
        seen[-1][2] += selected.shape[0]
        return head(selected)

    monkeypatch.setattr(sm, "hidden", spy_hidden)
    monkeypatch.setattr(sm, "tree_hidden", spy_tree_hidden)
    monkeypatch.setattr(sm, "head", spy_head)
    return seen


@pytest.fixture
def one_sequence_per_row(llama, monkeypatch):
    """The llama fixture scored without prefix trees: one (padded) row per sequence."""
    assert llama.shares_prefixes
    monkeypatch.setattr(type(llama), "shares_prefixes", property(lambda self: False))
    yield llama


def test_pll_batches_respect_the_budget_and_head_sees_one_row_per_copy(bert, monkeypatch):
    long_text = " ".join(["the children were reading books about animals"] * 40)  # ~300 tokens
    texts = ["who saw the dog?", long_text, "a lot different.", long_text + " again"]
    seen = _record_forwards(bert, monkeypatch)
    score_texts(bert, texts, "pll", batch_tokens=1024)
    copies = sum(len(bert.tokenizer(t)["input_ids"]) - 2 for t in texts)
    assert all(rows * length <= 1024 for rows, length, _, _ in seen)
    assert all(head_rows == rows for rows, _, head_rows, _ in seen)  # one masked position per copy, not [copies x T]
    assert sum(rows for rows, _, _, _ in seen) == copies


def test_clm_batches_pack_many_sentences_under_the_budget(one_sequence_per_row, sentences, monkeypatch):
    llama = one_sequence_per_row
    seen = _record_forwards(llama, monkeypatch)
    score_texts(llama, sentences, "clm", batch_tokens=256)
    assert all(rows * length <= 256 for rows, length, _, _ in seen)
    assert max(rows for rows, _, _, _ in seen) > 5
    assert sum(rows for rows, _, _, _ in seen) == len(set(sentences))  # duplicates are scored once


def test_clm_pairs_share_their_common_prefix_in_one_row(llama, monkeypatch):
    good, bad = "Who should Derek hug after shocking Richard?", "Who should Derek hug after shocking?"
    ids = [llama.tokenizer(t, add_special_tokens=False)["input_ids"] for t in (good, bad)]
    shared = next(i for i, (a, b) in enumerate(zip(*ids)) if a != b)
    seen = _record_forwards(llama, monkeypatch)
    tree = score_pairs(llama, [good], [bad], "clm")
    # BOS + each sentence without its last token, the shared part once
    assert seen == [[1, 1 + len(ids[0]) - 1 + len(ids[1]) - 1 - shared, len(ids[0]) + len(ids[1]) - shared,
                     1 + len(ids[0]) - 1 + len(ids[1]) - 1 - shared]]
    monkeypatch.undo()
    alone = [score_texts(llama, [t], "clm")[0] for t in (good, bad)]
    np.testing.assert_allclose(np.concatenate(tree), alone, atol=TOL, rtol=0)


@pytest.mark.parametrize(("budget", "forest_cells"), [(16, None), (256, 300), (100_000, None)])
def test_clm_prefix_trees_equal_one_row_per_sequence(llama, real_pairs, budget, forest_cells, monkeypatch):
    """Any budget, and sequences split over several forests (300 cells: about ten sentences each)."""
    good = [p["sentence_good"] for p in real_pairs]
    bad = [p["sentence_bad"] for p in real_pairs]
    if forest_cells:
        monkeypatch.setattr(engine, "TREE_FOREST_CELLS", forest_cells)
    seen = _record_forwards(llama, monkeypatch)
    tree = score_pairs(llama, good, bad, "clm", batch_tokens=budget)
    monkeypatch.undo()
    inputs = sum(len(llama.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in set(good + bad))
    assert all(rows * length <= budget or rows == 1 for rows, length, _, _ in seen)  # a long row: a batch alone
    if budget > 16 and not forest_cells:  # tiny forests sorted by length separate pairs of unequal length
        assert sum(tokens for *_, tokens in seen) < 0.8 * inputs  # pairs share their beginnings
    monkeypatch.setattr(type(llama), "shares_prefixes", property(lambda self: False))
    plain = score_pairs(llama, good, bad, "clm", batch_tokens=budget)
    np.testing.assert_allclose(np.concatenate(tree), np.concatenate(plain), atol=TOL, rtol=0)


def test_clm_shared_prefixes_go_through_the_head_once(llama, sentences, monkeypatch):
    """Positions whose token and whole prefix repeat (good/bad pairs share beginnings) are computed once."""
    texts = sentences[:60]
    unique_cells = set()
    for text in texts:
        ids = [llama.tokenizer.bos_token_id, *llama.tokenizer(text, add_special_tokens=False)["input_ids"]]
        unique_cells.update(tuple(ids[: j + 1]) for j in range(1, len(ids)))
    seen = _record_forwards(llama, monkeypatch)
    shared = score_texts(llama, texts, "clm", batch_tokens=128)
    assert sum(head_rows for _, _, head_rows, _ in seen) == len(unique_cells)
    monkeypatch.undo()
    one_by_one = np.array([score_texts(llama, [t], "clm")[0] for t in texts])
    np.testing.assert_allclose(shared, one_by_one, atol=TOL, rtol=0)


def test_identical_sentences_tie_exactly(llama, bert):
    texts = ["The cat sat on the mat.", "Who should Derek hug?"]
    for sm, method in ((llama, "clm"), (bert, "pll")):
        good, bad = score_pairs(sm, texts, list(texts), method)
        assert np.array_equal(good, bad)


def test_empty_text_scores_zero(llama, bert):
    assert score_texts(bert, ["", "a dog."], "pll")[0] == 0.0
    assert score_texts(llama, ["", "a dog."], "clm")[0] == 0.0


# -- models and modes -------------------------------------------------------------------------------------------------

class FakeAntlm(torch.nn.Module):
    """The antlm-bench model interface (hidden_states / lm_logits), built on the tiny Llama's weights."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config
        self.config.antlm_architecture = "babyllama"
        self.modes: list[str] = []

    def hidden_states(self, input_ids, attention_mask=None, attention_mode="causal"):
        self.modes.append(attention_mode)
        return self.inner.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def lm_logits(self, hidden):
        return self.inner.lm_head(hidden)


def test_our_models_are_driven_through_hidden_states_and_lm_logits(llama, sentences):
    fake = FakeAntlm(build_tiny_llama(seed=0))
    try:
        sm = wrap_model(fake, llama.tokenizer)
        assert sm.kind == "antlm" and not sm.is_masked_lm
        np.testing.assert_allclose(score_texts(sm, sentences[:10], "clm"), score_texts(llama, sentences[:10], "clm"),
                                   atol=TOL, rtol=0)
        assert set(fake.modes) == {"causal"}
        assert not sm.shares_prefixes  # its hidden_states takes no position_ids: one sequence per row
        fake.modes.clear()
        score_texts(sm, sentences[:2], "mntp")
        assert set(fake.modes) == {"bidirectional"}
    finally:
        del fake.config.antlm_architecture


def test_a_model_that_ignores_position_ids_gets_no_prefix_trees(llama, sentences):
    """Accepting the arguments is not enough: the check compares the tree's states with plain forwards."""

    class IgnoresPositions(FakeAntlm):
        def hidden_states(self, input_ids, attention_mask=None, attention_mode="causal", position_ids=None):
            if attention_mask is not None and attention_mask.dim() == 4:  # the mask is honoured, positions are not
                attention_mask = torch.zeros(attention_mask.shape).masked_fill_(~attention_mask, float("-inf"))
            return super().hidden_states(input_ids, attention_mask, attention_mode)

    fake = IgnoresPositions(build_tiny_llama(seed=0))
    try:
        sm = wrap_model(fake, llama.tokenizer)
        assert not sm.shares_prefixes
        np.testing.assert_allclose(score_texts(sm, sentences[:10], "clm"), score_texts(llama, sentences[:10], "clm"),
                                   atol=TOL, rtol=0)
    finally:
        del fake.config.antlm_architecture


def test_method_and_model_kind_must_agree(llama, bert):
    with pytest.raises(UserError, match="bidirectional"):
        score_texts(llama, ["a dog."], "pll")
    with pytest.raises(UserError, match="causal"):
        score_texts(bert, ["a dog."], "clm")



def test_bfloat16_on_cpu_follows_the_cpu(monkeypatch):
    """Refused where bf16 would be emulated (~100x slower), taken where the CPU multiplies it natively; float16
    never on CPU."""
    monkeypatch.setattr("antlm_bench.scoring.model.cpu_bf16_instructions", lambda: [])
    with pytest.raises(UserError, match="no native bf16"):
        resolve_device_dtype("cpu", "bfloat16")
    monkeypatch.setattr("antlm_bench.scoring.model.cpu_bf16_instructions", lambda: ["avx512_bf16"])
    assert resolve_device_dtype("cpu", "bfloat16") == (torch.device("cpu"), torch.bfloat16)
    with pytest.raises(UserError, match="float16"):
        resolve_device_dtype("cpu", "float16")


def test_a_head_that_is_not_separable_falls_back_to_full_logits(bert):
    """A model whose forward scales the head's logits fails the self-check and is scored from its own logits."""
    from transformers import BertForMaskedLM

    class ScaledBert(BertForMaskedLM):
        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            out.logits = out.logits * 0.5
            return out

    torch.manual_seed(0)
    scaled = ScaledBert(build_tiny_bert().config).eval()
    scaled.load_state_dict(build_tiny_bert().state_dict())
    sm = wrap_model(scaled, bert.tokenizer)
    assert sm.head_fn is None and sm.notes
    text = "who saw the dog?"
    tok = bert.tokenizer
    ids = torch.tensor(tok(text)["input_ids"])
    expected = 0.0
    for i in range(1, len(ids) - 1):
        masked = ids.clone()
        masked[i] = tok.mask_token_id
        with torch.no_grad():
            logits = scaled(input_ids=masked[None]).logits[0, i]
        expected += float(torch.log_softmax(logits, -1)[ids[i]])
    assert score_texts(sm, [text], "pll")[0] == pytest.approx(expected, abs=TOL)
