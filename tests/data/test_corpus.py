"""Corpus cleaning, proportional sampling, packing and the on-disk cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from antlm_bench.data.corpus import (
    clean_line,
    default_corpus_dir,
    prepare_corpus,
    prepare_training_data,
    read_corpus,
    tokenize_lines,
)
from antlm_bench.data.tokenizer import train_tokenizer
from antlm_bench.errors import UserError
from antlm_bench.recipes import load_recipe

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "the", "dog", "ran", "to", "the", "park", "while", "birds", "sang", "in", "trees"]


def _text(n_lines: int, offset: int) -> str:
    return "\n".join(
        " ".join(WORDS[(offset + i + j) % len(WORDS)] for j in range(5 + (i % 7))) + f" line{offset}_{i}."
        for i in range(n_lines)
    )


@pytest.fixture()
def corpus_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    (folder / "train").mkdir(parents=True)
    (folder / "dev").mkdir()
    # a large and a small source, with duplicates, odd whitespace and curly quotes
    (folder / "train" / "big.train").write_text(
        _text(300, 0) + "\nthe same line\n\u201cQuoted\u201d\u00a0text  here\t.\nthe same line\n\n", encoding="utf-8")
    (folder / "train" / "small.train").write_text(_text(100, 3) + "\nthe same line\n", encoding="utf-8")
    (folder / "dev" / "big.dev").write_text(_text(20, 5), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer([_text(300, 0), _text(100, 3)], vocab_size=300)


def test_clean_line_normalises_punctuation_and_whitespace():
    assert clean_line("  \u201cHi\u201d,\u00a0she  said\t\u2014 it\u2019s \ufb01ne\u2026 ") == '"Hi", she said -- it\'s fine...'
    assert clean_line("A:\tI'm sure.") == "A: I'm sure."
    assert clean_line(" \t ") == ""


def test_reading_drops_duplicates_and_empty_lines_and_is_deterministic(corpus_dir):
    first = read_corpus(corpus_dir)
    assert sorted(first.sources) == ["big", "small"]
    assert first.n_duplicates == 2  # the second "the same line" in big, and the one in small
    big, small = list(first.lines("big")), list(first.lines("small"))
    assert big.count("the same line") == 1 and "the same line" not in small
    assert '"Quoted" text here .' in big
    assert all(line and line == line.strip() for line in first.lines())
    assert read_corpus(corpus_dir).data_hash == first.data_hash
    path = corpus_dir / "train" / "small.train"
    path.write_text(path.read_text(encoding="utf-8") + "one more line\n", encoding="utf-8")
    assert read_corpus(corpus_dir).data_hash != first.data_hash


def test_max_words_keeps_each_source_share(corpus_dir):
    full = read_corpus(corpus_dir)
    total = sum(full.n_words.values())
    capped = read_corpus(corpus_dir, max_words=total // 3, seed=1)
    assert sum(capped.n_words.values()) == total // 3
    for name, words in capped.n_words.items():
        assert abs(words - full.n_words[name] * (total // 3) / total) <= 1
    for name in capped.sources:  # whole lines of the source, in order, and at most one cut line
        lines = list(capped.lines(name))
        index = {line: i for i, line in enumerate(full.lines(name))}
        positions = [index[line] for line in lines if line in index]
        assert positions == sorted(positions) and len(lines) - len(positions) <= 1
    assert read_corpus(corpus_dir, max_words=total // 3, seed=1).data_hash == capped.data_hash
    assert read_corpus(corpus_dir, max_words=total // 3, seed=2).data_hash != capped.data_hash
    assert read_corpus(corpus_dir, max_words=10 * total).data_hash == full.data_hash


def test_packing_is_the_line_stream_cut_into_blocks(corpus_dir, tokenizer, tmp_path):
    corpus = read_corpus(corpus_dir)
    packed = prepare_corpus(corpus_dir, tokenizer, seq_len=16, max_words=None, cache_dir=tmp_path / "cache")
    stream, starts = tokenize_lines(corpus.lines(), tokenizer)
    assert packed.input_ids.dtype == np.int32 and packed.word_starts.dtype == bool
    assert packed.input_ids.shape == (len(stream) // 16, 16)
    assert np.array_equal(packed.input_ids.ravel(), stream[: packed.n_tokens])
    assert np.array_equal(packed.word_starts.ravel(), starts[: packed.n_tokens])
    first = next(corpus.lines())
    expected = tokenizer(first).input_ids  # <s> line </s>, as the tokenizer's template writes it
    assert stream[: len(expected)].tolist() == expected
    # word starts agree with the tokenizer's word ids
    encoding = tokenizer(first)
    words = encoding.word_ids()
    truth = [w is None or i == 0 or w != words[i - 1] for i, w in enumerate(words)]
    assert starts[: len(truth)].tolist() == truth
    assert packed.data_hash == corpus.data_hash and not packed.from_cache


def test_second_run_reads_the_cache(corpus_dir, tokenizer, tmp_path):
    cache = tmp_path / "cache"
    first = prepare_corpus(corpus_dir, tokenizer, 16, None, cache)
    again = prepare_corpus(corpus_dir, tokenizer, 16, None, cache)
    assert again.from_cache and again.cache_path == first.cache_path
    assert np.array_equal(again.input_ids, first.input_ids) and np.array_equal(again.word_starts, first.word_starts)
    assert not prepare_corpus(corpus_dir, tokenizer, 32, None, cache).from_cache  # other length, other entry
    kept = np.array(first.input_ids)
    (first.cache_path / "input_ids.npy").write_bytes(b"damaged")
    rebuilt = prepare_corpus(corpus_dir, tokenizer, 16, None, cache)
    assert not rebuilt.from_cache and np.array_equal(rebuilt.input_ids, kept)


def test_prepare_training_data_for_a_recipe(corpus_dir, tmp_path):
    recipe = load_recipe("antlm-babyllama")
    recipe.presets["tiny"] = recipe.presets["tiny"].model_copy(update={"vocab_size": 320, "max_words": None})
    tokenizer, packed = prepare_training_data(corpus_dir, recipe.resolve("tiny"), cache_dir=tmp_path / "cache")
    assert len(tokenizer) <= 320 and packed.seq_len == recipe.presets["tiny"].max_seq_len
    assert packed.input_ids.max() < len(tokenizer)
    _, again = prepare_training_data(corpus_dir, recipe.resolve("tiny"), cache_dir=tmp_path / "cache")
    assert again.from_cache and again.tokenizer_hash == packed.tokenizer_hash
    _, dev = prepare_training_data(corpus_dir, recipe.resolve("tiny"), cache_dir=tmp_path / "cache", split="dev")
    assert dev.data_hash != packed.data_hash and dev.tokenizer_hash != packed.tokenizer_hash


def test_errors_are_one_line(tmp_path, tokenizer):
    with pytest.raises(UserError, match="not a folder"):
        read_corpus(tmp_path / "missing")
    with pytest.raises(UserError, match=r"no \*\.train files"):
        read_corpus(tmp_path)
    (tmp_path / "a.train").write_bytes(b"\xff\xfe broken")
    with pytest.raises(UserError, match="not UTF-8"):
        read_corpus(tmp_path)
    (tmp_path / "a.train").write_text("short text", encoding="utf-8")
    with pytest.raises(UserError, match="fewer than one sequence"):
        prepare_corpus(tmp_path, tokenizer, 128, None, None)
    with pytest.raises(UserError, match="max-words"):
        read_corpus(tmp_path, max_words=0)


def test_the_shipped_pretraining_sample(real_data_dir):
    corpus = read_corpus(default_corpus_dir(real_data_dir), max_words=120_000)
    assert sorted(corpus.sources) == ["bnc_spoken", "childes", "gutenberg", "open_subtitles", "simple_wiki",
                                      "switchboard"]
    assert sum(corpus.n_words.values()) == 120_000
    assert corpus.n_words["childes"] > corpus.n_words["gutenberg"] > corpus.n_words["switchboard"]


def test_data_prepare_command(corpus_dir, tmp_path):
    from typer.testing import CliRunner

    from antlm_bench.cli import app

    args = ["data", "prepare", "--recipe", "babyllama-clm-only", "--preset", "tiny", "--corpus", str(corpus_dir),
            "--cache-dir", str(tmp_path / "cache")]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "(written)" in first.output and "sequences x 64" in first.output
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "(reused)" in again.output
    assert [p.name for p in (tmp_path / "cache" / "packed").iterdir() if not p.name.startswith(".")] == [
        p.name for p in (tmp_path / "cache" / "packed").iterdir()]
    assert len(list((tmp_path / "cache" / "packed").glob("*/packed.json"))) == 1


def test_preparation_prints_progress(corpus_dir, tmp_path, capsys):
    recipe = load_recipe("antlm-babyllama")
    recipe.presets["tiny"] = recipe.presets["tiny"].model_copy(update={"vocab_size": 320, "max_words": None})
    prepare_training_data(corpus_dir, recipe.resolve("tiny"), cache_dir=tmp_path / "cache")
    first = capsys.readouterr().err
    assert "corpus: read" in first and "2 sources" in first and "duplicate lines dropped" in first
    assert "tokenizer: training a byte-level BPE, vocabulary 320" in first and "tokenizer: trained" in first
    assert "packing: tokenizing" in first and "sequences" in first
    lines: list[str] = []
    prepare_training_data(corpus_dir, recipe.resolve("tiny"), cache_dir=tmp_path / "cache", progress=lines.append)
    assert any(line.startswith("tokenizer: reused from the cache") for line in lines)
    assert any(line.startswith("packing: reused") for line in lines)
    assert capsys.readouterr().err == ""
    prepare_training_data(corpus_dir, recipe.resolve("tiny"), cache_dir=tmp_path / "cache", progress=False)
    assert capsys.readouterr().err == ""
