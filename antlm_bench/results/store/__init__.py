"""The results store: every evaluation adds its own immutable parts and commits them with one rename.

Modules: ``write`` (staging and committing an event), ``read`` (the latest row of every key), ``folder`` (a results
folder: its lock, tidying) and ``layout`` (the on-disk names and keys).

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

Reading (``read_results_folder``; ``StoreReader``: each store once per command) takes the committed events in name order and keeps, for every key, the row of
the LATEST event: a re-evaluation replaces what it re-scored and leaves the rest. Score key: (run_id, checkpoint,
phase_index, task, subtask, metric, scoring, limit, seed); the seed is part of it because GLUE rows repeat once per
fine-tuning seed. Items follow their scores: a (run, checkpoint, phase, scoring, task, subtask)'s items come from
the latest event whose score rows for that task still stand (so a re-evaluation without ``--log-samples`` takes the
older items away with the older scores), de-duplicated by (..., item_id, seed).

Each ``_event.json`` carries ``schema_version`` (``SCHEMA_VERSION``; an event without the field is version 1). A
reader refuses an event of a version it does not know, with one line naming the event's record. Since version 2 it
also records the sha256 of each data file (``data_sha256``), and a reader refuses a file whose bytes are not those:
an edited or damaged part never reaches a board.

Locks: writers hold a shared ``flock`` on the store folder while they stage and commit; ``tidy_results`` takes it
exclusively, without waiting, before it removes staging folders (a live writer's staging is never removed) and
re-links missing item links. A kill at any point leaves the old state or the new one; ``fault_point`` marks the
points the fault-injection tests kill at.
"""


from antlm_bench.results.store.folder import output_folder  # noqa: F401
from antlm_bench.results.store.layout import (  # noqa: F401
    DATA_DIGESTS,
    EVENT_PART,
    ITEM_GROUP,
    ITEM_KEY,
    ITEM_TASK,
    ITEMS_PART,
    ITEMS_VIEW,
    PART,
    SCHEMA_VERSION,
    SCORE_KEY,
    STAGING_PREFIX,
    STORE,
)
from antlm_bench.results.store.read import (  # noqa: F401
    EVALUATION_TEXT,
    UNREAD_ITEM_TASKS,
    ReadStore,
    StoredEvent,
    StoredResults,
    StoreReader,
    find_results,
    key_codes,
    read_results_folder,
    read_scores,
    statistics_items,
    store_digest,
    stored_events,
)
from antlm_bench.results.store.write import commit_results, new_event_id, tidy_results  # noqa: F401
