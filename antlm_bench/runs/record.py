"""``CheckpointRecord``: the ``antlm_state.json`` every AntLM checkpoint folder carries, and the scoring method it
calls for.

The trainer writes it (schedule, phase, epoch, step, tokens and words seen, seeds, hashes, the weights digest and
the configuration digest of ``runs.identity``, version);
every scorer, the exporter and the leaderboard read it through :func:`read_record`, which checks each field's type
and refuses a damaged record with one line naming the file and the field. The schedule is stored canonical, so
``record.phase`` is the very ``Phase`` the checkpoint's last phase trained (no caller re-parses a phase label).

``scoring_method`` decides ``--scoring auto`` in one place: the method that matches how the checkpoint's last phase
trained the model (docs/design.md: CLM -> clm, MLM -> pll, MNTP -> mntp; a mixture by its heaviest weight), or, for a
plain Hugging Face folder without a record, the model's kind (masked -> pll, causal -> clm).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from antlm_bench.data.readers import read_json
from antlm_bench.errors import UserError, validation_line
from antlm_bench.runs.schedule import Phase, Schedule, parse_schedule

STATE_FILE = "antlm_state.json"
# 1: records written before the fingerprints (read as they are: the fingerprints unknown); 2: before the weights
# digest (read as they are: the network unknown, never "the same" as another)
SCHEMA_VERSION = 3

# how a phase's objective is scored (docs/design.md: CLM -> clm, MLM -> pll, MNTP -> mntp)
SCORING_FOR_OBJECTIVE = {"CLM": "clm", "MLM": "pll", "MNTP": "mntp"}

# records of this version and later list every phase of their schedule (``phases``), as the trainer writes them
PHASES_RECORDED = 3


@dataclass(frozen=True)
class CheckpointRecord:
    """What a checkpoint is: where in which schedule it was saved, from which data, code and initial state."""

    schedule: str  # canonical (runs.schedule)
    phase_index: int
    phase_objective: str  # the phase's label: CLM, MLM, MNTP, MIX(CLM:1,MLM:15), ...
    step: int
    schema_version: int = SCHEMA_VERSION
    phases: tuple[dict[str, Any], ...] = ()  # index, objective, epochs, attention, start_step, steps
    phase_complete: bool | None = None
    phase_step: int | None = None
    phase_steps: int | None = None
    epoch: float | None = None
    tokens_seen: int | None = None
    words_seen: int | None = None
    n_words: int | None = None
    recipe: str = ""
    preset: str = ""
    architecture: str = ""
    seed: int | None = None
    label: str | None = None  # runs.identity: the run's label (its name and random draws), None without one
    data_hash: str = ""
    tokenizer_hash: str = ""
    # the network this checkpoint is: sha256 of its weights, computed from the files when they were written
    # (runs.identity.weights_digest); equal digests are the same network, whatever else differs
    weights_digest: str | None = None
    # a resume check only, not an identity: the configuration, the initial weights and the first batch of each phase
    # (a resume refuses a run whose start the code now computes differently)
    training_fingerprint: str | None = None
    # the configuration a seed trains (runs.identity.configuration_digest): what seeds of one row share
    config_fingerprint: str | None = None
    masking: str | None = None  # the recipe's masking strategy (token, whole_word, span)
    optimizer_at_phase: str | None = None  # the recipe's optimizer policy at phase boundaries (keep, reset)
    package_version: str = ""
    git_commit: str = ""
    steps_per_epoch: int | None = None
    global_batch_size: int | None = None
    seq_len: int | None = None
    n_sequences: int | None = None
    world_size: int | None = None
    created_at: str = ""

    @cached_property
    def parsed_schedule(self) -> Schedule:
        return parse_schedule(self.schedule)

    @property
    def phase(self) -> Phase:
        """The phase this checkpoint was saved in, as the schedule's grammar reads it."""
        return self.parsed_schedule.phases[self.phase_index]

    @property
    def is_final(self) -> bool:
        """Saved at the end of the schedule's last phase."""
        return bool(self.phase_complete) and self.phase_index == len(self.parsed_schedule.phases) - 1

    def to_json(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["phases"] = list(self.phases)
        return record

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), indent=2, sort_keys=True, default=str).encode() + b"\n"

    @classmethod
    def from_json(cls, document: Any, where: str | Path) -> CheckpointRecord:
        """A record from its JSON, every field checked through :class:`CheckpointRecordFile` and the fields checked
        against each other (the phase against the schedule, the phases list against the schedule); a
        ``UserError`` naming ``where`` and the field otherwise."""
        from pydantic import ValidationError

        if not isinstance(document, dict):
            raise UserError(f"{where}: not an antlm-bench checkpoint record (a JSON {type(document).__name__}, "
                            "not an object); re-save the checkpoint")
        version = document.get("schema_version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
            raise UserError(f"{where}: field schema_version is {version!r}; this antlm-bench reads versions 1 to "
                            f"{SCHEMA_VERSION}: upgrade antlm-bench to read it")
        try:
            checked = CheckpointRecordFile.model_validate(document)
        except ValidationError as err:
            raise UserError(f"{where}: {validation_line(err)}; the record is damaged, re-save the checkpoint") from None
        values = {name: value for name, value in checked.model_dump().items() if value is not None}
        values["phases"] = tuple(values.get("phases", ()))
        if "label" in values:
            from antlm_bench.options import parse_label

            try:
                parse_label(values["label"], "label")
            except UserError as err:
                raise UserError(f"{where}: field {err}; the record is damaged, re-save the checkpoint") from None
        record = cls(**values)
        try:
            phases = record.parsed_schedule.phases
        except UserError as err:
            raise UserError(f"{where}: field schedule: {err}") from None
        if not 0 <= record.phase_index < len(phases):
            raise UserError(f"{where}: field phase_index is {record.phase_index}, but schedule {record.schedule} has "
                            f"phases 0..{len(phases) - 1}; the record is damaged, re-save the checkpoint")
        if phases[record.phase_index].label != record.phase_objective:
            raise UserError(f"{where}: field phase_objective is {record.phase_objective!r}, but phase "
                            f"{record.phase_index} of {record.schedule} is {phases[record.phase_index].label}; the "
                            "record is damaged, re-save the checkpoint")
        if version >= PHASES_RECORDED:  # the trainer writes one entry per phase of the schedule
            wanted = [(index, phase.label) for index, phase in enumerate(phases)]
            found = [(entry.get("index"), entry.get("objective")) for entry in record.phases]
            if found != wanted:
                raise UserError(f"{where}: field phases lists {found or 'no phases'}, but schedule {record.schedule} "
                                f"has {wanted}; the record is damaged, re-save the checkpoint")
        return record


class CheckpointRecordFile(BaseModel):
    """``antlm_state.json`` as it is read: every field of :class:`CheckpointRecord` with its type (strictly: no
    string for a number, no number for true or false) and range (no negative step or count); what a newer version
    adds is ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)

    schedule: str
    phase_index: int = Field(ge=0)
    phase_objective: str
    step: int = Field(ge=0)
    schema_version: int = Field(1, ge=1, le=SCHEMA_VERSION)
    phases: list[dict[str, Any]] | None = None
    phase_complete: bool | None = None
    phase_step: int | None = Field(None, ge=0)
    phase_steps: int | None = Field(None, ge=0)
    epoch: float | None = Field(None, ge=0)
    tokens_seen: int | None = Field(None, ge=0)
    words_seen: int | None = Field(None, ge=0)
    n_words: int | None = Field(None, ge=0)
    recipe: str | None = None
    preset: str | None = None
    architecture: str | None = None
    seed: int | None = Field(None, ge=0)
    label: str | None = None
    data_hash: str | None = None
    tokenizer_hash: str | None = None
    weights_digest: str | None = None
    training_fingerprint: str | None = None
    config_fingerprint: str | None = None
    masking: str | None = None
    optimizer_at_phase: str | None = None
    package_version: str | None = None
    git_commit: str | None = None
    steps_per_epoch: int | None = Field(None, ge=1)
    global_batch_size: int | None = Field(None, ge=1)
    seq_len: int | None = Field(None, ge=1)
    n_sequences: int | None = Field(None, ge=0)
    world_size: int | None = Field(None, ge=1)
    created_at: str | None = None


assert set(CheckpointRecordFile.model_fields) == {spec.name for spec in dataclasses.fields(CheckpointRecord)}


def read_record(checkpoint: str | Path) -> CheckpointRecord | None:
    """The checkpoint's record, or None for a plain Hugging Face folder (no ``antlm_state.json``). Read only as a
    regular file (a link is followed: a model in the Hugging Face cache is links), every field checked
    (:meth:`CheckpointRecord.from_json`), and the architecture it names checked against the folder's config.json:
    a record is never trusted for a model it does not describe."""
    path = Path(checkpoint) / STATE_FILE
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_dir():
        raise UserError(f"{path}: not a file; an antlm-bench checkpoint record is a JSON file (re-save the "
                        "checkpoint)")
    document = read_json(path, "corrupt checkpoint record", "re-save the checkpoint", follow_links=True)
    record = CheckpointRecord.from_json(document, path)
    _check_architecture(record, Path(checkpoint), path)
    return record


def _check_architecture(record: CheckpointRecord, folder: Path, where: Path) -> None:
    """The record's architecture is the one its folder's config.json was made by (``antlm_architecture``; a record
    older than this version may sit beside a config that does not say)."""
    config_file = folder / "config.json"
    if not record.architecture or not config_file.is_file():
        return
    config = read_json(config_file, "corrupt config", "re-save the checkpoint", follow_links=True)
    if not isinstance(config, dict) or not isinstance(config.get("antlm_architecture", ""), str):
        return  # no model config at all: loading it says what is wrong with it, naming the field
    made_by = config.get("antlm_architecture")
    if made_by is None and record.schema_version < SCHEMA_VERSION:
        return
    if made_by != record.architecture:
        made = f"is a model of {made_by!r}" if made_by is not None else "names no antlm_architecture (no model of ours)"
        raise UserError(f"{where}: field architecture is {record.architecture!r}, but {config_file} {made}; the "
                        "record does not describe this model: re-save the checkpoint")


def scoring_method(record: CheckpointRecord | None, is_masked_lm: bool) -> tuple[str, str]:
    """(method, why) for ``--scoring auto``: how the checkpoint's last phase trained it; a plain folder by its kind."""
    if record is None:
        method = "pll" if is_masked_lm else "clm"
        kind = "masked" if is_masked_lm else "causal"
        return method, f"no {STATE_FILE}: plain {kind} LM, scored with {method}"
    method = scoring_method_of_phase(record.phase)
    return method, f"last phase {record.phase_index} was {record.phase_objective}: scored with {method}"


def scoring_method_of_phase(phase: Phase) -> str:
    """The method that scores a model the way ``phase`` trained it (a mixture: its heaviest objective's)."""
    return SCORING_FOR_OBJECTIVE[phase.dominant_objective]


def scoring_method_of_objective(label: str) -> str | None:
    """The same, from a phase's objective as rows record it (``MLM``, ``MIX(CLM:1,MLM:15)``), read with the
    schedule grammar; None when the label is not one."""
    try:
        return scoring_method_of_phase(parse_schedule(f"1_{label}").phases[0])
    except UserError:
        return None
