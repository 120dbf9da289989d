"""``run.json``, typed (``RunRecord``): what a training run is and where it stands. The trainer's reporter writes it
(``training.reporting.Reporter.write_run_file``, its one writer, from a ``RunRecord``); every reader goes through
:func:`read_run_record` (``RunLayout.read_run_file``): the final checkpoint's name, a resume's same-run check, the
precision a resume keeps, and ``run``'s reuse of a finished run.

Records written before the schema version (read as version 1) lack some fields; every field but the ones a reader
needs is optional, and a field of the wrong type is one line naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from antlm_bench.data.readers import read_json_model

RUN_SCHEMA_VERSION = 2  # 1: before the schema version and the weights digest
RunStatus = Literal["running", "finished", "stopped", "diverged", "failed", "interrupted"]


class TrainSettings(BaseModel):
    """run.json's ``config``: the training command's settings as given (``TrainConfig``); the ones reuse compares
    are typed, the rest kept as written."""

    model_config = ConfigDict(extra="allow")

    max_words: int | None = Field(None, gt=0)
    save_at_words: list[int] = Field(default_factory=list)
    corpus: str | None = None
    data_dir: str | None = None
    # the run's own knobs over its recipe (train --lr / --global-batch-size / --warmup-ratio): a resume repeats them
    lr: float | None = None
    global_batch_size: int | None = None
    warmup_ratio: float | None = None


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="allow")  # what older or newer versions added is kept, not refused

    schema_version: int = Field(1, ge=1, le=RUN_SCHEMA_VERSION)
    status: RunStatus | None = None
    recipe: str | None = None
    preset: str | None = None
    architecture: str | None = None
    schedule: str | None = None
    seed: int | None = None
    label: str | None = None  # runs.identity: part of the run's name and random draws, not its configuration
    config: TrainSettings = Field(default_factory=TrainSettings)
    n_parameters: int | None = None
    n_sequences: int | None = None
    seq_len: int | None = None
    n_words: int | None = None
    global_batch_size: int | None = None
    micro_batch_size: int | None = None
    steps_per_epoch: int | None = None
    total_steps: int | None = None
    world_size: int | None = None
    device: str | None = None
    precision: Literal["fp32", "bf16"] | None = None
    precision_reason: str | None = None
    data_hash: str | None = None
    tokenizer_hash: str | None = None
    # the identities (runs.identity): the final checkpoint's weights digest once finished; the configuration digest
    weights_digest: str | None = None
    config_fingerprint: str | None = None
    training_fingerprint: str | None = None  # a resume check only
    phases: list[dict[str, Any]] = Field(default_factory=list)
    masking: str | None = None
    optimizer_at_phase: str | None = None
    mix_loss: Any = None
    step: int | None = None
    package_version: str | None = None
    updated_at: str | None = None
    error: str | None = None  # failed / interrupted: the exception's first line
    diverged_at_step: int | None = None

    def to_bytes(self) -> bytes:
        return self.model_dump_json(indent=2, exclude_none=False).encode() + b"\n"


def read_run_record(path: Path) -> RunRecord:
    """run.json read through its model: one line naming the file and the field when it is not one."""
    return read_json_model(path, RunRecord, "not a run file of this version", "train again or into a new --output")
