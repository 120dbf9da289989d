"""The interface between the evaluation loop and task adapters.

``antlm-bench eval`` (and the trainer's ``--eval-every``, and ``run``) resolve ``--tasks`` to adapters and call
``adapter.run(context)`` on each. An adapter reads its data through the context's data folder, scores or
fine-tunes the context's model, and returns score rows (task-level aggregate row with ``subtask=""`` plus one row
per subtask) and, when ``log_samples`` is on, item records for the items table.

An adapter class derives from :class:`TaskAdapter`, which declares everything the loop uses, with its default. A
task spec's ``class:`` names it in ``antlm_bench.registry.TASK_CLASSES`` (the shipped classes there as
"module:Class" strings, imported on first lookup; third-party ones through the entry-point group
``antlm_bench.task_classes``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from antlm_bench.conventions import CONVENTIONS, DEFAULT_CONVENTION, Convention
from antlm_bench.errors import UserError, validation_line
from antlm_bench.results.tables import ScoreRow
from antlm_bench.tasks import TaskSpec

if TYPE_CHECKING:  # the GLUE package imports this module
    from antlm_bench.adapters.glue.options import GlueOptions


class FileData(BaseModel):
    """A spec's ``data:`` section for a task read from files of the data folder (minimal pairs, the BabyLM 2025
    zero-shot tasks): every key typed, so that a wrong-typed value is one line naming it, not a traceback."""

    model_config = ConfigDict(extra="forbid", strict=True)

    folder: str = ""
    pattern: str = "*.jsonl*"
    zip: str | None = None  # a password-protected zip read in memory (EWoK)
    password: str | None = None
    files: list[str] | None = Field(None, min_length=1)  # the subtasks to read, by file stem
    expected_subtasks: int | None = Field(None, ge=1)


class FileDataSpec(FileData):
    fast: FileData | None = None  # --fast: keys that replace the ones above (the official fast subsets)


class TextFields(BaseModel):
    """A minimal-pair spec's ``fields:``: the names of the JSON fields that hold each part of a pair."""

    model_config = ConfigDict(extra="forbid", strict=True)

    good: str | None = None
    bad: str | None = None
    id: str | None = None
    context: str | None = None


@dataclass
class EvalContext:
    """Everything an adapter may need; adapters ignore what does not concern them."""

    model_path: Path | None  # checkpoint folder (GLUE fine-tuning loads from here)
    data_dir: Path
    model: Any = None  # an already loaded scoring model (minimal pairs), or None to load from model_path
    tokenizer: Any = None
    scoring: str = "clm"  # clm | pll | pll-word-l2r | mntp: resolved by evaluate() (never "auto" here)
    limit: int | None = None
    log_samples: bool = False
    batch_tokens: int = 4096
    device: str = "cpu"
    dtype: str = "float32"
    convention: Convention = CONVENTIONS[DEFAULT_CONVENTION]  # resolved by evaluate()
    seeds: list[int] = field(default_factory=lambda: [42])
    # the settings of a task that takes options (``TaskAdapter.takes_options``: GLUE's hyper-parameters), typed
    options: GlueOptions | None = None  # None: none given
    work_dir: Path | None = None  # scratch space (fine-tuned heads, caches)
    progress: Any = None  # a bar of antlm_bench.progress.progress_bar to add tasks to, or None
    eval_set: str = "full"  # "fast": the official BabyLM 2025 fast subsets (--fast)


@dataclass
class TaskResult:
    rows: list[ScoreRow]
    items: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said once on the terminal (e.g. "BoolQ: split valid by id")


class TaskAdapter(ABC):
    """One task of a spec, with the members the user selected (None: all), as the evaluation loop drives it:
    ``check_data`` for every task before a model is loaded, then ``run`` for each."""

    # the metrics of the task-level rows it reports: a spec's ``metric:`` must name one (tasks.TaskRequest.adapter),
    # so that a spec cannot promise a number its task never gives; a class of your own declares its own
    metrics: ClassVar[tuple[str, ...]] = ()
    # the spec's sections typed (section -> model, e.g. {"data": FileDataSpec}): checked when the adapter is made,
    # before any data or model is read, so that a wrong-typed value is one line naming the file and the field
    spec_sections: ClassVar[dict[str, type[BaseModel]]] = {}
    needs_scoring_model: ClassVar[bool] = False  # evaluate() loads one scoring model for every task that says so
    has_fast_subset: ClassVar[bool] = False  # the BabyLM 2025 pipeline has a fast subset of it (--fast)
    # ``task:subtask`` selects subtasks found in the data (``blimp:adjunct_island``), checked when the data is read;
    # a spec with a ``members`` list (GLUE) is checked against it instead
    selects_subtasks: ClassVar[bool] = False
    # reads ``EvalContext.options`` (GLUE): a run's evaluation marker then hashes them, and a preset's budget applies
    takes_options: ClassVar[bool] = False
    eval_set: str = "full"  # evaluate() sets "fast" under --fast on a task with a fast subset
    data_hash: str = ""  # sha256 of the data files read (check_data or run sets it), for the run's record
    data_files: Sequence[str] = ()  # those files

    def __init__(self, spec: TaskSpec, members: list[str] | None = None) -> None:
        """``members``: the spec's members the user named (None: all); each task reads them its own way."""
        self.spec = spec
        self.name = spec.name
        for section, model in self.spec_sections.items():
            try:
                model.model_validate(getattr(spec, section))
            except ValidationError as err:
                raise UserError(f"{spec.source}: {validation_line(err, section=section)}; fix the task spec") from None

    def check_data(self, data_dir: Path) -> None:  # noqa: B027  (a hook: most tasks read their data in run)
        """Refuse missing or broken data with one line, before any model is loaded (default: nothing to check)."""

    def score_explanation(self) -> str | None:
        """How the task's score is made where it is not the mean of one metric over subtasks (GLUE: each member's
        own metric), for ``run``'s summary; None: nothing to explain."""
        return None

    @abstractmethod
    def run(self, context: EvalContext) -> TaskResult:
        """Score (or fine-tune) the context's model on the task: the rows, and the items under ``log_samples``."""
