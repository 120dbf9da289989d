"""GLUE's options: the settings a user gives for the whole task (hyper-parameters over the spec's, the protocol,
the fine-tuning arithmetic), built once where they enter (``eval``'s and ``run``'s flags, ``evaluate(options=...)``,
a preset's ``glue_budget``) and carried down typed (``EvalContext.options``); the spec's ``defaults`` have the same
shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ConfigDict, ValidationError, field_validator

from antlm_bench.adapters.glue.protocol import glue_protocol
from antlm_bench.adapters.glue.spec import Hyper, validated
from antlm_bench.errors import UserError, validation_line


class GlueOptions(Hyper):
    """The spec's ``defaults`` and the command-line options: the hyper-parameters, and what holds for the whole task
    (a member cannot differ in it: the task's score averages its members). Frozen: built once at the edge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: str | None = None  # a name of protocol.PROTOCOLS (--glue-protocol), canonical; None: default
    # fine-tuning's arithmetic (models.precision, the rule training follows); None: auto
    precision: Literal["auto", "fp32", "bf16"] | None = None
    quiet: bool = False  # no per-epoch lines on stderr when no progress bar is shown (library use, tests)

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, name: str | None) -> str | None:
        return None if name is None else glue_protocol(name).name  # an unknown name: one line naming the known

    @classmethod
    def of_flags(cls, values: Mapping[str, Any], flags: Mapping[str, str] | None = None) -> GlueOptions:
        """The options of a command's flag values by field name (``None``: not given); a rejected value is one
        line naming its flag (``flags`` maps a field to a flag other than ``--<field>``, e.g. ``--glue-epochs``)."""
        try:
            return cls.model_validate({k: v for k, v in values.items() if v is not None})
        except ValidationError as err:
            raise UserError(validation_line(err, option=True, flags=flags)) from None

    def under(self, defaults: Mapping[str, Any], where: str) -> GlueOptions:
        """These options over ``defaults`` (a preset's ``glue_budget``, validated here naming ``where``): a field
        given here wins, an unset one takes the default's value."""
        base = validated(GlueOptions, dict(defaults), where)
        return base.model_copy(update=self.given())

    def given(self) -> dict[str, Any]:
        """The fields set to other than their default, as plain values: what a run's evaluation marker hashes and
        ``eval.json`` records."""
        return self.model_dump(exclude_defaults=True)
