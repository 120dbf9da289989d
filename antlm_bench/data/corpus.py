"""Pre-training text: read a BabyLM-style folder, clean it, cap it, tokenize it, pack it, cache it.

A corpus folder holds ``*.train`` files (and ``*.dev`` files for the dev split), directly or in subfolders
(``pretrain_sample/train/childes.train``); each file is one source. The cleaning is deterministic and every step
that changes the text is covered by ``data_hash``:

1. each line: Unicode NFKC, curly quotes and dash variants to ASCII, zero-width characters dropped, runs of
   whitespace collapsed to one space, stripped; empty lines dropped;
2. exact duplicate lines dropped (the first occurrence, in sorted file order, stays);
3. with ``max_words``: each source keeps its share of the words (proportional to its size); within a source the
   lines are drawn in a seeded random order until the share is full, the last one cut at a word, and the kept
   lines stay in file order.

Packing: every line becomes ``<s> tokens </s>``; the lines are concatenated and cut into ``[N, seq_len]`` blocks
(the remainder shorter than one block is dropped). The packed arrays are cached under
``cache_dir/packed/<key>.npz``, the key a hash of the data, tokenizer and sequence length, so a second run does not
tokenize again. ``prepare_training_data`` also trains (or loads from the cache) the recipe's tokenizer.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import shutil
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from transformers import PreTrainedTokenizerFast

from antlm_bench.data import atomic_write_bytes, default_cache_dir, resolve_data_dir
from antlm_bench.data.tokenizer import PUNCTUATION_MAP, load_tokenizer, tokenizer_hash, train_tokenizer
from antlm_bench.errors import UserError
from antlm_bench.recipes import Recipe

CLEANING_VERSION = "antlm-clean-1"  # bump when clean_line or the selection changes: old caches stop matching
PACKING_VERSION = "antlm-pack-1"
_PUNCTUATION_TABLE = str.maketrans(PUNCTUATION_MAP)

Progress = Callable[[str], None] | bool | None  # a function that shows one line, True (stderr), or False/None


def _stderr_line(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _reporter(progress: Progress) -> Callable[[str], None]:
    """What prints the preparation's progress lines: ``progress`` itself, stderr for True, nothing otherwise."""
    if callable(progress):
        return progress
    return _stderr_line if progress else (lambda message: None)


def default_prepared_dir() -> Path:
    """Where prepared corpora and tokenizers are cached: ``~/.cache/antlm-bench/prepared``."""
    return default_cache_dir().parent / "prepared"


def default_corpus_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The shipped pre-training sample, ``<data dir>/pretrain_sample``."""
    return resolve_data_dir(data_dir) / "pretrain_sample"


def clean_line(line: str) -> str:
    line = unicodedata.normalize("NFKC", line).translate(_PUNCTUATION_TABLE)
    return " ".join(line.split())


@dataclass
class CleanCorpus:
    """Cleaned lines per source (file stem), in file order."""

    sources: dict[str, list[str]]
    data_hash: str
    n_duplicates: int = 0
    files: list[Path] = field(default_factory=list)

    @property
    def n_words(self) -> dict[str, int]:
        return {name: sum(len(line.split()) for line in lines) for name, lines in self.sources.items()}

    def lines(self) -> list[str]:
        return [line for lines in self.sources.values() for line in lines]


def find_corpus_files(corpus_dir: str | os.PathLike, split: str = "train") -> list[Path]:
    folder = Path(corpus_dir).expanduser()
    if not folder.is_dir():
        raise UserError(f"corpus {folder}: not a folder; pass a folder of BabyLM-style *.train files")
    _refuse_links(folder, split)
    found = sorted(folder.rglob(f"*.{split}"))
    for path in found:  # a folder or a dangling link under a source's name: refused, as every data reader does
        if not path.is_file() and not (path.is_dir() and any(p.is_file() for p in found if path in p.parents)):
            kind = "a folder" if path.is_dir() else "a dangling link" if path.is_symlink() else "not a regular file"
            raise UserError(f"{path}: {kind} where a data file belongs; remove it or put the *.{split} file back")
    files = [p for p in found if p.is_file()]
    if not files:
        raise UserError(f"corpus {folder}: no *.{split} files in it or its subfolders; pass a BabyLM-style folder")
    names = [p.stem for p in files]
    if len(set(names)) != len(names):
        raise UserError(f"corpus {folder}: two *.{split} files share a name ({', '.join(names)}); keep one per source")
    return files


def _refuse_links(folder: Path, split: str) -> None:
    """A symbolic link inside the corpus (a ``*.train`` file or a subfolder) is refused, never followed: text
    from outside the folder would reach the tokenizer and the corpus hash would not say so."""
    for root, folders, files in os.walk(folder):
        for name in (*folders, *files):
            entry = Path(root) / name
            if entry.is_symlink() and (name in folders or name.endswith(f".{split}")):
                kind = "a symbolic link" if entry.exists() else "a dangling link (a symbolic link to nothing)"
                raise UserError(f"{entry}: {kind} inside corpus {folder}; a corpus is read from its own files "
                                "only, never through a link: copy the file in, or pass the folder it points to")


def _hash_sources(sources: dict[str, list[str]]) -> str:
    digest = hashlib.sha256(CLEANING_VERSION.encode())
    for name in sorted(sources):
        digest.update(b"\x00source\x00" + name.encode() + b"\x00")
        for line in sources[name]:
            digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _shares(words: dict[str, int], max_words: int) -> dict[str, int]:
    """Split ``max_words`` over the sources in proportion to their sizes (largest remainders get the rest)."""
    total = sum(words.values())
    exact = {name: max_words * count / total for name, count in words.items()}
    shares = {name: int(value) for name, value in exact.items()}
    leftover = max_words - sum(shares.values())
    for name in sorted(exact, key=lambda n: (shares[n] - exact[n], n))[:leftover]:
        shares[name] += 1
    return shares


def _sample(lines: list[str], share: int, rng: random.Random) -> list[str]:
    order = list(range(len(lines)))
    rng.shuffle(order)
    kept: dict[int, str] = {}
    remaining = share
    for index in order:
        if remaining <= 0:
            break
        words = lines[index].split(" ")
        if len(words) > remaining:
            words = words[:remaining]
        kept[index] = " ".join(words)
        remaining -= len(words)
    return [kept[i] for i in sorted(kept)]


def read_corpus(corpus_dir: str | os.PathLike, split: str = "train", max_words: int | None = None,
                seed: int = 0) -> CleanCorpus:
    """Read, clean, de-duplicate and (with ``max_words``) proportionally sample a corpus folder."""
    if max_words is not None and max_words <= 0:
        raise UserError(f"--max-words {max_words}: must be a positive number of words")
    files = find_corpus_files(corpus_dir, split)
    seen: set[str] = set()
    sources: dict[str, list[str]] = {}
    duplicates = 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise UserError(f"{path}: not UTF-8 text (byte {err.start}); convert the file to UTF-8") from None
        if not text.strip():  # a source of no text: its share of the corpus, or its heldout subtask, is nothing
            raise UserError(f"{path}: no text (the file is empty or blank); remove it or put its text back")
        kept = []
        for raw in text.splitlines():
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
        if max_words < sum(words.values()):
            shares = _shares(words, max_words)
            # one generator per source, seeded by name: adding a source does not reshuffle the others
            sources = {name: _sample(lines, shares[name], random.Random(f"{seed}:{name}"))
                       for name, lines in sources.items()}
    return CleanCorpus(sources=sources, data_hash=_hash_sources(sources), n_duplicates=duplicates, files=files)


@dataclass
class PackedCorpus:
    """Token blocks for training: ``input_ids`` int32 [N, seq_len], ``word_starts`` bool [N, seq_len].

    ``word_starts`` is True where a token begins a word (special tokens count as one-token words), for whole-word
    and span masking.
    """

    input_ids: np.ndarray
    word_starts: np.ndarray
    data_hash: str
    tokenizer_hash: str
    seq_len: int
    n_words: int
    cache_path: Path | None = None
    from_cache: bool = False

    @property
    def n_tokens(self) -> int:
        return int(self.input_ids.size)

    @property
    def n_sequences(self) -> int:
        return int(self.input_ids.shape[0])


def tokenize_lines(lines: list[str], tokenizer: PreTrainedTokenizerFast,
                   progress: Progress = None) -> tuple[np.ndarray, np.ndarray]:
    """All lines as one stream ``<s> line </s> <s> line </s> ...``: (token ids int32, word starts bool).
    ``progress`` hears about every 10% of a long corpus (over 50,000 lines)."""
    say = _reporter(progress)
    step = max(512, (len(lines) // 10) // 512 * 512) if len(lines) > 50_000 else None
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if eos is None:
        raise UserError("the tokenizer has no EOS token; packing needs one between lines")
    ids_parts: list[np.ndarray] = []
    start_parts: list[np.ndarray] = []
    for begin in range(0, len(lines), 512):
        # the backend directly: no length warnings for long lines, and the specials are ours to place
        if step is not None and begin and begin % step == 0:
            say(f"packing: {begin:,} of {len(lines):,} lines tokenized ({100 * begin // len(lines)}%)")
        encodings = tokenizer.backend_tokenizer.encode_batch(lines[begin:begin + 512], add_special_tokens=False)
        for encoding in encodings:
            ids = np.asarray(encoding.ids, dtype=np.int32)
            words = np.asarray([-1 if w is None else w for w in encoding.word_ids], dtype=np.int64)
            starts = np.ones(len(ids), dtype=bool)
            if len(ids) > 1:
                starts[1:] = words[1:] != words[:-1]
            head = [bos] if bos is not None else []
            ids_parts.append(np.concatenate([np.asarray(head, np.int32), ids, np.asarray([eos], np.int32)]))
            start_parts.append(np.concatenate([np.ones(len(head), bool), starts, np.ones(1, bool)]))
    if not ids_parts:
        return np.zeros(0, np.int32), np.zeros(0, bool)
    return np.concatenate(ids_parts), np.concatenate(start_parts)


def _packed_key(data_hash: str, tok_hash: str, seq_len: int) -> str:
    return hashlib.sha256(f"{PACKING_VERSION}:{data_hash}:{tok_hash}:{seq_len}".encode()).hexdigest()[:32]


def prepare_corpus(
    corpus_dir: str | os.PathLike,
    tokenizer: PreTrainedTokenizerFast,
    seq_len: int = 128,
    max_words: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    split: str = "train",
    seed: int = 0,
    corpus: CleanCorpus | None = None,
    progress: Progress = None,
) -> PackedCorpus:
    """Clean, tokenize and pack ``corpus_dir`` into ``[N, seq_len]`` blocks, cached by content hash."""
    say = _reporter(progress)
    if seq_len < 2:
        raise UserError(f"sequence length {seq_len}: must be at least 2")
    corpus = corpus or read_corpus(corpus_dir, split, max_words, seed)
    tok_hash = tokenizer_hash(tokenizer)
    n_words = sum(corpus.n_words.values())
    cache_path = None
    if cache_dir is not None:
        cache_path = Path(cache_dir) / "packed" / f"{_packed_key(corpus.data_hash, tok_hash, seq_len)}.npz"
        if cache_path.is_file():
            try:
                with np.load(cache_path) as stored:
                    say(f"packing: reused {cache_path}")
                    return PackedCorpus(stored["input_ids"], stored["word_starts"], corpus.data_hash, tok_hash,
                                        seq_len, n_words, cache_path, from_cache=True)
            except (OSError, ValueError, KeyError):
                cache_path.unlink(missing_ok=True)  # a damaged cache entry is rebuilt, not trusted
    clock = time.perf_counter()
    lines = corpus.lines()
    say(f"packing: tokenizing {len(lines):,} lines into sequences of {seq_len} ...")
    ids, starts = tokenize_lines(lines, tokenizer, say)
    n_blocks = len(ids) // seq_len
    say(f"packing: {n_blocks:,} sequences, {n_blocks * seq_len:,} tokens ({time.perf_counter() - clock:.1f} s)")
    if n_blocks == 0:
        raise UserError(
            f"corpus {corpus_dir}: {len(ids)} tokens, fewer than one sequence of {seq_len}; give more text"
        )
    packed = PackedCorpus(
        ids[: n_blocks * seq_len].reshape(n_blocks, seq_len), starts[: n_blocks * seq_len].reshape(n_blocks, seq_len),
        corpus.data_hash, tok_hash, seq_len, n_words, cache_path,
    )
    if cache_path is not None:
        buffer = io.BytesIO()
        np.savez(buffer, input_ids=packed.input_ids, word_starts=packed.word_starts)
        atomic_write_bytes(cache_path, buffer.getvalue())
    return packed


def _tokenizer_key(recipe: Recipe, vocab_size: int, max_length: int, data_hash: str) -> str:
    spec = recipe.tokenizer
    text = f"{spec.kind}:{vocab_size}:{spec.min_frequency}:{spec.lowercase}:{max_length}:{data_hash}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def recipe_tokenizer(recipe: Recipe, preset_name: str, corpus: CleanCorpus,
                     cache_dir: str | os.PathLike | None, progress: Progress = None) -> PreTrainedTokenizerFast:
    """The recipe's BPE at the preset's vocabulary size, trained on ``corpus`` or loaded from the cache."""
    preset = recipe.preset(preset_name)
    say = _reporter(progress)

    def train() -> PreTrainedTokenizerFast:
        clock = time.perf_counter()
        say(f"tokenizer: training a byte-level BPE, vocabulary {preset.vocab_size:,}, on "
            f"{sum(corpus.n_words.values()):,} words ...")
        trained = train_tokenizer(corpus.lines(), preset.vocab_size, recipe.tokenizer.min_frequency,
                                  recipe.tokenizer.lowercase, preset.max_position_embeddings)
        say(f"tokenizer: trained, {len(trained):,} tokens ({time.perf_counter() - clock:.1f} s)")
        return trained

    if cache_dir is None:
        return train()
    folder = Path(cache_dir) / "tokenizers" / _tokenizer_key(
        recipe, preset.vocab_size, preset.max_position_embeddings, corpus.data_hash
    )
    if (folder / "tokenizer.json").is_file():
        say(f"tokenizer: reused from the cache {folder}")
        return load_tokenizer(folder)
    tokenizer = train()
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tokenizer."))
    try:
        tokenizer.save_pretrained(str(staging))
        try:
            os.replace(staging, folder)
        except OSError:  # another process finished the same tokenizer first: theirs is identical
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tokenizer


def training_words(recipe: Recipe, preset_name: str, max_words: int | None) -> int | None:
    """The word cap a run trains under: ``--max-words``, else the preset's (None: the whole corpus)."""
    return max_words if max_words is not None else recipe.preset(preset_name).max_words


def training_data_hash(corpus_dir: str | os.PathLike, recipe: Recipe, preset_name: str,
                       max_words: int | None) -> str:
    """The ``data_hash`` a run of ``recipe`` at ``preset_name`` would train on (the cleaned text after the word cap,
    as ``prepare_training_data`` reads it): what reuse compares with a finished run's, without tokenizing."""
    return read_corpus(corpus_dir, "train", training_words(recipe, preset_name, max_words)).data_hash


def prepare_training_data(
    corpus_dir: str | os.PathLike,
    recipe: Recipe,
    preset_name: str,
    cache_dir: str | os.PathLike | None = None,
    max_words: int | None = None,
    seed: int = 0,
    split: str = "train",
    progress: Progress = True,
) -> tuple[PreTrainedTokenizerFast, PackedCorpus]:
    """The tokenizer and packed blocks a training run needs, in one call (both cached). ``progress``: a line per
    step (reading, tokenizer trained or reused, packing) on stderr, to a function, or none (False).

    ``max_words`` defaults to the preset's ``max_words`` (None: the whole corpus); the tokenizer is trained on the
    text the model will see, at the preset's vocabulary size; sequences have the preset's ``max_seq_len``.
    """
    preset = recipe.preset(preset_name)
    cache_dir = default_prepared_dir() if cache_dir is None else cache_dir
    words = training_words(recipe, preset_name, max_words)
    say = _reporter(progress)
    clock = time.perf_counter()
    # one line after reading, not one before: a bad corpus folder then prints its error line alone
    corpus = read_corpus(corpus_dir, split, words, seed)
    n_words = sum(corpus.n_words.values())
    say(f"corpus: read {corpus_dir} ({split}" + (f", up to {words:,} words" if words else "") + f"): "
        f"{len(corpus.sources)} sources, {n_words:,} words, {corpus.n_duplicates:,} duplicate lines dropped "
        f"({time.perf_counter() - clock:.1f} s)")
    tokenizer = recipe_tokenizer(recipe, preset_name, corpus, cache_dir, progress=say)
    packed = prepare_corpus(corpus_dir, tokenizer, preset.max_seq_len, words, cache_dir, split, seed, corpus,
                            progress=say)
    return tokenizer, packed


def describe(corpus: CleanCorpus, packed: PackedCorpus) -> dict[str, object]:
    """A JSON-able summary for the CLI and logs."""
    return {
        "sources": corpus.n_words, "words": sum(corpus.n_words.values()), "duplicates_dropped": corpus.n_duplicates,
        "tokens": packed.n_tokens, "sequences": packed.n_sequences, "seq_len": packed.seq_len,
        "data_hash": packed.data_hash, "tokenizer_hash": packed.tokenizer_hash,
        "cache": str(packed.cache_path) if packed.cache_path else None, "from_cache": packed.from_cache,
    }


__all__ = [
    "CLEANING_VERSION", "CleanCorpus", "PackedCorpus", "clean_line", "default_corpus_dir", "default_prepared_dir",
    "describe", "find_corpus_files", "prepare_corpus", "prepare_training_data", "read_corpus", "recipe_tokenizer",
    "tokenize_lines",
]
