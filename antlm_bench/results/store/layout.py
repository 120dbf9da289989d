"""Names and keys of the results store's on-disk layout (see ``antlm_bench.results.store``)."""

from __future__ import annotations

import os
from pathlib import Path

from antlm_bench.runs.layout import ITEMS, SCORES

STORE = SCORES
ITEMS_VIEW = ITEMS
PART = "part.parquet"
ITEMS_PART = "_items.parquet"
EVENT_PART = "_event.json"
STAGING_PREFIX = ".staging-"
# the version of the layout an event is written in (its parts, its record), stored in its _event.json; an event
# without one was written before the field existed, in version 1. A reader refuses a version it does not know.
# Version 2 records the sha256 of each data file of the event (DATA_DIGESTS), checked whenever a file is read;
# version 1 events (written before 2026-12-07) are read as they are, without that check: re-evaluate to get it.
SCHEMA_VERSION = 2
READ_VERSIONS = (1, 2)
DATA_DIGESTS = "data_sha256"  # _event.json field: {file name: sha256 hex of its bytes}
# ... and under this key, the sha256 of the items' content as a store digest takes it (read.items_content_digest;
# null when nothing of them is digested): recorded at the commit, trusted once the items' bytes check out
ITEMS_CONTENT = "items_content"

SCORE_KEY = ("run_id", "checkpoint", "phase_index", "task", "subtask", "metric", "scoring", "limit", "eval_set",
             "convention", "seed")
ITEM_TASK = ("run_id", "checkpoint", "phase_index", "scoring", "task")
ITEM_GROUP = (*ITEM_TASK, "subtask")
ITEM_KEY = (*ITEM_GROUP, "item_id", "seed")


def _events(store: Path) -> list[str]:
    """Committed events, oldest first (staging folders and anything else hidden are not events)."""
    try:
        names = [entry.name for entry in os.scandir(store)
                 if entry.is_dir() and not entry.name.startswith((".", "_"))]
    except FileNotFoundError:
        return []
    return sorted(names)
