"""Writing the results store: stage an event, commit it with one rename, tidy."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from antlm_bench.data.files import atomic_write_bytes, sha256_file
from antlm_bench.errors import UserError
from antlm_bench.locking import fault_point
from antlm_bench.results.store.layout import (
    DATA_DIGESTS,
    EVENT_PART,
    ITEMS_CONTENT,
    ITEMS_PART,
    ITEMS_VIEW,
    PART,
    SCHEMA_VERSION,
    STAGING_PREFIX,
    STORE,
    _events,
)
from antlm_bench.results.tables import ITEM_SCHEMA, SCORE_SCHEMA

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


def _ensure_store(folder: Path) -> Path:
    """The store folder of ``folder``, made on first use."""
    store = folder / STORE
    if store.is_dir():
        return store
    if store.exists() or store.is_symlink():
        raise UserError(f"{store}: a file, not a results store (a folder of events, which antlm-bench writes since "
                        "0.1.0); move it away or write the results into another folder")
    folder.mkdir(parents=True, exist_ok=True)
    store.mkdir(exist_ok=True)
    _fsync_dir(folder)
    return store


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
            payload = {"schema_version": SCHEMA_VERSION, "event": event, "pid": os.getpid(),
                       "scores_rows": scores.num_rows, "items_rows": None if items is None else items.num_rows,
                       **(record or {})}
            payload["schema_version"] = SCHEMA_VERSION  # what was written, whatever the caller's record says
            # the bytes of each data file, as written: a reader refuses a file edited or damaged since
            payload[DATA_DIGESTS] = data_digests(staging)
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


def data_digests(event: Path) -> dict[str, str | None]:
    """{file name: sha256 of its bytes} of an event folder's data files (scores and items), and the digest of the
    items' content (``ITEMS_CONTENT``), as _event.json records them (``DATA_DIGESTS``); a tool that rewrites a data
    file (``leaderboards/export_runs.py``) records them anew."""
    from antlm_bench.results.store.read import items_content_digest

    digests: dict[str, str | None] = {name: sha256_file(event / name) for name in (PART, ITEMS_PART)
                                      if (event / name).is_file()}
    if (event / ITEMS_PART).is_file():
        digests[ITEMS_CONTENT] = items_content_digest(pq.read_table(event / ITEMS_PART))
    return digests


def record_data_digests(event: Path) -> None:
    """Record anew, in a committed event's ``_event.json`` (written whole or not at all), the digests of its data
    files as they are now: for a tool that rewrote one on purpose (``leaderboards/export_runs.py`` drops the
    evaluation text from the items). An event written before the record held them (layout version 1) stays as it
    was."""
    record_file = event / EVENT_PART
    record = json.loads(record_file.read_text(encoding="utf-8"))
    if record.get("schema_version", 1) < 2:
        return
    record[DATA_DIGESTS] = data_digests(event)
    atomic_write_bytes(record_file, (json.dumps(record, indent=1) + "\n").encode("utf-8"))


def _link_items(folder: Path, store: Path) -> None:
    """``items.parquet/<event>.parquet`` for every committed event with items (a plain Arrow dataset of them)."""
    view = folder / ITEMS_VIEW
    with_items = [e for e in _events(store) if (store / e / ITEMS_PART).is_file()]
    if not with_items:
        return
    if view.is_symlink() or (view.exists() and not view.is_dir()):
        return  # not ours to replace
    view.mkdir(exist_ok=True)
    for event in with_items:
        target = view / f"{event}.parquet"
        if not target.exists():
            fault_point("store.link")
            _link_or_copy(store / event / ITEMS_PART, target)


def tidy_results(folder: str | Path) -> list[str]:
    """Clean what killed writers left in ``folder``'s store; return what was done, one line each.

    Staging folders are removed only while no writer is committing (an exclusive lock on the store, not waited
    for: with a writer busy, tidying is left for the next time), and missing item links are made again.
    """
    folder = Path(folder).expanduser()
    done: list[str] = []
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
