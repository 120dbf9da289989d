"""What of a run is finished, so that the same command reuses it: the reuse rule, decided from the records alone.

- Training is reused when the run folder says it finished the same request: the same run (recipe, preset,
  schedule, seed, label), the same --save-at-words, word cap, precision and corpus text; a finished run of another
  request is refused in one line naming the difference, and an unfinished one is resumed (the trainer refuses
  other text itself).
- A task's final evaluation is reused when its marker, keyed by the content hash of (checkpoint weights, task spec,
  evaluation settings), exists (``pipeline.evaluations``).
- A finished run whose checkpoints are gone (pruned to save disk, or restored from a results export:
  leaderboards/export_runs.py) keeps what its store holds: its final evaluations are reused when each one verifies
  against the request (:func:`kept_final_evaluations`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from antlm_bench.config import RunConfig
from antlm_bench.errors import UserError
from antlm_bench.pipeline.evaluations import (
    checkpoint_hash,
    eval_key,
    eval_marker,
    spec_digest,
    task_arg,
)
from antlm_bench.pipeline.request import resolve_run
from antlm_bench.recipes import ResolvedPreset
from antlm_bench.runs.identity import RunIdentity
from antlm_bench.runs.layout import RunLayout
from antlm_bench.runs.run_file import RunRecord


def finished_training(layout: RunLayout, identity: RunIdentity, preset: ResolvedPreset, config: RunConfig) -> bool:
    """Whether the folder holds a finished run of this request (reused then); refuses, in one line naming the
    difference, a finished run that is not this request's: other settings, other --save-at-words, another word cap,
    precision or corpus text (``_check_same_training``)."""
    folder = layout.folder
    try:
        record = layout.read_run_file()
    except UserError:
        return False  # a damaged run file: the run is resumed (or restarted) and the file written anew
    if record is None:
        return False
    if record.status == "finished" and identity.difference(record) is not None:
        labelled = f", label {record.label}" if record.label else ""
        raise UserError(f"{folder}: holds a finished run with other settings ({record.recipe}, "
                        f"{record.preset}, {record.schedule}, seed {record.seed}{labelled}); use another --output")
    saved, asked = record.config.save_at_words, config.training.save_at_words
    if record.status == "finished" and saved != asked:
        shown = ",".join(map(str, saved)) or "none"
        raise UserError(f"{folder}: a finished run saved with --save-at-words {shown}; this command asks for "
                        f"{','.join(map(str, asked)) or 'none'}; use another --output")
    if record.status != "finished":
        return False
    _check_same_training(layout, record, preset, config)
    return True


_DATA_HASHES: dict[tuple[Any, ...], str] = {}  # one reading of an unchanged corpus per process (a sweep's cells)


def _check_same_training(layout: RunLayout, record: RunRecord, preset: ResolvedPreset, config: RunConfig) -> None:
    """A finished run is reused only when what decided its network equals the request: the word cap, the
    precision asked for (``auto`` accepts the run's) and the corpus text (its data hash, read from the corpus the
    request names); otherwise one line naming the difference, and nothing is reused or deleted."""
    from antlm_bench.data.corpus import default_corpus_dir, find_corpus_files, training_data_hash, training_words

    folder, data, precision = layout.folder, config.data, config.machine.precision
    then = training_words(preset, record.config.max_words)
    now = training_words(preset, data.max_words)
    if then != now:
        raise UserError(f"{folder}: holds a finished run trained with --max-words {then or 'none'}; this command "
                        f"asks for --max-words {now or 'none'}; nothing was reused: use another --output, or the "
                        "run's --max-words")
    if precision != "auto" and record.precision not in (None, precision):
        raise UserError(f"{folder}: holds a finished run trained in precision {record.precision}; this "
                        f"command asks for --precision {precision}; nothing was reused: use another "
                        "--output, or --precision auto")
    corpus = Path(data.corpus or default_corpus_dir(data.data_dir)).expanduser()
    files = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in find_corpus_files(corpus, "train"))
    key = (files, preset.recipe.name, preset.name, now)
    if key not in _DATA_HASHES:
        _DATA_HASHES[key] = training_data_hash(corpus, preset, data.max_words)
    recorded = record.data_hash
    if recorded and recorded != _DATA_HASHES[key]:
        raise UserError(f"{folder}: holds a finished run trained on other text (data hash {recorded[:12]}; "
                        f"{corpus} now gives {_DATA_HASHES[key][:12]}); nothing was reused: use another --output, "
                        "or the corpus it was trained on")


@dataclass(frozen=True)
class KeptEvaluations:
    """The final evaluations a finished run's store keeps for a request, found without its weights: per task (by
    its name) the event that verified (``events``), or why none did (``missing``); ``unverified_specs``: tasks
    whose event was committed before events recorded their spec's digest (its settings and weights verified, its
    spec not)."""

    events: dict[str, str]
    missing: dict[str, str]
    unverified_specs: tuple[str, ...] = ()


def kept_final_evaluations(layout: RunLayout, record: RunRecord, requests: Sequence[Any],
                           settings_of: Callable[[Any], dict[str, Any]]) -> KeptEvaluations:
    """For each request (``settings_of(request)``: its evaluation settings), the latest final-evaluation event of
    the run's store that verifies: the same task, the same settings, the same spec (where the event records its
    digest), and score rows that are all its own (their count the event's) and all of the run's final weights
    (``weights_digest`` equal to run.json's). Nothing is trusted that the records do not show: a run.json without
    a weights digest keeps nothing."""
    from antlm_bench.results.store import stored_events

    events = [e for e in stored_events(layout.folder) if e.record.get("kind") == "final-eval"] \
        if layout.scores.is_dir() else []
    weights = record.weights_digest
    found: dict[str, str] = {}
    missing: dict[str, str] = {}
    unverified: list[str] = []
    for request in requests:
        task = task_arg(request)
        wanted = json.loads(json.dumps(settings_of(request), default=str))
        why = "its store holds no final evaluation of it"
        for event in reversed(events):
            if event.record.get("task") != task:
                continue
            if event.record.get("settings") != wanted:
                why = f"its evaluation {event.name} ran with other settings"
                continue
            spec = event.record.get("spec")
            if spec is not None and spec != spec_digest(request):
                why = f"its task spec changed since its evaluation {event.name}"
                continue
            try:
                scores = event.scores()  # its bytes checked against its record
            except UserError as damaged:
                why = f"its evaluation {event.name} cannot be read back as written ({damaged})"
                continue
            digests = set(scores.column("weights_digest").to_pylist())
            if weights is None:
                why = "its run.json records no weights digest, so no evaluation can be tied to its weights"
            elif scores.num_rows != event.record.get("scores_rows") or digests != {weights}:
                why = f"its evaluation {event.name} does not hold the scores of its final weights ({weights[:12]})"
            else:
                found[request.name] = event.name
                if spec is None:
                    unverified.append(request.name)
                break
        else:
            missing[request.name] = why
    return KeptEvaluations(found, missing, tuple(unverified))


def pending_seeds(config: RunConfig) -> list[int]:
    """The seeds of ``config`` that ``run_benchmark`` would still train or evaluate, found without writing
    anything (``antlm-bench sweep`` skips a cell with none, in a fraction of a second instead of a process)."""
    run = resolve_run(config)
    requests = run.requests
    pending = []
    for identity in run.identities:
        seed = identity.seed
        layout = RunLayout(config.output.folder.expanduser() / identity.folder_name)

        settings_of = run.settings_of(identity)
        try:
            finished = finished_training(layout, identity, run.preset, config)
            final = layout.final_checkpoint() if finished else None
            if finished and final is None:  # checkpoints gone: done when its store keeps every evaluation
                record = layout.read_run_file()
                if record is None or kept_final_evaluations(layout, record, requests, settings_of).missing:
                    pending.append(seed)
                continue
        except UserError:  # a damaged or foreign run folder: `run` says what is wrong with it
            final = None
        if final is None:
            pending.append(seed)
            continue
        weights = checkpoint_hash(final)
        if not all(eval_marker(layout, r.name, eval_key(weights, r, settings_of(r))).exists() for r in requests):
            pending.append(seed)
    return pending
