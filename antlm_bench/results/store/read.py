"""Reading the results store: the committed events in name order, the latest row for every key."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from antlm_bench.data.readers import read_json
from antlm_bench.errors import UserError
from antlm_bench.results.store.layout import (
    EVENT_PART,
    ITEM_GROUP,
    ITEM_KEY,
    ITEMS_PART,
    PART,
    SCHEMA_VERSION,
    SCORE_KEY,
    STORE,
    _events,
)
from antlm_bench.results.tables import ITEM_SCHEMA, SCORE_SCHEMA

# -- reading ----------------------------------------------------------------------------------------------------


@dataclass
class StoredResults:
    """One results folder read back: the standing scores, the items that go with them, the events read."""

    source: Path  # the store folder
    scores: pa.Table
    items: pa.Table | None  # None when no event logged items
    events: list[str] = field(default_factory=list)


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


def score_parts(source: str | Path) -> list[Path]:
    """The Parquet files a store keeps its committed scores in, oldest first."""
    source = _store(Path(source))
    return [source / event / PART for event in _events(source) if (source / event / PART).is_file()]


# What a committed board leaves out of a run's items (leaderboards/export_runs.py): the evaluation text, which is never
# committed (the data's terms), and GLUE's per-example predictions, which no statistic reads. ``store_digest``
# covers everything else, so a decision made on a run folder is verified on its export.
EVALUATION_TEXT = ("context", "sentence_good", "sentence_bad")
UNREAD_ITEM_TASKS = ("glue",)


def statistics_items(items: pa.Table) -> pa.Table:
    """``items`` as a board or a decision reads them: without the evaluation text and GLUE's predictions."""
    import pyarrow.compute as pc

    if "task" in items.column_names:
        items = items.filter(pc.invert(pc.is_in(items["task"], pa.array(UNREAD_ITEM_TASKS))))
    return items.drop_columns([c for c in EVALUATION_TEXT if c in items.column_names])


def store_digest(source: str | Path) -> str:
    """sha256 over a results folder's committed tables (each event's name, its scores part's bytes and its items'
    content as :func:`statistics_items` gives them, oldest first): what a record computed from the tables names
    them by (a sweep's decision.json), so a reader can tell when they changed since. The items enter by content,
    column by column, not by their file's bytes: an export that drops the evaluation text and re-encodes the
    numbers losslessly keeps the digest. A folder without a store gives the digest of nothing."""
    import hashlib

    source = Path(source)
    store = source if source.name == STORE else source / STORE
    digest = hashlib.sha256()
    for event in _events(store):
        digest.update(event.encode() + b"\0")
        part = store / event / PART
        if part.is_file():
            digest.update(PART.encode() + b"\0" + hashlib.sha256(part.read_bytes()).digest())
        items_part = store / event / ITEMS_PART
        items = statistics_items(pq.read_table(items_part)) if items_part.is_file() else None
        if items is not None and items.num_rows:
            digest.update(ITEMS_PART.encode() + b"\0" + _content_digest(items))
    return digest.hexdigest()


def _content_digest(table: pa.Table) -> bytes:
    """sha256 of a table's values, column by column in name order (name, type, null mask, values): equal for two
    files that hold the same values whatever their encoding (dictionary, byte-stream split, compression)."""
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
        else:
            digest.update("\x1f".join("" if v is None else str(v) for v in column.to_pylist()).encode())
    return digest.digest()


def _inside_store(path: Path, root: Path) -> bool:
    """Whether ``path`` lies inside another store folder (never a results folder of its own)."""
    return any(parent.name == STORE for parent in path.relative_to(root).parents if parent.name)


# the columns a part must hold itself: reading with the schema fills a missing column with nulls, and an items
# table without ``correct`` would then change intervals and p-values instead of being refused
REQUIRED = {"scores": ("run_id", "task", "subtask", "metric", "value", "scoring"),
            "items": ("run_id", "task", "subtask", "item_id", "correct")}


def _read(path: Path, schema: pa.Schema, what: str) -> pa.Table:
    try:
        present = set(pq.read_schema(path).names)
        missing = [column for column in REQUIRED[what] if column not in present]
        if missing:
            raise UserError(f"{path}: the {what} table lacks column {', '.join(missing)}; the results are "
                            "damaged, re-run the evaluation")
        return pq.read_table(path, schema=schema)
    except (pa.ArrowException, OSError) as err:
        message = " ".join(str(err).split())
        raise UserError(f"{path}: not a readable {what} table ({message}); re-run the evaluation") from None


def _key_rows(table: pa.Table, columns: Iterable[str]) -> list[tuple]:
    return list(zip(*(table[c].to_pylist() for c in columns))) if table.num_rows else []


def _latest(tables: list[pa.Table], columns: Sequence[str]) -> list[tuple[int, int]]:
    """(table, row) of the last occurrence of every key, in the order those rows were written."""
    last: dict[tuple, tuple[int, int]] = {}
    for t, table in enumerate(tables):
        for r, key in enumerate(_key_rows(table, columns)):
            last.pop(key, None)  # re-insert: dict order becomes the order of each key's latest row
            last[key] = (t, r)
    return list(last.values())


def _take(tables: list[pa.Table], picks: list[tuple[int, int]], schema: pa.Schema) -> pa.Table:
    if not picks:
        return schema.empty_table()
    parts = []
    start = 0
    while start < len(picks):  # runs of rows from one table keep this cheap (take per run, not per row)
        t = picks[start][0]
        end = start
        while end < len(picks) and picks[end][0] == t:
            end += 1
        parts.append(tables[t].take(pa.array([r for _, r in picks[start:end]], pa.int64())))
        start = end
    return pa.concat_tables(parts)


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
    if version != SCHEMA_VERSION:
        raise UserError(f"{record_file}: schema_version {version!r}, but this antlm-bench reads version "
                        f"{SCHEMA_VERSION}; read it with the antlm-bench that wrote it, or re-run the evaluation")
    return record


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
        return _read(part, SCORE_SCHEMA, "scores") if part.is_file() else SCORE_SCHEMA.empty_table()


def stored_events(source: str | Path) -> list[StoredEvent]:
    """The committed events of a results folder (or its store), oldest first, each with its record."""
    store = _store(Path(source))
    return [StoredEvent(store / event, _event_record(store / event)) for event in _events(store)]


def read_results_folder(source: str | Path, with_items: bool = True) -> StoredResults:
    """Read one results store: the latest row of every key, and the items that go with them."""
    source = _store(Path(source))
    events = _events(source)
    score_tables: list[pa.Table] = []
    item_tables: list[pa.Table | None] = []
    for event in events:
        _event_record(source / event)
        part = source / event / PART
        score_tables.append(_read(part, SCORE_SCHEMA, "scores") if part.is_file() else SCORE_SCHEMA.empty_table())
        items = source / event / ITEMS_PART
        item_tables.append(_read(items, ITEM_SCHEMA, "items") if with_items and items.is_file() else None)
    picks = _latest(score_tables, SCORE_KEY)
    scores = _take(score_tables, picks, SCORE_SCHEMA)
    items = None
    if any(t is not None for t in item_tables):
        group_keys = [_key_rows(table, ITEM_GROUP) for table in score_tables]
        # (event, run, checkpoint, phase, scoring, task, subtask) whose score row still stands; items of a subtask
        # no score row names (none do today) go with their task's standing rows
        standing = {(t, *group_keys[t][r]) for t, r in picks}
        standing_tasks = {key[:-1] for key in standing}
        scored = {key[1:] for key in standing}
        kept: list[pa.Table] = []
        for t, table in enumerate(item_tables):
            if table is None or table.num_rows == 0:
                kept.append(ITEM_SCHEMA.empty_table())
                continue
            mask = [(t, *key) in standing or (key not in scored and (t, *key[:-1]) in standing_tasks)
                    for key in _key_rows(table, ITEM_GROUP)]
            kept.append(table.filter(pa.array(mask, pa.bool_())))
        # a group's items come from one event: the latest that still stands for it
        owner: dict[tuple, int] = {}
        for t, table in enumerate(kept):
            for key in set(_key_rows(table, ITEM_GROUP)):
                owner[key] = max(owner.get(key, -1), t)
        chosen = []
        for t, table in enumerate(kept):
            if table.num_rows:
                mask = [owner[key] == t for key in _key_rows(table, ITEM_GROUP)]
                chosen.append(table.filter(pa.array(mask, pa.bool_())))
            else:
                chosen.append(table)
        items = _take(chosen, _latest(chosen, ITEM_KEY), ITEM_SCHEMA)
    return StoredResults(source, scores, items, events)


def read_scores(paths: Sequence[str | Path]) -> pa.Table:
    """The standing score rows of every results folder under ``paths``, as one table."""
    return pa.concat_tables([read_results_folder(p, with_items=False).scores for p in find_results(paths)])
