"""Reading the results store: the committed events in name order, the latest row for every key."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from antlm_bench.data.readers import read_json
from antlm_bench.errors import UserError, one_line, validation_line
from antlm_bench.results.store.layout import (
    DATA_DIGESTS,
    EVENT_PART,
    ITEM_GROUP,
    ITEM_KEY,
    ITEMS_CONTENT,
    ITEMS_PART,
    PART,
    READ_VERSIONS,
    SCORE_KEY,
    STORE,
    _events,
)
from antlm_bench.results.tables import ITEM_SCHEMA, SCORE_SCHEMA

T = TypeVar("T")

# -- reading ----------------------------------------------------------------------------------------------------


@dataclass
class StoredResults:
    """One results folder read back: the standing scores, the items that go with them, the events read."""

    source: Path  # the store folder
    scores: pa.Table
    items: pa.Table | None  # None when no event logged items
    events: list[str] = field(default_factory=list)
    digest: str | None = None  # store_digest of the bytes read, when asked for


def find_results(paths: Sequence[str | Path]) -> list[Path]:
    """Every results store in the given folders (a store, or folders holding stores), sorted.

    A missing path, or nothing found at all, is a UserError; so is a file where a store should be
    (``read_results_folder`` says which).
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_file() or (path.is_dir() and path.name == STORE):
            found.append(path)
        elif path.is_dir():
            found.extend(p for p in path.rglob(STORE) if not _inside_store(p, path))
        else:
            raise UserError(f"results {path}: no such file or folder")
    if not found:
        where = ", ".join(str(p) for p in paths) or "(none given)"
        raise UserError(f"no {STORE} found under {where}; run `antlm-bench eval` or give the run folders")
    return sorted(dict.fromkeys(found))


# What a committed board leaves out of a run's items (leaderboards/export_runs.py): the evaluation text, which is never
# committed (the data's terms), and GLUE's per-example predictions, which no statistic reads. ``store_digest``
# covers everything else, so a decision made on a run folder is verified on its export.
EVALUATION_TEXT = ("context", "sentence_good", "sentence_bad")
UNREAD_ITEM_TASKS = ("glue",)


def statistics_items(items: pa.Table) -> pa.Table:
    """``items`` as a board or a decision reads them: without the evaluation text and GLUE's predictions."""
    import pyarrow.compute as pc

    if "task" in items.column_names:
        unread = pc.is_in(items["task"], pa.array(UNREAD_ITEM_TASKS))
        if pc.any(unread).as_py():  # a filter copies every column: only when there is something to leave out
            items = items.filter(pc.invert(unread))
    return items.drop_columns([c for c in EVALUATION_TEXT if c in items.column_names])


def store_digest(source: str | Path) -> str:
    """sha256 over a results folder's committed tables (each event's name, its scores part's bytes and its items'
    content as :func:`statistics_items` gives them, oldest first): what a record computed from the tables names
    them by (a sweep's decision.json), so a reader can tell when they changed since. The items enter by content,
    column by column, not by their file's bytes: an export that drops the evaluation text and re-encodes the
    numbers losslessly keeps the digest. A folder without a store gives the digest of nothing.

    A command that also reads the tables gets this digest from the same read (``StoreReader.digest``)."""
    source = Path(source)
    store = source if source.name == STORE else source / STORE
    return _read_store(store, with_items=False, with_digest=True, checked=False).digest or ""


def _content_digest(table: pa.Table) -> bytes:
    """sha256 of a table's values, column by column in name order (name, type, null mask, values): equal for two
    files that hold the same values whatever their encoding (dictionary, byte-stream split, compression).

    A text column enters as its values joined by U+001F (a null as ""), built from the column's own buffers rather
    than one Python string per value: the same bytes, a hundred times faster on a store of 3M items."""
    import hashlib

    import numpy as np
    import pyarrow.compute as pc

    digest = hashlib.sha256()
    for name in sorted(table.column_names):
        column = table[name]
        kind = column.type
        digest.update(f"{name}\0{kind}\0".encode())
        digest.update(np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool).tobytes())
        if pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind):
            values = pc.fill_null(column, False if pa.types.is_boolean(kind) else 0)
            digest.update(np.ascontiguousarray(values.to_numpy(zero_copy_only=False)).tobytes())
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            digest.update(_joined_text(column))
        else:
            digest.update("\x1f".join("" if v is None else str(v) for v in column.to_pylist()).encode())
    return digest.digest()


def _joined_text(column: pa.ChunkedArray) -> bytes:
    """``"\x1f".join(values).encode()`` of a text column (a null as ""), from its offsets and data buffers."""
    import numpy as np
    import pyarrow.compute as pc

    array = pc.fill_null(column, "").combine_chunks() if column.num_chunks != 1 or column.null_count \
        else column.chunk(0)
    n = len(array)
    if n == 0:
        return b""
    width = np.int64 if pa.types.is_large_string(array.type) else np.int32
    offsets = np.frombuffer(array.buffers()[1], dtype=width, count=n + 1, offset=array.offset * np.dtype(width).itemsize)
    data = array.buffers()[2]
    text = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    first, last = int(offsets[0]), int(offsets[-1])
    out = np.empty(last - first + n - 1, dtype=np.uint8)
    separators = offsets[1:-1].astype(np.int64) - first + np.arange(n - 1)
    keep = np.ones(out.size, dtype=bool)
    keep[separators] = False
    out[keep] = text[first:last]
    out[separators] = 0x1F
    return out.tobytes()


def _inside_store(path: Path, root: Path) -> bool:
    """Whether ``path`` lies inside another store folder (never a results folder of its own)."""
    return any(parent.name == STORE for parent in path.relative_to(root).parents if parent.name)


# the columns a part must hold itself: reading with the schema fills a missing column with nulls, and an items
# table without ``correct`` would then change intervals and p-values instead of being refused
REQUIRED = {"scores": ("run_id", "task", "subtask", "metric", "value", "scoring"),
            "items": ("run_id", "task", "subtask", "item_id", "correct")}


def _read(path: Path, schema: pa.Schema, what: str, data: bytes | None = None) -> pa.Table:
    """One part read with ``schema`` (``data``: its bytes, when the caller already holds them)."""
    source = path if data is None else pa.BufferReader(data)
    try:
        present = set(pq.read_schema(source).names)
        missing = [column for column in REQUIRED[what] if column not in present]
        if missing:
            raise UserError(f"{path}: the {what} table lacks column {', '.join(missing)}; the results are "
                            "damaged, re-run the evaluation")
        return pq.read_table(source, schema=schema)
    except (pa.ArrowException, OSError) as err:
        raise UserError(f"{path}: not a readable {what} table ({one_line(err)}); re-run the evaluation") from None


def key_codes(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """One int64 per row, equal exactly where the rows' values in ``columns`` are equal (null equals null): the
    key of every row at once, from each column's dictionary codes."""
    codes = np.zeros(table.num_rows, dtype=np.int64)
    size = 1
    for name in columns:
        encoded = pc.dictionary_encode(table[name].combine_chunks(), null_encoding="encode")
        cardinality = max(1, len(encoded.dictionary))
        if size * cardinality >= 2**62:  # compact before the product could overflow
            _, codes = np.unique(codes, return_inverse=True)
            codes = codes.astype(np.int64)
            size = int(codes.max(initial=0)) + 1
        codes = codes * cardinality + encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        size *= cardinality
    return codes


def _last_rows(codes: np.ndarray) -> np.ndarray:
    """The row of the last occurrence of every key, in the order those rows were written (ascending)."""
    if codes.size == 0:
        return np.zeros(0, dtype=np.int64)
    _, first_from_end = np.unique(codes[::-1], return_index=True)
    return np.sort(codes.size - 1 - first_from_end)


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _standing_items(scores: pa.Table, score_event: np.ndarray, picks: np.ndarray,
                    item_tables: list[pa.Table | None]) -> pa.Table:
    """The items that go with the standing scores (the rule in the package docstring), every step a column
    operation: which (event, group) still stands is decided once per group, never per item."""
    kept_scores = scores.take(pa.array(picks, pa.int64())).select(list(ITEM_GROUP)).to_pylist()
    # (event, run, checkpoint, phase, scoring, task, subtask) whose score row still stands; items of a subtask no
    # score row names (none do today) go with their task's standing rows
    standing = {(int(score_event[p]), *row.values()) for p, row in zip(picks, kept_scores)}
    standing_tasks = {key[:-1] for key in standing}
    scored = {key[1:] for key in standing}
    present = [(t, table) for t, table in enumerate(item_tables) if table is not None and table.num_rows]
    if not present:
        return ITEM_SCHEMA.empty_table()
    items = pa.concat_tables([table for _, table in present])
    item_event = np.concatenate([np.full(table.num_rows, t, dtype=np.int64) for t, table in present])
    # one code per (event, group): the groups are few (an event holds one task at one checkpoint)
    group_of_row = key_codes(items, ITEM_GROUP)
    group_codes = group_of_row * len(item_tables) + item_event
    distinct, first, inverse = np.unique(group_codes, return_index=True, return_inverse=True)
    keys = items.take(pa.array(first, pa.int64())).select(list(ITEM_GROUP)).to_pylist()
    events = item_event[first]
    kept = np.array([(t, *key.values()) in standing
                     or (tuple(key.values()) not in scored and (t, *tuple(key.values())[:-1]) in standing_tasks)
                     for t, key in zip(events.tolist(), keys)], dtype=bool)
    # a group's items come from one event: the latest that still stands for it
    owner: dict[tuple, int] = {}
    for t, key, keep in zip(events.tolist(), keys, kept):
        if keep:
            owner[tuple(key.values())] = max(owner.get(tuple(key.values()), -1), t)
    chosen_group = kept & np.array([owner.get(tuple(key.values())) == t for t, key in zip(events.tolist(), keys)],
                                   dtype=bool)
    if chosen_group.all():
        chosen = items
    else:
        keep = chosen_group[inverse.reshape(-1)]
        chosen, group_of_row = items.filter(pa.array(keep, pa.bool_())), group_of_row[keep]
    # the latest record of every ITEM_KEY: its group's code (above) with the codes of the rest of the key
    _, group_rank = np.unique(group_of_row, return_inverse=True)
    rest = key_codes(chosen, ITEM_KEY[len(ITEM_GROUP):])
    return _take_rows(chosen, _last_rows(group_rank.reshape(-1).astype(np.int64) * (int(rest.max(initial=0)) + 1)
                                         + rest))


def _take_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table``'s ``rows`` (ascending); the table itself when they are all of it."""
    if rows.size == table.num_rows:  # ascending and distinct: every row, in order
        return table
    return table.take(pa.array(rows, pa.int64()))


def _store(source: Path) -> Path:
    """The store folder: ``source`` itself, or the store inside a results folder (``out`` -> ``out/scores.parquet``:
    read as a store, a results folder's own files would pass for events); a file in its place is a one-line
    UserError."""
    if source.name != STORE and (source / STORE).is_dir():
        return source / STORE
    if source.is_file():
        raise UserError(f"{source}: a file, not a results store (a folder of events, which antlm-bench writes "
                        "since 0.1.0); re-run the evaluation to write one")
    return source


class EventRecord(BaseModel):
    """The fields of an ``_event.json`` that readers use (``pipeline``'s reuse of a final evaluation, the digests),
    typed; the writer's own fields beside them (settings, versions, timings) are allowed as they are."""

    model_config = ConfigDict(extra="allow", strict=True)

    schema_version: int = 1
    event: str | None = None
    pid: int | None = None
    scores_rows: int | None = Field(None, ge=0)
    items_rows: int | None = Field(None, ge=0)
    kind: str | None = None
    task: str | None = None
    settings: dict[str, Any] | None = None
    spec: str | None = None
    data_sha256: dict[str, str | None] | None = None


def _event_record(event: Path) -> dict[str, Any]:
    """An event's record (``_event.json``; {} for an event committed without one), refused in one line naming the
    file when it is not a JSON object or is written in a layout version this antlm-bench does not know."""
    record_file = event / EVENT_PART
    if not record_file.is_file():
        return {}
    fix = "remove the event folder or re-run the evaluation"
    record = read_json(record_file, "not a readable event record", fix)
    if not isinstance(record, dict):
        raise UserError(f"{record_file}: not an event record (a JSON object); {fix}")
    version = record.get("schema_version", 1)
    try:  # the fields readers use, typed (the writer's own fields beside them are kept as they are)
        EventRecord.model_validate(record)
    except ValidationError as err:
        if version in READ_VERSIONS and not isinstance(version, bool):
            raise UserError(f"{record_file}: not an event record ({validation_line(err)}); {fix}") from None
    if version not in READ_VERSIONS or isinstance(version, bool):
        raise UserError(f"{record_file}: schema_version {version!r}, but this antlm-bench reads versions "
                        f"{', '.join(map(str, READ_VERSIONS))}; read it with the antlm-bench that wrote it, or re-run "
                        "the evaluation")
    if version >= 2:
        digests = record.get(DATA_DIGESTS)
        files = [name for name in (PART, ITEMS_PART) if (event / name).is_file()]
        named = {k: v for k, v in digests.items() if k != ITEMS_CONTENT} if isinstance(digests, dict) else None
        content = digests.get(ITEMS_CONTENT, "") if isinstance(digests, dict) else None
        if named is None or sorted(named) != sorted(files) or not all(
                isinstance(v, str) and _is_sha256(v) for v in named.values()) or not (
                content is None or content == "" or (isinstance(content, str) and _is_sha256(content))):
            raise UserError(f"{record_file}: field {DATA_DIGESTS} does not name the event's data files "
                            f"({', '.join(files) or 'none'}) with their sha256; the event is damaged: {fix}")
    return record


def _is_sha256(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def items_content_digest(items: pa.Table) -> str | None:
    """The hex digest a store digest takes an event's items by (their content as :func:`statistics_items` gives
    them), None when nothing of them is digested; recorded with the event (``DATA_DIGESTS[ITEMS_CONTENT]``) so that
    a reader digests a store without recomputing it."""
    content = statistics_items(items)
    return _content_digest(content).hex() if content.num_rows else None


def _check_bytes(event: Path, name: str, data: bytes, record: dict[str, Any]) -> None:
    """``data`` (the bytes of ``event/name`` just read) are those its record names (version 2 records them)."""
    import hashlib

    expected = (record.get(DATA_DIGESTS) or {}).get(name)
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise UserError(f"{event / name}: not the bytes its event recorded ({EVENT_PART}: {DATA_DIGESTS}); the "
                        "results were edited or damaged since they were written: re-run the evaluation")


@dataclass(frozen=True)
class StoredEvent:
    """One committed event of a store: its folder and its record (what the writer passed to ``commit_results``,
    such as ``run``'s ``kind``, ``task``, ``key`` and ``settings`` of a final evaluation)."""

    folder: Path
    record: dict[str, Any]

    @property
    def name(self) -> str:
        return self.folder.name

    def scores(self) -> pa.Table:
        """Its own score rows (not only the standing ones), read as :func:`read_results_folder` reads them."""
        part = self.folder / PART
        if not part.is_file():
            return SCORE_SCHEMA.empty_table()
        data = _bytes(part, "scores")
        _check_bytes(self.folder, PART, data, self.record)
        return _read(part, SCORE_SCHEMA, "scores", data)


def stored_events(source: str | Path) -> list[StoredEvent]:
    """The committed events of a results folder (or its store), oldest first, each with its record."""
    store = _store(Path(source))
    return [StoredEvent(store / event, _event_record(store / event)) for event in _events(store)]


def read_results_folder(source: str | Path, with_items: bool = True) -> StoredResults:
    """Read one results store, each file once: the latest row of every key and the items that go with them (a
    command that also needs the store's digest reads it through a :class:`StoreReader`)."""
    return _read_store(_store(Path(source)), with_items, with_digest=False)


def _read_store(source: Path, with_items: bool, with_digest: bool, checked: bool = True) -> StoredResults:
    """``checked``: refuse a damaged event record (``store_digest`` alone digests whatever is there)."""
    import hashlib

    events = _events(source)
    digest = hashlib.sha256() if with_digest else None
    score_tables: list[pa.Table] = []
    item_tables: list[pa.Table | None] = []
    for event in events:
        record = _event_record(source / event) if checked else {}
        part = source / event / PART
        items_part = source / event / ITEMS_PART
        if digest is not None:
            digest.update(event.encode() + b"\0")
        data = _bytes(part, "scores") if part.is_file() else None
        if data is not None:
            _check_bytes(source / event, PART, data, record)
        if data is not None and digest is not None:
            digest.update(PART.encode() + b"\0" + hashlib.sha256(data).digest())
        if checked or with_items:
            score_tables.append(_read(part, SCORE_SCHEMA, "scores", data) if data is not None
                                else SCORE_SCHEMA.empty_table())
        if not items_part.is_file() or not (with_items or digest is not None):
            item_tables.append(None)
            continue
        items_data = _bytes(items_part, "items")
        _check_bytes(source / event, ITEMS_PART, items_data, record)
        if digest is None:
            item_tables.append(_read(items_part, ITEM_SCHEMA, "items", items_data))
            continue
        raw = _read_raw(items_part, items_data, "items")  # parsed once: digested as it is, read as the schema
        if ITEMS_CONTENT in record.get(DATA_DIGESTS, {}):
            # recorded when the event was committed, from the bytes just checked against the record
            recorded = record[DATA_DIGESTS][ITEMS_CONTENT]
            if recorded:
                digest.update(ITEMS_PART.encode() + b"\0" + bytes.fromhex(recorded))
        else:
            content = statistics_items(raw)
            if content.num_rows:
                digest.update(ITEMS_PART.encode() + b"\0" + _content_digest(content))
        item_tables.append(_project(items_part, raw, ITEM_SCHEMA, "items") if with_items else None)
    if not (checked or with_items):
        return StoredResults(source, SCORE_SCHEMA.empty_table(), None, events, digest.hexdigest() if digest else None)
    scores_all = _concat(score_tables, SCORE_SCHEMA)
    score_event = np.concatenate([np.full(t.num_rows, e, dtype=np.int64) for e, t in enumerate(score_tables)]) \
        if score_tables else np.zeros(0, dtype=np.int64)
    picks = _last_rows(key_codes(scores_all, SCORE_KEY))
    scores = _take_rows(scores_all, picks)
    items = None
    if with_items and any(t is not None for t in item_tables):
        items = _standing_items(scores_all, score_event, picks, item_tables)
    return StoredResults(source, scores, items, events, digest.hexdigest() if digest is not None else None)


@dataclass(frozen=True)
class ReadStore(Generic[T]):
    """What a :class:`StoreReader` keeps of one store: its standing scores, its digest, and its items only as the
    reader's view of them (an index a board looks cells up in), never the whole items table."""

    source: Path  # the store folder
    scores: pa.Table
    events: tuple[str, ...]
    digest: str
    items: T | None  # the reader's view of the standing items; None when no event logged items


class StoreReader(Generic[T]):
    """One command's reads of results stores: each store read once (its standing scores, items and digest from the
    same bytes), its items kept as ``item_view(items)``. A command makes one at its edge and passes it down, so a
    board, the decision verified under it and the digests it checks share the reads. A store's events are
    immutable and a new one is a new name, so a read is kept under the store's committed event names: a store that
    gained an event since is read again."""

    def __init__(self, item_view: Callable[[pa.Table], T]) -> None:
        self._item_view = item_view
        self._held: dict[Path, ReadStore[T]] = {}

    def read(self, source: str | Path) -> ReadStore[T]:
        """The store at ``source`` (a store or a results folder), read once."""
        store = _store(Path(source))
        key = store.resolve()
        held = self._held.get(key)
        if held is None or held.events != tuple(_events(store)):
            stored = _read_store(store, with_items=True, with_digest=True)
            held = ReadStore(store, stored.scores, tuple(stored.events), stored.digest or "",
                             None if stored.items is None else self._item_view(stored.items))
            self._held[key] = held
        return held

    def digest(self, source: str | Path) -> str:
        """``store_digest(source)``, from the read when the store is readable (a damaged one: digested as it is)."""
        source = Path(source)
        store = source if source.name == STORE else source / STORE
        if store.is_dir():
            try:
                return self.read(store).digest
            except UserError:
                pass
        return store_digest(source)


def _bytes(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise UserError(f"{path}: not a readable {what} table ({err.strerror or err}); re-run the evaluation") from None


def _project(path: Path, raw: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """``raw`` as :func:`_read` reads its file: ``schema``'s columns in its order and types, a column the file lacks
    as nulls (the required ones refused)."""
    missing = [column for column in REQUIRED[what] if column not in raw.column_names]
    if missing:
        raise UserError(f"{path}: the {what} table lacks column {', '.join(missing)}; the results are damaged, "
                        "re-run the evaluation")
    try:
        return pa.table([raw[f.name].cast(f.type) if f.name in raw.column_names else pa.nulls(raw.num_rows, f.type)
                         for f in schema], schema=schema)
    except (pa.ArrowException, OSError) as err:
        raise UserError(f"{path}: not a readable {what} table ({one_line(err)}); re-run the evaluation") from None


def _read_raw(path: Path, data: bytes, what: str) -> pa.Table:
    """A part as its file holds it (its own columns and types): what the digest covers."""
    try:
        return pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as err:
        raise UserError(f"{path}: not a readable {what} table ({one_line(err)}); re-run the evaluation") from None


def read_scores(paths: Sequence[str | Path]) -> pa.Table:
    """The standing score rows of every results folder under ``paths``, as one table."""
    return pa.concat_tables([read_results_folder(p, with_items=False).scores for p in find_results(paths)])
