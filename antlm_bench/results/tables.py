"""Arrow result tables: the schemas, the rows, and where they are stored.

Every number antlm-bench produces lands in a ``scores`` table with one row per
(run, checkpoint, task, subtask, metric). ``--log-samples`` adds an ``items`` table with the raw scores of both
members of every pair, which paired statistics need. Writers commit them through ``antlm_bench.results.store`` (each
evaluation its own immutable parts, committed with one rename, never a read-modify-write of a shared file), which
also reads them back.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from antlm_bench import __version__
from antlm_bench.clock import utc_now
from antlm_bench.data.files import append_bytes, atomic_write, atomic_write_bytes, is_stream
from antlm_bench.runs.layout import INDEX_FILE

SCORE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("recipe", pa.string()),
        ("architecture", pa.string()),
        ("preset", pa.string()),
        ("schedule", pa.string()),
        ("phase_index", pa.int32()),
        ("phase_objective", pa.string()),
        ("epoch", pa.float64()),
        ("tokens_seen", pa.int64()),
        # words of training text seen, repeats counted (train --save-at-words); null where not recorded
        ("words_seen", pa.int64()),
        ("checkpoint", pa.string()),
        ("scoring", pa.string()),  # clm / pll / pll-word-l2r / mntp; GLUE: finetune / finetune-official / probe
        ("task", pa.string()),
        ("subtask", pa.string()),  # "" for the task-level aggregate row
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("n", pa.int64()),
        ("n_ties", pa.int64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("seed", pa.int64()),
        ("limit", pa.int64()),  # --limit N, or null for the full data
        # which items were scored (eval_set_label): "full" (every item of the filtered sets) or "fast" (every item
        # of the official BabyLM 2025 fast subsets, --fast), or "full-first-N" / "fast-first-N": the first N items
        # of each subtask of that set (--limit N; the per-phase scoring's quick subset, --eval-limit). Rows of
        # the full and the fast sets are never mixed by the leaderboard or check (eval_set_population).
        ("eval_set", pa.string()),
        # the scoring convention (antlm_bench.conventions): "babylm-2025" (texts as given) or "babylm-2024" (" " +
        # text, the 2024 lm-eval tasks); a leaderboard never ranks two conventions together.
        ("convention", pa.string()),
        ("notes", pa.string()),
        ("package_version", pa.string()),
        ("git_commit", pa.string()),
        ("data_hash", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        # which network was scored: the sha256 of the checkpoint's weights (runs.identity.weights_digest). Equal
        # on two runs: the same network, so ``check`` may test items only (same-seed); null (tables written before
        # the column, or no safetensors weights) or different: a seed draw.
        ("weights_digest", pa.string()),
        # which configuration a run is (runs.identity.configuration_digest: the recipe's content, preset, schedule,
        # precision, corpus and tokenizer hashes, package version; the run record's
        # config_fingerprint). The board never pools runs of two fingerprints as seeds of one row, and a seed SD
        # is borrowed only within one; null: not provably the same configuration as anything.
        ("config_fingerprint", pa.string()),
        # the run's label (runs.identity: run --label): a row of its own on the board, paired by seed with the
        # unlabelled runs; null without one (and in tables written before the column)
        ("label", pa.string()),
    ]
)

ITEM_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("checkpoint", pa.string()),
        ("phase_index", pa.int32()),
        ("scoring", pa.string()),
        ("task", pa.string()),
        ("subtask", pa.string()),
        ("item_id", pa.string()),
        ("group_id", pa.string()),  # items that must be resampled together (EWoK's swapped pairs)
        ("context", pa.string()),
        ("sentence_good", pa.string()),
        ("sentence_bad", pa.string()),
        ("score_good", pa.float64()),
        ("score_bad", pa.float64()),
        ("correct", pa.float64()),  # 1 win, 0.5 tie, 0 loss; for GLUE: 1 if the prediction is right
        # an item's own number where it is not a pair of scores: heldout's mean loss per token of one sequence
        # (nats); null for pairs, whose margin is score_good - score_bad
        ("value", pa.float64()),
        ("prediction", pa.string()),
        ("label", pa.string()),
        ("seed", pa.int64()),  # GLUE: the fine-tuning seed (items repeat once per seed)
    ]
)


@dataclass
class RunInfo:
    """What a run is: the columns every row of one run shares."""

    run_id: str
    recipe: str = ""
    architecture: str = ""
    preset: str = ""
    schedule: str = ""
    seed: int | None = None
    data_hash: str = ""
    weights_digest: str | None = None  # the scored checkpoint's weights (runs.identity); None: unknown (a seed draw)
    config_fingerprint: str | None = None  # the run record's; None: unknown (not provably any configuration)
    label: str | None = None  # the run's label (runs.identity); None: none
    git_commit: str = field(default_factory=lambda: current_git_commit())
    package_version: str = __version__


@dataclass
class CheckpointInfo:
    """Which checkpoint of the run a row scores."""

    checkpoint: str = ""
    phase_index: int | None = None
    phase_objective: str = ""
    epoch: float | None = None
    tokens_seen: int | None = None
    words_seen: int | None = None  # words of training text seen, repeats counted


@dataclass
class ScoreRow:
    task: str
    subtask: str
    metric: str
    value: float
    n: int
    scoring: str
    n_ties: int = 0
    ci_low: float | None = None
    ci_high: float | None = None
    limit: int | None = None
    notes: str = ""
    seed: int | None = None  # set when a row has its own seed (GLUE fine-tuning seeds); else the run's seed


DIRTY = "+dirty"  # after the commit: tracked files differed from it, so the commit alone does not name the code


def current_git_commit(folder: Path | None = None) -> str:
    """The commit of the checkout this package runs from (or ``folder``'s), ``+dirty`` when a tracked file differs
    from it (the commit would otherwise claim code that did not run); "" outside a git checkout (an installed
    wheel: the rows' ``package_version`` names the code then)."""
    here = folder or Path(__file__).parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return ""
        # --no-optional-locks: a status of many runs at once must not take the checkout's index lock
        changed = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"],
                                 cwd=here, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    dirty = changed.returncode != 0 or bool(changed.stdout.strip())  # unknown is not clean
    return head.stdout.strip() + (DIRTY if dirty else "")


SUBSET_MARK = "-first-"


def eval_set_label(eval_set: str, limit: int | None) -> str:
    """A row's ``eval_set``: what its items are. ``eval_set`` ("full" or "fast") whole, or with a limit its first
    ``limit`` items of each subtask, ``full-first-20``: a quick subset is never labelled as the full set."""
    return eval_set if limit is None else f"{eval_set}{SUBSET_MARK}{limit}"


def eval_set_population(label: str) -> str:
    """The set a row's items come from ("full" or "fast"), whole or a subset: what a board and ``check`` keep apart
    (``full-first-20`` -> ``full``)."""
    return label.split(SUBSET_MARK, 1)[0]


def score_table(run: RunInfo, checkpoint: CheckpointInfo, rows: Iterable[ScoreRow], eval_set: str = "full",
                convention: str = "babylm-2025") -> pa.Table:
    """The rows of one evaluation of ``eval_set`` ("full" or "fast"), each labelled by the items it scored
    (:func:`eval_set_label`: a row under ``--limit`` says so)."""
    created = utc_now()
    records = []
    for row in rows:
        record: dict[str, Any] = {**asdict(run), **asdict(checkpoint), **asdict(row), "created_at": created,
                                  "eval_set": eval_set_label(eval_set, row.limit), "convention": convention}
        record["seed"] = run.seed if row.seed is None else row.seed
        records.append(record)
    return pa.Table.from_pylist(records, schema=SCORE_SCHEMA)


def item_table(records: Sequence[dict[str, Any]]) -> pa.Table:
    """Build the items table; missing optional columns are null."""
    return pa.Table.from_pylist([{k: r.get(k) for k in ITEM_SCHEMA.names} for r in records], schema=ITEM_SCHEMA)


def write_table_atomic(table: pa.Table, path: Path) -> None:
    """Write Parquet under a temporary name in the same folder, then rename over ``path`` (a stream under /dev,
    ``/dev/stdout``, is written through): ``data.files.atomic_write``."""
    if is_stream(path):
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer)
        atomic_write_bytes(path, buffer.getvalue().to_pybytes())
        return
    atomic_write(path, lambda tmp: pq.write_table(table, str(tmp)))


def append_index(results_root: Path, entry: dict[str, Any]) -> None:
    """Append one JSON line to ``index.jsonl``; a single ``write`` with O_APPEND is atomic for short lines (never
    through a link or into a FIFO planted at its name: ``data.files.append_bytes``)."""
    results_root.mkdir(parents=True, exist_ok=True)
    append_bytes(results_root / INDEX_FILE, (json.dumps(entry, sort_keys=True, default=str) + "\n").encode())
