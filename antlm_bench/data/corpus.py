"""Pre-training text: read a BabyLM-style folder, clean it, cap it, tokenize it, pack it, cache it.

A corpus folder holds ``*.train`` files (and ``*.dev`` files for the dev split), directly or in subfolders
(``pretrain_sample/train/childes.train``); each file is one source. The cleaning is deterministic and every step
that changes the text is covered by ``data_hash``:

1. each line: Unicode NFKC, curly quotes and dash variants to ASCII, zero-width characters dropped, runs of
   whitespace collapsed to one space, stripped; empty lines dropped;
2. exact duplicate lines dropped (the first occurrence, in sorted file order, stays; lines are compared by their
   128-bit BLAKE2b digests: two different lines would have to share one, odds of n^2/2^129 for n lines);
3. with ``max_words``: each source keeps its share of the words (proportional to its size); within a source the
   lines are drawn in a seeded random order until the share is full, the last one cut at a word, and the kept
   lines stay in file order.

Packing: every line becomes ``<s> tokens </s>``; the lines are concatenated and cut into ``[N, seq_len]`` blocks
(the remainder shorter than one block is dropped). The packed arrays are cached in ``cache_dir/packed/<key>/``
(``input_ids.npy``, ``word_starts.npy`` and ``packed.json`` with their sha256, checked on reuse), the key a hash of
the data, tokenizer and sequence length, so a second run does not tokenize again; an entry is written in a
temporary folder and renamed into place whole. ``prepare_training_data`` also trains (or loads from the cache) the
recipe's tokenizer.

Every step streams, so memory does not grow with the text: the files are read a block at a time, the cleaned lines
go to an unnamed spool file (:class:`CleanCorpus`), the tokenizer trains from an iterator over it, and the token
stream is written to disk a batch of lines at a time (the tokenizers library encodes a batch on every core the
process may use). What grows with the corpus is some 26 bytes a line while reading (each line's digest, word count
and words kept).
"""

from __future__ import annotations

import array
import codecs
import hashlib
import io
import math
import os
import random
import shutil
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import IO

import numpy as np
from pydantic import BaseModel, ConfigDict
from pydantic import Field as PydanticField
from transformers import PreTrainedTokenizerFast

from antlm_bench.data import default_cache_dir, resolve_data_dir, sha256_file
from antlm_bench.data.files import remove_stale, temporary_tag
from antlm_bench.data.tokenizer import PUNCTUATION_MAP, load_tokenizer, save_tokenizer, tokenizer_hash, train_tokenizer
from antlm_bench.errors import UserError
from antlm_bench.progress import line_printer
from antlm_bench.recipes import Recipe, ResolvedPreset

CLEANING_VERSION = "antlm-clean-1"  # bump when clean_line or the selection changes: old caches stop matching
PACKING_VERSION = "antlm-pack-1"
_PUNCTUATION_TABLE = str.maketrans(PUNCTUATION_MAP)

Progress = Callable[[str], None] | bool | None  # a function that shows one line, True (stderr), or False/None


def default_prepared_dir() -> Path:
    """Where prepared corpora and tokenizers are cached: ``~/.cache/antlm-bench/prepared``."""
    return default_cache_dir().parent / "prepared"


def default_corpus_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The shipped pre-training sample, ``<data dir>/pretrain_sample``."""
    return resolve_data_dir(data_dir) / "pretrain_sample"


def clean_line(line: str) -> str:
    line = unicodedata.normalize("NFKC", line).translate(_PUNCTUATION_TABLE)
    return " ".join(line.split())


# -- reading: every pass over the text streams it, through a spool file -----------------------------------------------

_READ_BYTES = 1 << 20  # bytes of a corpus file decoded at a time (as text: up to 4 MB a block, and its lines)
_SPOOL_BYTES = 1 << 22  # bytes of a spool (or a packed array) read at a time
_DIGEST_BYTES = 16  # de-duplication compares 128-bit BLAKE2b digests of the cleaned lines, not the lines
_DEDUP_PARTS = 16  # the duplicate search sorts one part of the digests at a time: its temporaries stay small
_ROWS_AT_ONCE = 1 << 16  # per-line numbers turned into Python ints this many at a time


def _raw_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 file as ``str.splitlines`` cuts them (each keeps its line break, which cleaning drops
    as whitespace), decoded a block at a time."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, carry = 0, ""
    with open(path, "rb") as handle:
        while True:
            block = handle.read(_READ_BYTES)
            pending = len(decoder.getstate()[0])  # bytes of a character the previous block cut in two
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as err:
                raise UserError(f"{path}: not UTF-8 text (byte {offset - pending + err.start}); "
                                f"convert the file to UTF-8") from None
            offset += len(block)
            pieces = (carry + text).splitlines(keepends=True)
            # the last piece may go on in the next block (its "\r" may be half of a "\r\n"): it waits for it
            carry = pieces.pop() if block and pieces else ""
            yield from pieces
            if not block:
                return


def _spool_blocks(spool: IO[bytes], start: int, end: int) -> Iterator[bytes]:
    """Bytes ``[start, end)`` of a spool, a block at a time (``pread``: two readers never move each other's place)."""
    position = start
    while position < end:
        block = os.pread(spool.fileno(), min(_SPOOL_BYTES, end - position), position)
        if not block:
            raise OSError(f"the corpus spool ended at byte {position} of {end}")
        position += len(block)
        yield block


def _spool_lines(spool: IO[bytes], start: int, end: int) -> Iterator[bytes]:
    """The lines (without their newline) stored in bytes ``[start, end)`` of a spool; a span ends with a newline."""
    carry = b""
    for block in _spool_blocks(spool, start, end):
        lines = (carry + block).split(b"\n")
        carry = lines.pop()
        yield from lines


def _row_values(values: np.ndarray) -> Iterator[int]:
    """``values.tolist()`` a slice at a time: a list of every line's number would outgrow the arrays."""
    for begin in range(0, len(values), _ROWS_AT_ONCE):
        yield from values[begin:begin + _ROWS_AT_ONCE].tolist()


@dataclass
class _Spooled:
    """Every cleaned line of a corpus folder on a spool, with each line's digest and word count."""

    spool: IO[bytes]
    byte_spans: dict[str, tuple[int, int]]  # each source's bytes on the spool, in file order
    line_spans: dict[str, tuple[int, int]]  # each source's line numbers
    digests: np.ndarray  # [n_lines, 2] uint64: the 128-bit digest of each line
    words: np.ndarray  # [n_lines] int32


def _spool_file() -> IO[bytes]:
    # unnamed (O_TMPFILE on Linux): it goes when it is closed or the process ends, a kill included
    return tempfile.TemporaryFile(prefix="antlm-corpus-")


def _spool_cleaned(files: list[Path]) -> _Spooled:
    """Pass 1: clean each file's lines onto a spool; memory holds 20 bytes a line (its digest and word count)."""
    spool = _spool_file()
    try:
        digests, words = bytearray(), array.array("i")
        byte_spans: dict[str, tuple[int, int]] = {}
        line_spans: dict[str, tuple[int, int]] = {}
        for path in files:
            first_byte, first_line, blank = spool.tell(), len(words), True
            for raw in _raw_lines(path):
                line = clean_line(raw)
                if not line:
                    blank = blank and not raw.strip()
                    continue
                blank = False
                data = line.encode("utf-8")
                spool.write(data + b"\n")
                digests += hashlib.blake2b(data, digest_size=_DIGEST_BYTES).digest()
                words.append(line.count(" ") + 1)  # a cleaned line has one space between words
            if blank:  # a source of no text: its share of the corpus, or its heldout subtask, is nothing
                raise UserError(f"{path}: no text (the file is empty or blank); remove it or put its text back")
            byte_spans[path.stem] = (first_byte, spool.tell())
            line_spans[path.stem] = (first_line, len(words))
        spool.flush()
        return _Spooled(spool, byte_spans, line_spans, np.frombuffer(digests, np.uint64).reshape(-1, 2),
                        np.frombuffer(words, np.int32) if len(words) else np.zeros(0, np.int32))
    except BaseException:
        spool.close()
        raise


def _first_occurrences(digests: np.ndarray) -> np.ndarray:
    """True for each line whose digest no earlier line has (the first occurrence of a duplicated line stays)."""
    keep = np.zeros(len(digests), dtype=bool)
    part_of = (digests[:, 0] % _DEDUP_PARTS).astype(np.uint8)
    for part in range(_DEDUP_PARTS):
        rows = np.flatnonzero(part_of == part)
        keys = digests[rows]
        order = np.lexsort((keys[:, 1], keys[:, 0]))  # stable: equal digests stay in line order
        keys = keys[order]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = (keys[1:] != keys[:-1]).any(axis=1)
        keep[rows[order[first]]] = True
    return keep


def _shares(words: dict[str, int], max_words: int) -> dict[str, int]:
    """Split ``max_words`` over the sources in proportion to their sizes (largest remainders get the rest)."""
    total = sum(words.values())
    exact = {name: max_words * count / total for name, count in words.items()}
    shares = {name: int(value) for name, value in exact.items()}
    leftover = max_words - sum(shares.values())
    for name in sorted(exact, key=lambda n: (shares[n] - exact[n], n))[:leftover]:
        shares[name] += 1
    return shares


def _sample(take: np.ndarray, share: int, rng: random.Random) -> None:
    """Cut a source whose lines keep ``take`` words each (0: dropped) to ``share`` words, in place: its lines are
    drawn in a seeded random order until the share is full, the last one cut at a word."""
    rows = np.flatnonzero(take)
    order = array.array("q", range(len(rows)))
    rng.shuffle(order)  # the permutation random.shuffle gives any sequence of this length (a list of line numbers)
    drawn = rows[np.frombuffer(order, np.int64)] if len(rows) else rows
    filled = np.cumsum(take[drawn])
    n_drawn = 0 if share <= 0 else min(int(np.searchsorted(filled, share)) + 1, len(drawn))
    kept = np.zeros_like(take)
    kept[drawn[:n_drawn]] = take[drawn[:n_drawn]]
    if n_drawn and filled[n_drawn - 1] > share:
        kept[drawn[n_drawn - 1]] -= filled[n_drawn - 1] - share
    take[:] = kept


def _respool(spooled: _Spooled, take: np.ndarray) -> tuple[IO[bytes], dict[str, tuple[int, int]]]:
    """Pass 2: the lines that stay, each cut to its ``take`` words, onto a new spool."""
    spool = _spool_file()
    try:
        spans = {}
        for name, (first, last) in spooled.line_spans.items():
            start = spool.tell()
            lines = _spool_lines(spooled.spool, *spooled.byte_spans[name])
            for line, keep, words in zip(lines, _row_values(take[first:last]),
                                         _row_values(spooled.words[first:last]), strict=True):
                if keep == words:
                    spool.write(line + b"\n")
                elif keep:
                    spool.write(b" ".join(line.split(b" ")[:keep]) + b"\n")
            spans[name] = (start, spool.tell())
        spool.flush()
        return spool, spans
    except BaseException:
        spool.close()
        raise


@dataclass
class CleanCorpus:
    """The cleaned text of a corpus folder, kept on disk, not in memory: an unnamed temporary file (gone when
    closed, or when the process ends, however it ends) holds the lines, one a line in UTF-8, the sources one after
    another in file order. Close it (or use it as a context manager) when done."""

    spool: IO[bytes]
    spans: dict[str, tuple[int, int]]  # each source's bytes on the spool, in file order
    n_words: dict[str, int]
    n_lines: dict[str, int]
    data_hash: str
    n_duplicates: int = 0
    files: list[Path] = field(default_factory=list)

    @property
    def sources(self) -> list[str]:
        """The source names (file stems), in file order."""
        return list(self.spans)

    @property
    def n_bytes(self) -> int:
        return sum(end - start for start, end in self.spans.values())

    def lines(self, source: str | None = None) -> Iterator[str]:
        """The lines of one source, or of every source in file order, read from the spool as they are wanted."""
        for name in self.spans if source is None else [source]:
            for line in _spool_lines(self.spool, *self.spans[name]):
                yield line.decode("utf-8")

    def close(self) -> None:
        self.spool.close()

    def __enter__(self) -> CleanCorpus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def _hash_spool(spool: IO[bytes], spans: dict[str, tuple[int, int]]) -> str:
    """sha256 of the cleaning version and each source's name and lines (``line\\n`` each), sources by name."""
    digest = hashlib.sha256(CLEANING_VERSION.encode())
    for name in sorted(spans):
        digest.update(b"\x00source\x00" + name.encode() + b"\x00")
        for block in _spool_blocks(spool, *spans[name]):
            digest.update(block)
    return digest.hexdigest()


def read_corpus(corpus_dir: str | os.PathLike, split: str = "train", max_words: int | None = None,
                seed: int = 0) -> CleanCorpus:
    """Read, clean, de-duplicate and (with ``max_words``) proportionally sample a corpus folder, streaming: the text
    goes to a spool file, and memory holds some 26 bytes a line while reading (a line's digest, word count and
    words kept: a 100M-word corpus of 10-word lines, about 260 MB), nothing that grows with the text itself."""
    if max_words is not None and max_words <= 0:
        raise UserError(f"--max-words {max_words}: must be a positive number of words")
    files = find_corpus_files(corpus_dir, split)
    spooled = _spool_cleaned(files)
    try:
        take = np.where(_first_occurrences(spooled.digests), spooled.words, 0)  # the words each line keeps
        n_duplicates = int(len(take) - np.count_nonzero(take))
        source_words = {name: int(take[first:last].sum()) for name, (first, last) in spooled.line_spans.items()}
        if max_words is not None and max_words < sum(source_words.values()):
            shares = _shares(source_words, max_words)
            for name, (first, last) in spooled.line_spans.items():
                # one generator per source, seeded by name: adding a source does not reshuffle the others
                _sample(take[first:last], shares[name], random.Random(f"{seed}:{name}"))
        if np.array_equal(take, spooled.words):
            spool, spans = spooled.spool, spooled.byte_spans
        else:
            spool, spans = _respool(spooled, take)
            spooled.spool.close()
        n_words = {name: int(take[first:last].sum()) for name, (first, last) in spooled.line_spans.items()}
        n_lines = {name: int(np.count_nonzero(take[first:last])) for name, (first, last) in spooled.line_spans.items()}
        return CleanCorpus(spool, spans, n_words, n_lines, _hash_spool(spool, spans), n_duplicates, files)
    except BaseException:
        spooled.spool.close()
        raise


@dataclass
class PackedCorpus:
    """Token blocks for training: ``input_ids`` int32 [N, seq_len], ``word_starts`` bool [N, seq_len], memory-mapped
    from the cache (the pages are read as training asks for them).

    ``word_starts`` is True where a token begins a word (special tokens count as one-token words), for whole-word
    and span masking. ``source_words`` and ``n_duplicates`` describe the cleaned text the blocks were packed from.
    """

    input_ids: np.ndarray
    word_starts: np.ndarray
    data_hash: str
    tokenizer_hash: str
    seq_len: int
    n_words: int
    cache_path: Path | None = None
    from_cache: bool = False
    source_words: dict[str, int] = field(default_factory=dict)
    n_duplicates: int = 0

    @property
    def n_tokens(self) -> int:
        return int(self.input_ids.size)

    @property
    def n_sequences(self) -> int:
        return int(self.input_ids.shape[0])


# -- packing: tokenized a batch at a time, on every core, written to disk as it comes ----------------------------------

# characters per encode_batch call: enough lines to keep every core busy (one line is one core's work), few
# enough that the batch's Encodings (some 100 bytes a token) stay some 50 MB
_TOKENIZE_CHARS = 1 << 21


def _pack_batch(encodings: list, bos: int | None, eos: int) -> tuple[np.ndarray, np.ndarray]:
    """``<s> line </s>`` for each encoded line, concatenated: (token ids int32, word starts bool)."""
    lengths = np.fromiter((len(encoding) for encoding in encodings), np.int64, len(encodings))
    n_tokens = int(lengths.sum())
    ids = np.fromiter(chain.from_iterable(encoding.ids for encoding in encodings), np.int32, n_tokens)
    # a token begins a word where its word id changes (None, a special token, reads as -1); each line's first does
    words = np.nan_to_num(np.array(list(chain.from_iterable(e.word_ids for e in encodings)), np.float64), nan=-1.0)
    starts = np.ones(n_tokens, dtype=bool)
    starts[1:] = words[1:] != words[:-1]
    firsts = np.cumsum(lengths) - lengths
    starts[firsts[lengths > 0]] = True
    head = 0 if bos is None else 1
    per_line = head + 1  # the specials around each line
    begins = firsts + np.arange(len(lengths)) * per_line  # where each line's <s> (or first token) lands
    placed = np.arange(n_tokens) + np.repeat(np.arange(len(lengths)) * per_line + head, lengths)
    out_ids = np.empty(n_tokens + per_line * len(lengths), dtype=np.int32)
    out_starts = np.ones(len(out_ids), dtype=bool)
    out_ids[placed], out_starts[placed] = ids, starts
    if bos is not None:
        out_ids[begins] = bos
    out_ids[begins + head + lengths] = eos
    return out_ids, out_starts


def _token_batches(lines: Iterable[str], tokenizer: PreTrainedTokenizerFast,
                   ) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """The stream ``<s> line </s> <s> line </s> ...``, a batch of lines at a time: (token ids int32, word starts
    bool, characters read). The tokenizers library encodes a batch's lines on every core the process may use."""
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if eos is None:
        raise UserError("the tokenizer has no EOS token; packing needs one between lines")
    # the backend directly: no length warnings for long lines, and the specials are ours to place
    backend = tokenizer.backend_tokenizer
    batch: list[str] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if size >= _TOKENIZE_CHARS:
            yield *_pack_batch(backend.encode_batch(batch, add_special_tokens=False), bos, eos), size
            batch, size = [], 0
    if batch:
        yield *_pack_batch(backend.encode_batch(batch, add_special_tokens=False), bos, eos), size


def tokenize_lines(lines: Iterable[str], tokenizer: PreTrainedTokenizerFast) -> tuple[np.ndarray, np.ndarray]:
    """All lines as one stream ``<s> line </s> <s> line </s> ...`` in memory: (token ids int32, word starts bool).
    For a few lines (a heldout source); ``prepare_corpus`` writes a corpus's stream to disk as it comes."""
    parts = list(_token_batches(lines, tokenizer))
    if not parts:
        return np.zeros(0, np.int32), np.zeros(0, bool)
    return np.concatenate([ids for ids, _, _ in parts]), np.concatenate([starts for _, starts, _ in parts])


def _packed_key(data_hash: str, tok_hash: str, seq_len: int) -> str:
    return hashlib.sha256(f"{PACKING_VERSION}:{data_hash}:{tok_hash}:{seq_len}".encode()).hexdigest()[:32]


class PackedManifest(BaseModel):
    """``packed.json`` of a cache entry: what the two arrays are and their sha256, checked before they are used."""

    model_config = ConfigDict(extra="forbid")

    packing: str
    data_hash: str
    tokenizer_hash: str
    seq_len: int = PydanticField(ge=2)
    n_sequences: int = PydanticField(ge=1)
    input_ids_sha256: str
    word_starts_sha256: str


_ARRAYS = {"input_ids": np.dtype(np.int32), "word_starts": np.dtype(np.bool_)}


def _load_packed(folder: Path, manifest: PackedManifest) -> tuple[np.ndarray, np.ndarray] | None:
    """The entry's arrays, memory-mapped, if every file is there, a regular file, and what ``packed.json`` says
    (``manifest``: what this run expects); None for a missing or damaged entry."""
    files = [folder / "packed.json", *(folder / f"{name}.npy" for name in _ARRAYS)]
    if folder.is_symlink() or any(path.is_symlink() or not path.is_file() for path in files):
        return None
    try:
        stored = PackedManifest.model_validate_json(files[0].read_bytes())
        arrays = [np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in _ARRAYS]
        sums = [sha256_file(folder / f"{name}.npy", _SPOOL_BYTES) for name in _ARRAYS]
    except (OSError, ValueError, EOFError):  # pydantic's ValidationError is a ValueError
        return None
    expected = manifest.model_copy(update={"n_sequences": stored.n_sequences, "input_ids_sha256": sums[0],
                                           "word_starts_sha256": sums[1]})
    shape = (stored.n_sequences, manifest.seq_len)
    if stored != expected or any(a.shape != shape or a.dtype != d for a, d in zip(arrays, _ARRAYS.values())):
        return None
    return arrays[0], arrays[1]


_NPY_HEADER_BYTES = 128  # a .npy header of a 2-D shape: numpy pads it to 128 bytes for any realistic sizes


def _npy_header(shape: tuple[int, int], dtype: np.dtype) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape})
    header = buffer.getvalue()
    if len(header) != _NPY_HEADER_BYTES:
        raise RuntimeError(f"a .npy header of shape {shape} takes {len(header)} bytes, not {_NPY_HEADER_BYTES}")
    return header


def _finish_npy(path: Path, shape: tuple[int, int], dtype: np.dtype) -> Path:
    """Make the stream written after a blank header at ``path`` a ``.npy`` of ``shape``: the header written, the
    tokens past the last whole block cut off (no copy of the stream)."""
    with open(path, "r+b") as handle:
        handle.write(_npy_header(shape, dtype))
        handle.truncate(_NPY_HEADER_BYTES + math.prod(shape) * dtype.itemsize)
    return path


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _publish(staging: Path, folder: Path, manifest: PackedManifest) -> None:
    """Rename the finished ``staging`` folder to ``folder``: a reader sees the old entry or the new one, whole."""
    try:
        os.replace(staging, folder)  # onto a missing name (or an empty folder)
        return
    except OSError:
        if _load_packed(folder, manifest) is not None:  # another process finished the same entry first
            return
    # a damaged entry, or a file or link where the entry belongs: moved aside (never written through), replaced
    aside = folder.with_name(f".{folder.name}.tmp-{temporary_tag()}-damaged.tmp")
    os.replace(folder, aside)
    os.replace(staging, folder)
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)


def _write_stream(corpus: CleanCorpus, tokenizer: PreTrainedTokenizerFast, staging: Path,
                  say: Callable[[str], None]) -> int:
    """Tokenize the corpus onto ``staging/{input_ids,word_starts}.npy``, after room for their headers; returns the
    number of tokens."""
    total, done, shown, n_tokens = corpus.n_bytes, 0, 0, 0
    with open(staging / "input_ids.npy", "wb") as ids_out, open(staging / "word_starts.npy", "wb") as starts_out:
        ids_out.write(bytes(_NPY_HEADER_BYTES))
        starts_out.write(bytes(_NPY_HEADER_BYTES))
        for ids, starts, size in _token_batches(corpus.lines(), tokenizer):
            ids_out.write(ids.tobytes())
            starts_out.write(starts.tobytes())
            n_tokens += len(ids)
            done += size
            if total > 10 * _TOKENIZE_CHARS and 10 * done // total > shown and done < total:
                shown = 10 * done // total
                say(f"packing: {10 * shown}% of the text tokenized ({n_tokens:,} tokens)")
    return n_tokens


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
    """Clean, tokenize and pack ``corpus_dir`` into ``[N, seq_len]`` blocks, cached by content hash. Streams: the
    token stream goes to disk a batch at a time, so memory does not grow with the corpus (without ``cache_dir`` the
    blocks go to a temporary folder, removed once they are mapped)."""
    say = line_printer(progress)
    if seq_len < 2:
        raise UserError(f"sequence length {seq_len}: must be at least 2")
    if corpus is None:
        with read_corpus(corpus_dir, split, max_words, seed) as owned:
            return prepare_corpus(corpus_dir, tokenizer, seq_len, cache_dir=cache_dir, corpus=owned,
                                  progress=progress)
    tok_hash = tokenizer_hash(tokenizer)
    key = _packed_key(corpus.data_hash, tok_hash, seq_len)
    expected = PackedManifest(packing=PACKING_VERSION, data_hash=corpus.data_hash, tokenizer_hash=tok_hash,
                              seq_len=seq_len, n_sequences=1, input_ids_sha256="", word_starts_sha256="")

    def packed(arrays: tuple[np.ndarray, np.ndarray], where: Path | None, reused: bool) -> PackedCorpus:
        return PackedCorpus(*arrays, corpus.data_hash, tok_hash, seq_len, sum(corpus.n_words.values()), where, reused,
                            dict(corpus.n_words), corpus.n_duplicates)

    folder = None if cache_dir is None else Path(cache_dir) / "packed" / key
    if folder is not None:
        reused = _load_packed(folder, expected)
        if reused is not None:
            say(f"packing: reused {folder}")
            return packed(reused, folder, True)
        folder.parent.mkdir(parents=True, exist_ok=True)
    parent = Path(tempfile.gettempdir()) if folder is None else folder.parent
    remove_stale(parent, f".{key}.tmp-*.tmp")  # what a killed packing of these blocks left
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{key}.tmp-{temporary_tag()}-", suffix=".tmp"))
    try:
        clock = time.perf_counter()
        say(f"packing: tokenizing {sum(corpus.n_lines.values()):,} lines into sequences of {seq_len} ...")
        n_tokens = _write_stream(corpus, tokenizer, staging, say)
        n_blocks = n_tokens // seq_len
        if n_blocks == 0:
            raise UserError(
                f"corpus {corpus_dir}: {n_tokens} tokens, fewer than one sequence of {seq_len}; give more text"
            )
        say(f"packing: {n_blocks:,} sequences, {n_blocks * seq_len:,} tokens ({time.perf_counter() - clock:.1f} s)")
        sums = [sha256_file(_finish_npy(staging / f"{name}.npy", (n_blocks, seq_len), dtype), _SPOOL_BYTES)
                for name, dtype in _ARRAYS.items()]
        manifest = expected.model_copy(update={"n_sequences": n_blocks, "input_ids_sha256": sums[0],
                                               "word_starts_sha256": sums[1]})
        (staging / "packed.json").write_text(manifest.model_dump_json(indent=1) + "\n", encoding="utf-8")
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes 0700; a cache entry should read like any folder
        if folder is not None:
            _publish(staging, folder, expected)
        arrays = _load_packed(staging if folder is None else folder, expected)
        if arrays is None:
            raise OSError(f"{folder or staging}: the packed arrays just written do not read back")
        return packed(arrays, folder, False)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # without a cache the mapped arrays outlive their folder


def _tokenizer_key(recipe: Recipe, vocab_size: int, max_length: int, data_hash: str) -> str:
    spec = recipe.tokenizer
    text = f"{spec.kind}:{vocab_size}:{spec.min_frequency}:{spec.lowercase}:{max_length}:{data_hash}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def recipe_tokenizer(resolved: ResolvedPreset, corpus: CleanCorpus,
                     cache_dir: str | os.PathLike | None, progress: Progress = None) -> PreTrainedTokenizerFast:
    """The recipe's BPE at the preset's vocabulary size, trained on ``corpus`` or loaded from the cache."""
    recipe, preset = resolved.recipe, resolved.spec
    say = line_printer(progress)

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
        save_tokenizer(tokenizer, staging)
        try:
            os.replace(staging, folder)
        except OSError:  # another process finished the same tokenizer first: theirs is identical
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tokenizer


def training_words(preset: ResolvedPreset, max_words: int | None) -> int | None:
    """The word cap a run trains under: ``--max-words``, else the preset's (None: the whole corpus)."""
    return max_words if max_words is not None else preset.spec.max_words


def training_data_hash(corpus_dir: str | os.PathLike, preset: ResolvedPreset, max_words: int | None) -> str:
    """The ``data_hash`` a run of a recipe at ``preset`` would train on (the cleaned text after the word cap, as
    ``prepare_training_data`` reads it): what reuse compares with a finished run's, without tokenizing."""
    with read_corpus(corpus_dir, "train", training_words(preset, max_words)) as corpus:
        return corpus.data_hash


def prepare_training_data(
    corpus_dir: str | os.PathLike,
    preset: ResolvedPreset,
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
    cache_dir = default_prepared_dir() if cache_dir is None else cache_dir
    words = training_words(preset, max_words)
    say = line_printer(progress)
    clock = time.perf_counter()
    # one line after reading, not one before: a bad corpus folder then prints its error line alone
    with read_corpus(corpus_dir, split, words, seed) as corpus:
        n_words = sum(corpus.n_words.values())
        say(f"corpus: read {corpus_dir} ({split}" + (f", up to {words:,} words" if words else "") + f"): "
            f"{len(corpus.sources)} sources, {n_words:,} words, {corpus.n_duplicates:,} duplicate lines dropped "
            f"({time.perf_counter() - clock:.1f} s)")
        tokenizer = recipe_tokenizer(preset, corpus, cache_dir, progress=say)
        packed = prepare_corpus(corpus_dir, tokenizer, preset.spec.max_seq_len, cache_dir=cache_dir, corpus=corpus,
                                progress=say)
    return tokenizer, packed


def describe(packed: PackedCorpus) -> dict[str, object]:
    """A JSON-able summary for the CLI and logs."""
    return {
        "sources": packed.source_words, "words": packed.n_words, "duplicates_dropped": packed.n_duplicates,
        "tokens": packed.n_tokens, "sequences": packed.n_sequences, "seq_len": packed.seq_len,
        "data_hash": packed.data_hash, "tokenizer_hash": packed.tokenizer_hash,
        "cache": str(packed.cache_path) if packed.cache_path else None, "from_cache": packed.from_cache,
    }


__all__ = [
    "CLEANING_VERSION", "CleanCorpus", "PackedCorpus", "clean_line", "default_corpus_dir", "default_prepared_dir",
    "describe", "find_corpus_files", "prepare_corpus", "prepare_training_data", "read_corpus", "recipe_tokenizer",
    "tokenize_lines",
]
