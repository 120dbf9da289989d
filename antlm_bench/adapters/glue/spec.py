"""The shape of a ``class: GlueTask`` spec (``tasks/glue.yaml``) and of its settings, validated with pydantic.

Hyper-parameters come in three layers of one shape (:class:`Hyper`): the spec's ``defaults``, a member's
overrides, and the command-line options (``None`` means "the spec's value"). The defaults and the options also name
the GLUE protocol and the fine-tuning arithmetic (``options.GlueOptions``), which a member cannot override.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from antlm_bench.errors import UserError, validation_line


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SplitValid(_Strict):
    key: str
    report_fraction: float = Field(0.2, gt=0, lt=1)


class Hyper(_Strict):
    """Hyper-parameters: spec ``defaults``, a member's overrides, and command-line options all have this shape."""

    lr: float | None = Field(None, gt=0)
    batch_size: int | None = Field(None, gt=0)
    eval_batch_size: int | None = Field(None, gt=0)
    max_length: int | None = Field(None, gt=1)
    epochs: int | None = Field(None, gt=0)
    weight_decay: float | None = Field(None, ge=0)
    warmup: float | None = Field(None, ge=0, lt=1)
    min_lr_factor: float | None = Field(None, ge=0, le=1)
    dropout: float | None = Field(None, ge=0, lt=1)
    grad_clip: float | None = Field(None, ge=0)
    dev_fraction: float | None = Field(None, gt=0, lt=1)
    max_train_examples: int | None = Field(None, gt=0)
    pooling: Literal["auto", "first", "last", "mean"] | None = None
    attention: Literal["auto", "causal", "bidirectional"] | None = None
    probe: bool | None = None
    length_grouped: bool | None = None
    seed: int | None = None


class MemberSpec(Hyper):
    text_a: str
    text_b: str | None = None
    labels: list[str] = Field(min_length=2)
    id: str = "{idx}"
    group: str | None = None
    metrics: list[Literal["accuracy", "f1"]] = ["accuracy"]
    score_metric: Literal["accuracy", "f1"] = "accuracy"
    split_valid: SplitValid | None = None


class DataSpec(_Strict):
    folder: str = "glue_filtered"
    train: str = "{member}.train.jsonl"
    report: str = "{member}.valid.jsonl"


def validated(model: type[BaseModel], document: Any, where: str, section: str | None = None) -> Any:
    """``document`` (``section`` of the file ``where`` names) as ``model``; the first error as one line naming
    ``where`` and the field."""
    try:
        return model.model_validate(document)
    except ValidationError as err:
        raise UserError(f"{where}: {validation_line(err, section=section)}") from None
