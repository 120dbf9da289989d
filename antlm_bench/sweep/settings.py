"""A sweep's settings: the sweep file (YAML) and the command line's values over it, validated as one
``SweepSettings`` (a bad field is one line naming it and the file, or the command line)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from antlm_bench.config import option
from antlm_bench.errors import UserError, validation_line
from antlm_bench.options import parse_seeds
from antlm_bench.sweep.grid import split_top_level


class SlurmSettings(BaseModel):
    """``slurm:`` in a sweep file (or the --partition ... flags): each array task's resources."""

    model_config = ConfigDict(extra="forbid")

    partition: str | None = None
    time_min: int = Field(60, gt=0)
    cpus_per_task: int = Field(1, gt=0)
    gpus_per_task: int = Field(0, ge=0)
    mem_gb: float | None = Field(None, gt=0)
    array_parallelism: int | None = Field(None, gt=0)
    extra: dict[str, str] = Field(default_factory=dict)  # any other sbatch option, e.g. {account: proj, qos: low}
    cluster: Literal["slurm", "local"] = "slurm"  # local: submitit's local executor (try the array on this machine)

    @field_validator("partition", "extra")
    @classmethod
    def _one_line(cls, value: Any) -> Any:
        # each value becomes one `#SBATCH --name=value` line: a line break would add a line of its own
        texts = [] if value is None else [value] if isinstance(value, str) else [*value.keys(), *value.values()]
        for text in texts:
            if any(c in text for c in "\r\n\x00"):
                raise ValueError(f"{text!r}: an sbatch option name or value is one line")
        return value


class UntilDecidedSettings(BaseModel):
    """``until_decided:`` in a sweep file (or --until-decided --baseline ...)."""

    model_config = ConfigDict(extra="forbid")

    baseline: str
    max_seeds: int = option(12, "--max-seeds", "--until-decided: at most this many seeds a schedule.", ge=2)
    tolerance: float | None = option(None, "--tolerance", "--until-decided: equivalence margin in points: an "
                                     "interval within +-T decides 'no difference larger than T' (none: only "
                                     "differences decide, and a null comparison runs to the cap).", gt=0)
    # per-column equivalence margins in the column's units (blimp: points, blimp.margin: nats), over tolerance
    margins: dict[str, float] = Field(default_factory=dict)

    @field_validator("margins")
    @classmethod
    def _positive(cls, margins: dict[str, float]) -> dict[str, float]:
        bad = [k for k, v in margins.items() if not (math.isfinite(v) and v > 0)]
        if bad:
            raise ValueError(f"margin of {bad[0]}: a positive finite number in the column's units")
        return margins
    round_seeds: int = option(1, "--round-seeds", "--until-decided: seeds added per round.", ge=1)
    alpha: float = option(0.05, "--alpha", "--until-decided: error rate of the whole family of comparisons "
                          "(Bonferroni over them).", gt=0, lt=1)
    # primary endpoints (board columns: blimp, blimp.margin, macro, ...): only they take alpha and must be decided
    primary: list[str] = Field(default_factory=list)
    # controls (sweep.rule): schedules known to be worse than the baseline (added to the grid if missing), and
    # the baseline's configuration again under the negative control's label; no share of alpha
    positive_controls: list[str] = Field(default_factory=list)
    negative_control: bool = False
    # what lets each primary endpoint speak (sweep.rule.SENSITIVITY_RULES), per column ("*": every primary
    # endpoint not named); unnamed: positive-control with a positive control, else above-chance where the column
    # has a chance level, else none
    sensitivity: dict[str, Literal["positive-control", "above-chance", "none"]] = Field(default_factory=dict)

    @field_validator("positive_controls", mode="before")
    @classmethod
    def _control_list(cls, value: Any) -> Any:
        return split_top_level(value, "--positive-control") if isinstance(value, str) else value


class SweepSettings(BaseModel):
    """A sweep file (YAML), or the command line, validated."""

    model_config = ConfigDict(extra="forbid")

    models: list[str] = Field(default_factory=lambda: ["antlm-babyllama"])
    schedules: list[str] | None = None  # None: each recipe's default
    seeds: list[int] = Field(default_factory=lambda: [1, 2, 3])
    presets: list[str] | None = None  # None: paper with CUDA, tiny otherwise
    output: Path = Path("results")
    run: dict[str, Any] = Field(default_factory=dict)  # any other `antlm-bench run` option, by its long name
    executor: Literal["local", "slurm"] = "local"
    jobs: int | None = Field(None, gt=0)
    per_device: int = Field(1, gt=0)
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    until_decided: UntilDecidedSettings | None = None

    @field_validator("models", "presets", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value

    @field_validator("schedules", mode="before")
    @classmethod
    def _schedule_list(cls, value: Any) -> Any:
        return split_top_level(value) if isinstance(value, str) else value

    @field_validator("models", "schedules", "presets")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if value is not None and len(value) == 0:
            raise ValueError("an empty list; give at least one, or leave the field out for the default")
        return value

    @field_validator("seeds", mode="before")
    @classmethod
    def _seed_list(cls, value: Any) -> Any:
        return parse_seeds(value)




def settings_of(file_values: dict[str, Any], cli_values: dict[str, Any], source: str) -> SweepSettings:
    """The command line's values over the file's (nested mappings merged one level down)."""
    merged = dict(file_values)
    for key, value in cli_values.items():
        if value is None or value == {} or value is False:
            continue
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    try:
        return SweepSettings(**merged)
    except ValidationError as err:
        raise UserError(f"{source}: {validation_line(err)}") from None


__all__ = ["SlurmSettings", "SweepSettings", "UntilDecidedSettings", "settings_of"]
