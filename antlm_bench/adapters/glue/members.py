"""A GLUE member's data: its files in the data folder, and its records read as :class:`Example` s.

A member without a training file (BoolQ and MultiRC in the BabyLM data) gives ``split_valid:`` in the spec: its
valid file is split deterministically (by the key it names) into a training and a reporting part, and the notes
say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from antlm_bench.adapters.glue.data import Example, split_by_key
from antlm_bench.adapters.glue.spec import DataSpec, MemberSpec
from antlm_bench.data import read_jsonl
from antlm_bench.errors import UserError


@dataclass
class MemberData:
    name: str
    spec: MemberSpec
    train: list[Example]
    report: list[Example]
    notes: list[str] = field(default_factory=list)


def find_split(data_dir: Path, data: DataSpec, template: str, member: str) -> Path | None:
    """The file of one split, plain or ``.xz``; None when neither is there."""
    base = data_dir / data.folder / template.format(member=member)
    for candidate in (base, base.with_name(base.name + ".xz")):
        if candidate.is_file():
            return candidate
    return None


def find_member_files(task: str, data: DataSpec, spec: MemberSpec, data_dir: Path, member: str
                      ) -> tuple[Path | None, Path]:
    """(training file or None when the member splits its valid file, reported file); missing -> UserError."""
    report_path = find_split(data_dir, data, data.report, member)
    if report_path is None:
        missing = data_dir / data.folder / data.report.format(member=member)
        raise UserError(
            f"{task}/{member}: missing split {missing}(.xz); check --data-dir or run `antlm-bench data fetch`"
        )
    train_path = find_split(data_dir, data, data.train, member)
    if train_path is None and spec.split_valid is None:
        missing = data_dir / data.folder / data.train.format(member=member)
        raise UserError(
            f"{task}/{member}: missing split {missing}(.xz); add the file, or give the member "
            "`split_valid:` in the task spec"
        )
    return train_path, report_path


def read_member(task: str, data: DataSpec, spec: MemberSpec, data_dir: Path, member: str) -> MemberData:
    """The member's training and reported examples (the valid file split in two where the spec says so)."""
    train_path, report_path = find_member_files(task, data, spec, data_dir, member)
    report = read_examples(report_path, task, spec, member)
    notes: list[str] = []
    if train_path is not None:
        train = read_examples(train_path, task, spec, member)
    else:
        assert spec.split_valid is not None
        # the BabyLM data has no training file for this member: train on part of valid, report the rest
        fraction = spec.split_valid.report_fraction
        train, report = split_by_key(report, fraction, salt=f"{task}/{member}/report")
        key = spec.split_valid.key.strip("{}").replace("[", ".").replace("]", "")
        notes.append(
            f"{member}: no train file; valid split by {key} (sha256 bucket < {fraction}) into "
            f"{len(train)} training / {len(report)} reported examples"
        )
    if not report:
        raise UserError(f"{task}/{member}: {report_path} has no examples to report on")
    return MemberData(member, spec, train, report, notes)


def read_examples(path: Path, task: str, spec: MemberSpec, member: str) -> list[Example]:
    examples = []
    for number, record in enumerate(read_jsonl(path), start=1):
        where = f"{path} record {number}"
        text_a = _fill(spec.text_a, record, where, member)
        text_b = _fill(spec.text_b, record, where, member) if spec.text_b is not None else None
        example_id = _fill(spec.id, record, where, member)
        group = _fill(spec.group, record, where, member) if spec.group else example_id
        label = record.get("label")
        if isinstance(label, bool):
            label = int(label)
        if not isinstance(label, int) or not 0 <= label < len(spec.labels):
            choices = ", ".join(f"{i}={name}" for i, name in enumerate(spec.labels))
            raise UserError(f"{where}: unknown label {label!r} for {task}/{member}; expected {choices}")
        examples.append(Example(example_id, text_a, text_b, label, group))
    if not examples:
        raise UserError(f"{path}: no records (the file is empty or blank) for {task}/{member}; the data is "
                        "damaged, check it with `antlm-bench data verify` or fetch it again")
    return examples


def _fill(template: str, record: dict[str, Any], where: str, member: str) -> str:
    try:
        return template.format_map(record)
    except (KeyError, IndexError, TypeError) as err:
        raise UserError(f"{where}: field {err} missing; {member} needs {template!r}") from None
