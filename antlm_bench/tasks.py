"""Task specs (``tasks/*.yaml``) and how a ``--tasks`` string resolves to them.

A spec names its adapter class (``class:``), a name in :data:`antlm_bench.registry.TASK_CLASSES`; the class
reads the data and knows how to score it. A group spec (``group:``) names several tasks.
``--tasks blimp,glue:rte,mrpc,ewok`` selects BLiMP, two GLUE members and EWoK: names after ``task:`` that are
not themselves tasks are members of that task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from antlm_bench.errors import UserError, did_you_mean, validation_line
from antlm_bench.registry import TASK_CLASSES, discover


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    description: str = ""
    class_name: str = Field(alias="class")
    data: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    metric: str = "accuracy"
    members: dict[str, dict[str, Any]] = {}  # GLUE-style tasks: member name -> its settings
    defaults: dict[str, Any] = {}
    source: Path | None = None


class GroupSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group: str
    description: str = ""
    task: list[str]
    source: Path | None = None


@dataclass
class TaskRequest:
    """One task the user asked for, with the members they named (None: all)."""

    spec: TaskSpec
    members: list[str] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def adapter(self) -> Any:
        """The spec's adapter: an instance of its ``class:`` (an ``antlm_bench.adapters.base.TaskAdapter``, looked up
        in the registry, which imports a shipped class on first use)."""
        cls = TASK_CLASSES.get(self.spec.class_name, where=f"{self.spec.source}: field class")
        reported = tuple(getattr(cls, "metrics", ()))
        if self.spec.metric not in reported:
            known = ", ".join(reported) or f"none declared (give {cls.__name__} a `metrics` tuple)"
            raise UserError(f"{self.spec.source}: field metric: {self.spec.metric!r} is not a metric that "
                            f"{self.spec.class_name} reports (it reports: {known}); name one of those")
        return cls(self.spec, self.members)


def _validate(model: type[BaseModel], path: Path, document: dict[str, Any]) -> Any:
    try:
        return model.model_validate({**document, "source": path})
    except ValidationError as err:
        raise UserError(f"{path}: {validation_line(err)}") from None


def all_specs() -> dict[str, TaskSpec | GroupSpec]:
    specs: dict[str, TaskSpec | GroupSpec] = {}
    for name, (path, document) in discover("tasks").items():
        specs[name] = _validate(GroupSpec if "group" in document else TaskSpec, path, document)
    return specs


def _selects_subtasks(spec: TaskSpec) -> bool:
    """The spec's adapter selects subtasks from its data (``adapters.base.TaskAdapter.selects_subtasks``)."""
    return bool(getattr(TASK_CLASSES.get(spec.class_name, where=f"{spec.source}: field class"),
                        "selects_subtasks", False))


def resolve_tasks(text: str | list[str]) -> list[TaskRequest]:
    """Turn ``"blimp,glue:rte,mrpc"`` (or a list of such tokens) into task requests, groups expanded."""
    tokens = [t.strip() for t in (text if isinstance(text, list) else [text]) for t in t.split(",")]
    tokens = [t.lower() for t in tokens if t]
    if not tokens:
        raise UserError("--tasks is empty; name at least one task (see `antlm-bench list tasks`)")
    specs = all_specs()
    requests: dict[str, TaskRequest] = {}
    last: TaskRequest | None = None

    def add(name: str, members: list[str] | None, seen: tuple[str, ...] = ()) -> TaskRequest | None:
        spec = specs[name]
        if isinstance(spec, GroupSpec):
            if name in seen:
                raise UserError(f"{spec.source}: group {name} includes itself")
            for member in spec.task:
                if member not in specs:
                    raise UserError(f"{spec.source}: group {name} names unknown task {member!r}")
                add(member, None, (*seen, name))
            return None
        request = requests.setdefault(name, TaskRequest(spec, members))
        if members is None:
            request.members = None
        elif request.members is not None:
            request.members = sorted(set(request.members) | set(members))
        return request

    for token in tokens:
        name, _, member = token.partition(":")
        if name in specs:
            last = add(name, [member] if member else None)
        elif last is not None and last.members is not None and not member:
            last.members = sorted(set(last.members) | {name})  # "glue:rte,mrpc": mrpc belongs to glue
        else:
            known = ", ".join(sorted(specs))
            raise UserError(f"unknown task {token!r} in --tasks; {did_you_mean(name, set(specs))}known tasks and "
                            f"groups: {known}")
    for request in requests.values():
        if request.members and request.spec.members:
            unknown = sorted(set(request.members) - set(request.spec.members))
            if unknown:
                raise UserError(
                    f"task {request.name} has no member {unknown[0]!r}; "
                    f"{did_you_mean(unknown[0], request.spec.members)}members: {', '.join(request.spec.members)}"
                )
        elif request.members and not request.spec.members and not _selects_subtasks(request.spec):
            raise UserError(f"task {request.name} has no members to select; write just {request.name!r}")
    return list(requests.values())
