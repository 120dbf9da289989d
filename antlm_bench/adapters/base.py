"""The interface between the evaluation loop and task adapters.

``antlm-bench eval`` (and the trainer's ``--eval-every``, and ``run``) resolve ``--tasks`` to adapters and call
``adapter.run(context)`` on each. An adapter reads its data through the context's data folder, scores or
fine-tunes the context's model, and returns score rows (task-level aggregate row with ``subtask=""`` plus one row
per subtask) and, when ``log_samples`` is on, item records for the items table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from antlm_bench.results.tables import ScoreRow


@dataclass
class EvalContext:
    """Everything an adapter may need; adapters ignore what does not concern them."""

    model_path: Path | None  # checkpoint folder (GLUE fine-tuning loads from here)
    data_dir: Path
    model: Any = None  # an already loaded scoring model (minimal pairs), or None to load from model_path
    tokenizer: Any = None
    scoring: str = "auto"  # auto | clm | pll | pll-word-l2r | mntp
    limit: int | None = None
    log_samples: bool = False
    batch_tokens: int = 4096
    device: str = "cpu"
    dtype: str = "float32"
    leading_space: bool = False
    seeds: list[int] = field(default_factory=lambda: [42])
    options: dict[str, Any] = field(default_factory=dict)  # adapter-specific settings (GLUE hyper-parameters)
    work_dir: Path | None = None  # scratch space (fine-tuned heads, caches)
    progress: Any = None  # a rich Progress to add tasks to, or None
    eval_set: str = "full"  # "fast": the official BabyLM 2025 fast subsets (--fast)


@dataclass
class TaskResult:
    rows: list[ScoreRow]
    items: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said once on the terminal (e.g. "BoolQ: split valid by id")


class TaskAdapter(Protocol):
    name: str

    def run(self, context: EvalContext) -> TaskResult: ...
