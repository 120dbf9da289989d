"""`data prepare` streams: the corpus read, sampled and packed a chunk at a time gives what one pass in memory gives.

The reference below is the plain one-shot computation (the whole file read, a set of seen lines, a shuffled list of
line numbers, one array per line): the streaming code must agree with it exactly, data hash included, when every
chunk is forced tiny so that lines, characters, ``\\r\\n`` pairs and batches straddle the chunk edges.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from antlm_bench.data import corpus as streaming
from antlm_bench.data.corpus import CLEANING_VERSION, clean_line, prepare_corpus, read_corpus, recipe_tokenizer
from antlm_bench.data.tokenizer import tokenizer_hash, train_tokenizer
from antlm_bench.errors import UserError
from antlm_bench.recipes import load_recipe

# -- the one-shot reference -------------------------------------------------------------------------------------------


def reference_read(folder: Path, max_words: int | None = None, seed: int = 0) -> tuple[dict[str, list[str]], int]:
    """Every file read whole, duplicates dropped through a set, sources sampled from shuffled lists of lines."""
    sources: dict[str, list[str]] = {}
    seen: set[str] = set()
    duplicates = 0
    for path in streaming.find_corpus_files(folder):
        kept = []
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = clean_line(raw)
            if not line:
                continue
            if line in seen:
                duplicates += 1
                continue
            seen.add(line)
            kept.append(line)
        sources[path.stem] = kept
    if max_words is not None:
        words = {name: sum(len(line.split(" ")) for line in lines) for name, lines in sources.items()}
        total = sum(words.values())
        if max_words < total:
            exact = {name: max_words * count / total for name, count in words.items()}
            shares = {name: int(value) for name, value in exact.items()}
            for name in sorted(exact, key=lambda n: (shares[n] - exact[n], n))[:max_words - sum(shares.values())]:
                shares[name] += 1
            for name, lines in sources.items():
                order = list(range(len(lines)))
                random.Random(f"{seed}:{name}").shuffle(order)
                kept_at: dict[int, str] = {}
                remaining = shares[name]
                for index in order:
                    if remaining <= 0:
                        break
                    cut = lines[index].split(" ")[:remaining]
                    kept_at[index] = " ".join(cut)
                    remaining -= len(cut)
                sources[name] = [kept_at[i] for i in sorted(kept_at)]
    return sources, duplicates


def reference_hash(sources: dict[str, list[str]]) -> str:
    digest = hashlib.sha256(CLEANING_VERSION.encode())
    for name in sorted(sources):
        digest.update(b"\x00source\x00" + name.encode() + b"\x00")
        for line in sources[name]:
            digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def reference_pack(lines: list[str], tokenizer, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """``<s> line </s>`` per line from one encode each, concatenated, cut into blocks."""
    ids_parts, start_parts = [], []
    for line in lines:
        encoding = tokenizer.backend_tokenizer.encode(line, add_special_tokens=False)
        words = [-1 if w is None else w for w in encoding.word_ids]
        starts = [i == 0 or words[i] != words[i - 1] for i in range(len(words))]
        ids_parts += [tokenizer.bos_token_id, *encoding.ids, tokenizer.eos_token_id]
        start_parts += [True, *starts, True]
    n = len(ids_parts) // seq_len
    return (np.asarray(ids_parts[: n * seq_len], np.int32).reshape(n, seq_len),
            np.asarray(start_parts[: n * seq_len], bool).reshape(n, seq_len))


# -- fixtures ---------------------------------------------------------------------------------------------------------

BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _lines(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    vocabulary = ["the", "cat", "\u201ccaf\u00e9\u201d", "na\u00efve", "\U0001f600", "it\u2019s", "\u2014",
                  "\ufb01ne", "dog", "ran", "\u00a0", "<s>", "x", "\u200bzero"]
    return [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 40))) for _ in range(n)]


@pytest.fixture()
def tricky_corpus(tmp_path: Path) -> Path:
    """Three sources whose file order is not their name order, every line break str.splitlines knows, blank and
    duplicate lines (within and across sources), multi-byte characters and one long line."""
    folder = tmp_path / "corpus"
    texts = {"a/zeta.train": _lines(1, 120), "b/alpha.train": _lines(2, 60), "c/mid-dle.train": _lines(3, 90)}
    texts["b/alpha.train"] += texts["a/zeta.train"][:7] + ["  ", ""]  # duplicates across sources, blank lines
    texts["c/mid-dle.train"] += texts["c/mid-dle.train"][:5] + [" ".join(_lines(4, 200))]  # within; a long line
    for index, (name, lines) in enumerate(texts.items()):
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(line + BREAKS[(i + index) % len(BREAKS)] for i, line in enumerate(lines))
        path.write_bytes(text.encode("utf-8"))
    return folder


@pytest.fixture()
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chunk a few bytes, lines or characters: each edge a chunk can have is crossed many times."""
    monkeypatch.setattr(streaming, "_READ_BYTES", 7)
    monkeypatch.setattr(streaming, "_SPOOL_BYTES", 5)
    monkeypatch.setattr(streaming, "_ROWS_AT_ONCE", 3)
    monkeypatch.setattr(streaming, "_TOKENIZE_CHARS", 50)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(_lines(1, 300) + _lines(5, 100), vocab_size=400)


# -- the same text, the same sample, the same hash ----------------------------------------------------------------------


@pytest.mark.parametrize("max_words", [None, 1, 700, 2_345, 10**9])
def test_streamed_reading_matches_the_one_shot_reference(tricky_corpus, tiny_chunks, max_words):
    for seed in (0, 7):
        sources, duplicates = reference_read(tricky_corpus, max_words, seed)
        with read_corpus(tricky_corpus, max_words=max_words, seed=seed) as corpus:
            assert corpus.sources == ["zeta", "alpha", "mid-dle"]  # file order, not name order
            assert {name: list(corpus.lines(name)) for name in corpus.sources} == sources
            assert list(corpus.lines()) == [line for lines in sources.values() for line in lines]
            assert corpus.data_hash == reference_hash(sources)
            assert corpus.n_duplicates == duplicates == 12
            assert corpus.n_words == {name: sum(len(line.split()) for line in lines) for name, lines in sources.items()}
            assert corpus.n_lines == {name: len(lines) for name, lines in sources.items()}
            if max_words is not None:
                assert sum(corpus.n_words.values()) == min(max_words, sum(
                    len(line.split()) for lines in reference_read(tricky_corpus)[0].values() for line in lines))


def test_chunk_sizes_do_not_change_the_result(tricky_corpus, monkeypatch):
    whole = read_corpus(tricky_corpus, max_words=900, seed=3)
    for size in (1, 2, 3, 13):  # a one-byte block splits every multi-byte character and every "\r\n"
        monkeypatch.setattr(streaming, "_READ_BYTES", size)
        with read_corpus(tricky_corpus, max_words=900, seed=3) as chunked:
            assert chunked.data_hash == whole.data_hash and list(chunked.lines()) == list(whole.lines())
    whole.close()


def test_streamed_packing_matches_the_one_shot_reference(tricky_corpus, tiny_chunks, tokenizer, tmp_path):
    sources, _ = reference_read(tricky_corpus, 2_000, seed=1)
    ids, starts = reference_pack([line for lines in sources.values() for line in lines], tokenizer, 24)
    assert ids.shape[0] > 10  # many blocks, from many batches of a few lines
    for cache in (tmp_path / "cache", None):
        packed = prepare_corpus(tricky_corpus, tokenizer, 24, 2_000, cache, seed=1)
        assert np.array_equal(packed.input_ids, ids) and np.array_equal(packed.word_starts, starts)
        assert packed.data_hash == reference_hash(sources) and not packed.from_cache
        assert packed.source_words == {name: sum(len(line.split()) for line in lines)
                                       for name, lines in sources.items()}
    again = prepare_corpus(tricky_corpus, tokenizer, 24, 2_000, tmp_path / "cache", seed=1)
    assert again.from_cache and np.array_equal(again.input_ids, ids) and np.array_equal(again.word_starts, starts)
    assert [p.name for p in (tmp_path / "cache" / "packed").iterdir()] == [again.cache_path.name]  # no leftovers


def test_the_tokenizer_trained_from_the_stream_is_the_one_trained_from_the_list(tricky_corpus, tiny_chunks):
    recipe = load_recipe("antlm-babyllama")
    recipe.presets["tiny"] = recipe.presets["tiny"].model_copy(update={"vocab_size": 400})
    sources, _ = reference_read(tricky_corpus)
    expected = train_tokenizer([line for lines in sources.values() for line in lines], 400,
                               recipe.tokenizer.min_frequency, recipe.tokenizer.lowercase,
                               recipe.presets["tiny"].max_position_embeddings)
    with read_corpus(tricky_corpus) as corpus:
        assert tokenizer_hash(recipe_tokenizer(recipe.resolve("tiny"), corpus, None)) == tokenizer_hash(expected)


def test_a_bad_byte_is_named_by_its_place_in_the_file(tmp_path, tiny_chunks):
    (tmp_path / "a.train").write_bytes("caf\u00e9 ok\n".encode() * 5 + b"bad \xff here\n")
    with pytest.raises(UserError, match=r"a\.train: not UTF-8 text \(byte 49\)"):
        read_corpus(tmp_path)
    (tmp_path / "a.train").write_bytes("caf\u00e9 ok\n".encode() * 5 + "\u00e9".encode()[:1])  # cut at the end
    with pytest.raises(UserError, match=r"not UTF-8 text \(byte 45\)"):
        read_corpus(tmp_path)
    (tmp_path / "a.train").write_bytes(b" \r\n\t\x0c\n")
    with pytest.raises(UserError, match="no text"):
        read_corpus(tmp_path)


# -- the cache entry: whole or absent, checked on reuse, never written through a link ---------------------------------


def test_a_damaged_entry_is_rebuilt_and_a_failed_rebuild_publishes_nothing(tricky_corpus, tokenizer, tmp_path,
                                                                            monkeypatch):
    cache = tmp_path / "cache"
    first = prepare_corpus(tricky_corpus, tokenizer, 24, None, cache)
    expected, entry = np.array(first.input_ids), first.cache_path
    flipped = bytearray((entry / "word_starts.npy").read_bytes())
    flipped[-1] ^= 1  # one bit of the data, the header intact: only the sha256 in packed.json tells
    (entry / "word_starts.npy").write_bytes(bytes(flipped))

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(streaming, "_finish_npy", fail)
    with pytest.raises(OSError, match="No space"):
        prepare_corpus(tricky_corpus, tokenizer, 24, None, cache)
    assert (entry / "word_starts.npy").read_bytes() == bytes(flipped)  # the old entry, as it was
    assert sorted(p.name for p in entry.parent.iterdir()) == [entry.name]  # no half-written one beside it
    monkeypatch.undo()
    rebuilt = prepare_corpus(tricky_corpus, tokenizer, 24, None, cache)
    assert not rebuilt.from_cache and np.array_equal(rebuilt.input_ids, expected)
    assert prepare_corpus(tricky_corpus, tokenizer, 24, None, cache).from_cache


def test_a_killed_packing_leaves_no_entry_and_its_leftovers_are_tidied(tricky_corpus, tokenizer, tmp_path):
    cache = tmp_path / "cache"
    tokenizer.save_pretrained(str(tmp_path / "tok"))
    script = textwrap.dedent(f"""
        import os, signal
        from antlm_bench.data import corpus
        from antlm_bench.data.tokenizer import load_tokenizer
        real = corpus._finish_npy
        def killed(path, *args):
            if path.name == "word_starts.npy":  # input_ids.npy finished, word_starts.npy not yet
                os.kill(os.getpid(), signal.SIGKILL)
            return real(path, *args)
        corpus._finish_npy = killed
        corpus.prepare_corpus({str(tricky_corpus)!r}, load_tokenizer({str(tmp_path / "tok")!r}), 24, None,
                              {str(cache)!r})
    """)
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": os.getcwd()},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    left = list((cache / "packed").iterdir())
    assert len(left) == 1 and left[0].name.startswith(".") and (left[0] / "input_ids.npy").is_file()
    packed = prepare_corpus(tricky_corpus, tokenizer, 24, None, cache)
    assert not packed.from_cache and [p.name for p in (cache / "packed").iterdir()] == [packed.cache_path.name]


def test_a_link_planted_at_the_entry_is_not_followed(tricky_corpus, tokenizer, tmp_path):
    cache = tmp_path / "cache"
    first = prepare_corpus(tricky_corpus, tokenizer, 24, None, tmp_path / "elsewhere")
    (cache / "packed").mkdir(parents=True)
    (cache / "packed" / first.cache_path.name).symlink_to(first.cache_path, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in first.cache_path.iterdir()}
    packed = prepare_corpus(tricky_corpus, tokenizer, 24, None, cache)
    assert not packed.from_cache  # a link is not an entry of ours: not reused
    assert packed.cache_path.is_dir() and not packed.cache_path.is_symlink()
    assert {p.name: p.read_bytes() for p in first.cache_path.iterdir()} == before  # the link's target untouched
    assert np.array_equal(packed.input_ids, first.input_ids)


# -- memory: what the process holds does not grow with the text --------------------------------------------------------


def _traced_peak(folder: Path, lines: list[str], tokenizer, cache: Path) -> tuple[int, int]:
    """(the peak of Python's allocations, numpy's arrays among them, while a corpus of ``lines`` in two sources is
    read, sampled to 90% of its words and packed; the bytes of its text)."""
    import tracemalloc

    folder.mkdir()
    half = len(lines) // 2
    (folder / "a.train").write_text("\n".join(lines[:half]), encoding="utf-8")
    (folder / "b.train").write_text("\n".join(lines[half:]), encoding="utf-8")
    words = sum(len(line.split()) for line in lines)
    tracemalloc.start()
    try:
        packed = prepare_corpus(folder, tokenizer, 64, words * 9 // 10, cache, seed=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(packed.source_words.values()) == words * 9 // 10
    return peak, sum(len(line.encode()) for line in lines)


def test_memory_does_not_grow_with_the_corpus(tmp_path, monkeypatch, tokenizer):
    """Four times the text, the same peak: neither the text nor the token stream is held whole, only a block of
    each (tracemalloc is deterministic, unlike the resident set that benchmarks/data_prepare.py measures)."""
    for name in ("_READ_BYTES", "_SPOOL_BYTES", "_TOKENIZE_CHARS"):
        monkeypatch.setattr(streaming, name, 1 << 13)
    lines = [" ".join(_lines(seed, 20)) for seed in range(1_200)]  # some 2,000 bytes a line
    small, _ = _traced_peak(tmp_path / "small", lines[:300], tokenizer, tmp_path / "cache")
    large, text_bytes = _traced_peak(tmp_path / "large", lines, tokenizer, tmp_path / "cache")
    assert text_bytes > 2_000_000
    assert large < 1.25 * small and large < text_bytes / 8, f"{small:,} -> {large:,} bytes for {text_bytes:,}"
