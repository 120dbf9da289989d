"""The BPE tokenizer: special tokens, round trip, word ids, save/load, determinism."""

from __future__ import annotations

import pytest

from antlm_bench.data.tokenizer import SPECIAL_TOKENS, load_tokenizer, tokenizer_hash, train_tokenizer
from antlm_bench.errors import UserError

TEXTS = [
    "The cat sat on the mat.",
    "Who should Derek hug after shocking Richard?",
    "The dogs aren't barking at the children's toys.",
    "She said \u201chello\u201d and left \u2014 quickly.",
    "A: I'm sure they are.",
] * 40


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXTS, vocab_size=400, min_frequency=2)


def test_special_tokens_have_fixed_ids(tokenizer):
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert (tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (0, 1, 2)
    assert (tokenizer.unk_token_id, tokenizer.mask_token_id) == (3, 4)
    assert len(tokenizer) <= 400


@pytest.mark.parametrize("text", [
    "The cat sat on the mat.", "Zebras quizzically jump!", "naïve café 123", "  two  spaces ", "emoji \U0001F600 ok",
])
def test_round_trip(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert tokenizer.decode(ids) == text
    with_specials = tokenizer(text).input_ids
    assert with_specials[0] == tokenizer.bos_token_id and with_specials[-1] == tokenizer.eos_token_id
    assert with_specials[1:-1] == ids
    assert tokenizer.decode(with_specials, skip_special_tokens=True) == text


def test_no_prefix_space_is_added(tokenizer):
    first = tokenizer.convert_ids_to_tokens(tokenizer("The cat", add_special_tokens=False).input_ids)
    assert first[0].startswith("T") and first[-1] == "\u0120cat"


def test_word_ids_group_the_pieces_of_a_word(tokenizer):
    text = "Zebras quizzically jump."
    encoding = tokenizer(text)
    word_ids = encoding.word_ids()
    assert word_ids[0] is None and word_ids[-1] is None  # <s> and </s>
    real = [w for w in word_ids if w is not None]
    assert real == sorted(real) and set(real) == {0, 1, 2, 3}  # Zebras, quizzically, jump, "."
    assert len(real) > 4  # rare words come in several pieces
    for word in range(4):
        start, end = encoding.word_to_chars(word)
        pieces = [i for i, w in enumerate(word_ids) if w == word]
        assert tokenizer.decode([encoding.input_ids[i] for i in pieces]).strip() == text[start:end].strip()


def test_normaliser_straightens_quotes_as_the_corpus_cleaning_does(tokenizer):
    assert tokenizer("\u201chi\u201d \u2018x\u2019", add_special_tokens=False).input_ids == tokenizer(
        "\"hi\" 'x'", add_special_tokens=False).input_ids


def test_save_load_and_auto_tokenizer(tmp_path, tokenizer):
    from transformers import AutoTokenizer

    tokenizer.save_pretrained(tmp_path)
    for loaded in (load_tokenizer(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        assert loaded("Who should Derek hug?").input_ids == tokenizer("Who should Derek hug?").input_ids
        assert loaded.mask_token == "<mask>" and loaded.pad_token_id == 0
        assert tokenizer_hash(loaded) == tokenizer_hash(tokenizer)
        assert loaded("The cat").word_ids() == [None, 0, 1, None]


def test_training_is_deterministic_and_sensitive_to_the_text(tokenizer):
    assert tokenizer_hash(train_tokenizer(TEXTS, vocab_size=400)) == tokenizer_hash(tokenizer)
    assert tokenizer_hash(train_tokenizer(TEXTS[:-1] + ["something else entirely"], 400)) != tokenizer_hash(tokenizer)


def test_errors_are_one_line(tmp_path):
    with pytest.raises(UserError, match="too small"):
        train_tokenizer(TEXTS, vocab_size=100)
    with pytest.raises(UserError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
