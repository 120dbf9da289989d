"""The results store: every evaluation adds its own immutable parts and commits them with one rename.

A results folder (an ``eval --output`` folder, or a training run folder) holds::

    scores.parquet/                   the store, and a plain Arrow dataset: pq.read_table(".../scores.parquet")
        <event>/part.parquet          the scores of one committed event (an evaluation, a per-phase scoring)
        <event>/_items.parquet        its --log-samples items (a leading "_" keeps Arrow's discovery off them)
        <event>/_event.json           what the event was (settings, versions, timings, row counts)
        .staging-<random>/            an event being written (a leading "." keeps readers off it)
    items.parquet/<event>.parquet     hard links to the committed items: a plain Arrow dataset of the items

``<event>`` is ``<nanoseconds>-<pid>-<random>``, taken just before the commit, so the events' names sort in the
order they were committed. An event is written into its staging folder (scores, items and record together) and
committed by ONE ``os.rename`` of that folder to its event name: a reader sees all of an event or nothing of it,
scores and items never disagree, and two writers never touch the same file (no read-modify-write anywhere).

Reading (``read_results_folder``) takes the committed events in name order and keeps, for every key, the row of
the LATEST event: a re-evaluation replaces what it re-scored and leaves the rest. Score key: (run_id, checkpoint,
phase_index, task, subtask, metric, scoring, limit, seed); the seed is part of it because GLUE rows repeat once per
fine-tuning seed. Items follow their scores: a (run, checkpoint, phase, scoring, task, subtask)'s items come from
the latest event whose score rows for that task still stand (so a re-evaluation without ``--log-samples`` takes the
older items away with the older scores), de-duplicated by (..., item_id, seed).

The old layout, a plain ``scores.parquet`` file with ``items.parquet`` beside it (the committed studies under
``leaderboards/``), is read as one event. The first write into such a folder turns it into the first event of a
store (hard links, no copy): build the store under ``.scores.parquet.migrate``, remove the old file, rename the
store into place; a reader finding the file gone reads ``.scores.parquet.migrate`` meanwhile.

Locks: writers hold a shared ``flock`` on the store folder while they stage and commit; ``tidy_results`` takes it
exclusively, without waiting, before it removes staging folders (a live writer's staging is never removed) and
re-links missing item links. A kill at any point leaves the old state or the new one; ``fault_point`` marks the
points the fault-injection tests kill at.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from antlm_bench.errors import UserError
from antlm_bench.locking import fault_point
from antlm_bench.results.tables import ITEM_SCHEMA, ITEMS_FILE, SCORE_SCHEMA, SCORES_FILE

STORE = SCORES_FILE  # the store folder is named like the old single file, so both layouts are found alike
ITEMS_VIEW = ITEMS_FILE
PART = "part.parquet"
ITEMS_PART = "_items.parquet"
EVENT_PART = "_event.json"
STAGING_PREFIX = ".staging-"
MIGRATING = ".scores.parquet.migrate"
LEGACY_EVENT = "0" * 20 + "-legacy"  # sorts before every real event

SCORE_KEY = ("run_id", "checkpoint", "phase_index", "task", "subtask", "metric", "scoring", "limit", "eval_set",
             "convention", "seed")
ITEM_TASK = ("run_id", "checkpoint", "phase_index", "scoring", "task")
ITEM_GROUP = (*ITEM_TASK, "subtask")
ITEM_KEY = (*ITEM_GROUP, "item_id", "seed")


# -- writing ----------------------------------------------------------------------------------------------------


def new_event_id() -> str:
    """``<ns since epoch>-<pid>-<random>``: names sort in commit order (ties between processes: any fixed order)."""
    return f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(3)}"


@contextlib.contextmanager
def _dir_flock(folder: Path, operation: int) -> Iterator[bool]:
    """``flock`` a folder itself (no lock file to leave behind); yields False when LOCK_NB found it taken."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, operation)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, write: Any) -> None:
    """Run ``write(path)`` and fsync the result; an OSError names ``path`` (pyarrow's do not), one line."""
    try:
        write(path)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as err:
        number = err.errno or errno.EIO
        raise OSError(number, os.strerror(number), str(path)) from None


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link (no bytes copied); a copy under a temporary name where the file system has no links."""
    try:
        os.link(source, target)
    except FileExistsError:
        pass
    except OSError:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            shutil.copyfile(source, tmp)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)


def _events(store: Path) -> list[str]:
    """Committed events, oldest first (staging folders and anything else hidden are not events)."""
    try:
        names = [entry.name for entry in os.scandir(store)
                 if entry.is_dir() and not entry.name.startswith((".", "_"))]
    except FileNotFoundError:
        return []
    return sorted(names)


def _ensure_store(folder: Path) -> Path:
    """The store folder of ``folder``, made on first use; an old single-file table becomes its first event."""
    store = folder / STORE
    if store.is_dir():
        return store
    folder.mkdir(parents=True, exist_ok=True)
    with _dir_flock(folder, fcntl.LOCK_EX):  # one migration at a time; others wait and find it done
        _finish_migration(folder)
        if store.is_dir():
            return store
        migrating = folder / MIGRATING
        if store.exists():  # the old layout: this file is the truth until it is removed below
            shutil.rmtree(migrating, ignore_errors=True)  # a killed migration's half-built copy
            first = migrating / LEGACY_EVENT
            first.mkdir(parents=True)
            _link_or_copy(store, first / PART)
            if (folder / ITEMS_VIEW).is_file():
                _link_or_copy(folder / ITEMS_VIEW, first / ITEMS_PART)
            record = {"event": LEGACY_EVENT, "kind": "legacy", "note": f"the single-file {STORE} of an earlier "
                      "antlm-bench, moved into the store as its first event"}
            _write_file(first / EVENT_PART, lambda p: p.write_text(json.dumps(record, indent=1) + "\n"))
            _fsync_dir(first)
            _fsync_dir(migrating)
            fault_point("store.migrate")
            store.unlink()
            _fsync_dir(folder)
            fault_point("store.migrate.unlinked")
            os.rename(migrating, store)
        else:
            store.mkdir(exist_ok=True)
        _fsync_dir(folder)
    return store


def _finish_migration(folder: Path) -> None:
    """Roll a killed migration forward (old file gone: rename the built store) or back (old file still there)."""
    migrating, store = folder / MIGRATING, folder / STORE
    if not migrating.is_dir():
        return
    if store.is_file():
        shutil.rmtree(migrating, ignore_errors=True)
    elif not store.exists():
        os.rename(migrating, store)


def commit_results(folder: str | Path, scores: pa.Table, items: pa.Table | None = None,
                   record: dict[str, Any] | None = None) -> str:
    """Commit one event (scores, optional items, its record) into ``folder``'s store; return the event name.

    Nothing of the event is visible until the one rename at the end; on any error (disk full: an OSError that
    names the file) the staging folder is removed and nothing is committed.
    """
    folder = Path(folder).expanduser()
    if not scores.schema.equals(SCORE_SCHEMA, check_metadata=False):
        scores = scores.select(SCORE_SCHEMA.names).cast(SCORE_SCHEMA)
    if items is not None and not items.schema.equals(ITEM_SCHEMA, check_metadata=False):
        items = items.select(ITEM_SCHEMA.names).cast(ITEM_SCHEMA)
    store = _ensure_store(folder)
    with contextlib.ExitStack() as held:
        for _ in range(5):  # tidy_results may remove an empty store between our making and our opening it
            try:  # shared: tidy_results (LOCK_EX) never removes a staging folder in use
                held.enter_context(_dir_flock(store, fcntl.LOCK_SH))
                break
            except FileNotFoundError:
                store = _ensure_store(folder)
        staging = store / f"{STAGING_PREFIX}{secrets.token_hex(8)}"
        try:
            staging.mkdir()
        except FileNotFoundError:  # a failed first writer removed the empty store just now: make it again
            store = _ensure_store(folder)
            staging = store / staging.name
            staging.mkdir()
        try:
            _write_file(staging / PART, lambda p: pq.write_table(scores, p))
            if items is not None:
                _write_file(staging / ITEMS_PART, lambda p: pq.write_table(items, p))
            event = new_event_id()
            payload = {"event": event, "pid": os.getpid(), "scores_rows": scores.num_rows,
                       "items_rows": None if items is None else items.num_rows, **(record or {})}
            text = json.dumps(payload, indent=1, sort_keys=False, default=str) + "\n"
            _write_file(staging / EVENT_PART, lambda p: p.write_text(text, encoding="utf-8"))
            _fsync_dir(staging)
            fault_point("store.commit")
            os.rename(staging, store / event)  # THE commit
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            with contextlib.suppress(OSError):
                store.rmdir()  # only when empty: a failed first commit leaves no empty store behind
            raise
        fault_point("store.committed")
        _fsync_dir(store)
        with contextlib.suppress(OSError):  # the items links are a convenience; tidy_results redoes them
            _link_items(folder, store)
    return event


def _link_items(folder: Path, store: Path) -> None:
    """``items.parquet/<event>.parquet`` for every committed event with items (a plain Arrow dataset of them)."""
    view = folder / ITEMS_VIEW
    with_items = [e for e in _events(store) if (store / e / ITEMS_PART).is_file()]
    if not with_items:
        return
    if view.is_file() or view.is_symlink():  # the old single items file: the store's first event holds it now
        if not (store / LEGACY_EVENT).is_dir():
            return  # not ours to replace (an old table next to a store it is not part of)
        aside = folder / f".{ITEMS_VIEW}.{secrets.token_hex(4)}.old"
        os.replace(view, aside)
        aside.unlink()
    view.mkdir(exist_ok=True)
    for event in with_items:
        target = view / f"{event}.parquet"
        if not target.exists():
            fault_point("store.link")
            _link_or_copy(store / event / ITEMS_PART, target)


def tidy_results(folder: str | Path) -> list[str]:
    """Clean what killed writers left in ``folder``'s store; return what was done, one line each.

    Staging folders are removed only while no writer is committing (an exclusive lock on the store, not waited
    for: with a writer busy, tidying is left for the next time). A killed migration is rolled forward or back,
    and missing item links are made again.
    """
    folder = Path(folder).expanduser()
    done: list[str] = []
    if (folder / MIGRATING).is_dir():
        with _dir_flock(folder, fcntl.LOCK_EX):
            _finish_migration(folder)
        done.append(f"finished an interrupted move of {folder / STORE} into the store")
    store = folder / STORE
    if not store.is_dir():
        return done
    with _dir_flock(store, fcntl.LOCK_EX | fcntl.LOCK_NB) as free:
        if not free:
            return done
        for entry in list(os.scandir(store)):
            if entry.name.startswith(STAGING_PREFIX):
                shutil.rmtree(entry.path, ignore_errors=True)
                done.append(f"removed {entry.path} (an event a killed writer never committed)")
        view = folder / ITEMS_VIEW
        if view.is_dir():
            for entry in list(os.scandir(view)):
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    Path(entry.path).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            _link_items(folder, store)
            if not any(os.scandir(store)):
                store.rmdir()  # a killed first commit's empty store: a plain Arrow read of it would fail
    return done


# -- reading ----------------------------------------------------------------------------------------------------


@dataclass
class StoredResults:
    """One results folder read back: the standing scores, the items that go with them, the events read."""

    source: Path  # the store folder, or the old single scores file
    scores: pa.Table
    items: pa.Table | None  # None when no event logged items
    events: list[str] = field(default_factory=list)


def find_results(paths: Sequence[str | Path]) -> list[Path]:
    """Every results store (or old single ``scores.parquet`` file) in the given files or folders, sorted.

    A missing path, or nothing found at all, is a UserError.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            if path.name in (STORE, MIGRATING):
                found.append(path)
                continue
            found.extend(p for p in path.rglob(STORE) if not _inside_store(p, path))
            # a migration killed after the old file was removed: its store is still under the hidden name
            found.extend(p for p in path.rglob(MIGRATING) if not (p.parent / STORE).exists())
        else:
            raise UserError(f"results {path}: no such file or folder")
    if not found:
        where = ", ".join(str(p) for p in paths) or "(none given)"
        raise UserError(f"no {STORE} found under {where}; run `antlm-bench eval` or give the run folders")
    return sorted(dict.fromkeys(found))


def score_parts(source: str | Path) -> list[Path]:
    """The Parquet files a store (or an old single file) keeps its committed scores in, oldest first."""
    source = Path(source)
    if source.is_file():
        return [source]
    return [source / event / PART for event in _events(source) if (source / event / PART).is_file()]


def _inside_store(path: Path, root: Path) -> bool:
    """Whether ``path`` lies inside another store folder (never a results folder of its own)."""
    return any(parent.name in (STORE, MIGRATING) for parent in path.relative_to(root).parents if parent.name)


def _read(path: Path, schema: pa.Schema, what: str) -> pa.Table:
    try:
        table = pq.read_table(path, schema=schema)
        if "eval_set" in schema.names and table["eval_set"].null_count:
            # parts written before the column existed hold full evaluations (--fast came with the column)
            at = schema.get_field_index("eval_set")
            table = table.set_column(at, "eval_set", table["eval_set"].fill_null("full"))
        if "convention" in schema.names and table["convention"].null_count:
            # parts written before the column: texts as given (babylm-2025), unless --leading-space made them
            notes = table["notes"].fill_null("") if "notes" in schema.names else pa.array([""] * table.num_rows)
            spaced = pc.if_else(pc.match_substring(notes, "leading_space"), "babylm-2024", "babylm-2025")
            at = schema.get_field_index("convention")
            table = table.set_column(at, "convention", pc.coalesce(table["convention"], spaced))
        return table
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


def read_results_folder(source: str | Path, with_items: bool = True) -> StoredResults:
    """Read one results store (or old single file): the latest row of every key, and the items that go with them."""
    source = Path(source)
    if source.is_file():  # the old layout: one event, items beside it
        score_tables = [_read(source, SCORE_SCHEMA, "scores")]
        beside = source.parent / ITEMS_VIEW
        item_tables: list[pa.Table | None] = [
            _read(beside, ITEM_SCHEMA, "items") if with_items and beside.is_file() else None]
        events = [LEGACY_EVENT]
    else:
        events = _events(source)
        score_tables, item_tables = [], []
        for event in events:
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
