"""The examples of a GLUE member: read from its files, split deterministically, the reported split sealed.

Model selection uses a held-out slice of the *training* split (or, under the ``babylm-official`` protocol, the
reported split itself: ``protocol``); the reported split is sealed (:class:`SealedSplit`) until selection is over. Every split is fixed by the examples' ids alone: the same on every machine, in every order.
A member without a training file (BoolQ and MultiRC in the BabyLM data) gives ``split_valid:`` in the spec: its
valid file is split deterministically (by the key it names) into a training and a reporting part, and the notes
say so.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from antlm_bench.adapters.glue.spec import DataSpec, MemberSpec
from antlm_bench.data import read_jsonl
from antlm_bench.errors import UserError


@dataclass
class Example:
    id: str
    text_a: str
    text_b: str | None
    label: int
    group: str = ""  # split / leakage unit (MultiRC: the paragraph); defaults to the id


class SealedSplit(Sequence):
    """The reported split. Reading it before :meth:`unseal` is a bug: it would let the reported numbers steer
    model selection. The fine-tuning loop unseals it only after the best epoch is fixed."""

    def __init__(self, examples: Sequence[Example]) -> None:
        self._examples = examples
        self._sealed = True

    def unseal(self) -> SealedSplit:
        self._sealed = False
        return self

    def _check(self) -> None:
        if self._sealed:
            raise RuntimeError("the reported split was read before model selection finished")

    def __len__(self) -> int:
        self._check()
        return len(self._examples)

    def __getitem__(self, index):  # type: ignore[override]
        self._check()
        return self._examples[index]

    def __iter__(self) -> Iterator[Example]:
        self._check()
        return iter(self._examples)


def hash_unit(key: str, salt: str) -> float:
    """A number in [0, 1) fixed by ``salt`` and ``key`` alone: same split on every machine, in every order."""
    digest = hashlib.sha256(f"{salt}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_by_key(
    examples: Sequence[Example], fraction: float, salt: str
) -> tuple[list[Example], list[Example]]:
    """(rest, held) where ``held`` has the examples whose group hashes below ``fraction``.

    Examples of one group (MultiRC: one paragraph) always land on the same side.
    """
    rest, held = [], []
    for example in examples:
        (held if hash_unit(example.group or example.id, salt) < fraction else rest).append(example)
    return rest, held


def hash_order(examples: Sequence[Example], salt: str) -> list[Example]:
    """The examples in a fixed pseudo-random order (for seed-independent subsampling)."""
    return sorted(examples, key=lambda e: (hash_unit(e.id, salt), e.id))


@dataclass
class Splits:
    train: list[Example]
    dev: list[Example]  # for model selection only
    report: SealedSplit
    notes: list[str] = field(default_factory=list)
    selected_on: str = "training slice"  # where ``dev`` comes from: "training slice" or "reported"


def make_splits(
    train: Sequence[Example],
    report: Sequence[Example],
    dev_fraction: float,
    max_train_examples: int | None,
    name: str,
) -> Splits:
    """Carve the selection slice from the training split; cap the training examples for small budgets."""
    if not 0 < dev_fraction < 1:
        raise UserError(f"dev_fraction must be in (0, 1), got {dev_fraction}")
    rest, dev = split_by_key(train, dev_fraction, salt=f"{name}/dev")
    if not rest or not dev:
        raise UserError(
            f"{name}: {len(train)} training examples are too few to hold out a dev slice "
            f"(dev_fraction {dev_fraction}); give more training data"
        )
    notes = [f"best epoch chosen on a {dev_fraction:.0%} slice of the training split"]
    if max_train_examples is not None and max_train_examples < len(rest):
        if max_train_examples < 1:
            raise UserError(f"max_train_examples must be >= 1, got {max_train_examples}")
        rest = hash_order(rest, salt=f"{name}/subsample")[:max_train_examples]
        # keep the train:dev ratio, so that a small budget does not spend most of its time on selection
        n_dev = max(1, math.ceil(max_train_examples * dev_fraction / (1 - dev_fraction)))
        dev = hash_order(dev, salt=f"{name}/subsample")[:n_dev]
        notes.append(f"max_train_examples={max_train_examples}")
    return Splits(train=list(rest), dev=list(dev), report=SealedSplit(report), notes=notes)


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
        if os.path.lexists(candidate):  # a folder or a dangling link where the split belongs: as BLiMP says it
            kind = ("a folder" if candidate.is_dir() else "a dangling link" if candidate.is_symlink()
                    else "not a regular file")
            raise UserError(f"{candidate}: {kind} where a data file belongs; remove it and re-fetch the data "
                            "(`antlm-bench data fetch`)")
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
        text_a = _fill(spec.text_a, record, where, member, text=True)
        text_b = _fill(spec.text_b, record, where, member, text=True) if spec.text_b is not None else None
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


def _fill(template: str, record: dict[str, Any], where: str, member: str, text: bool = False) -> str:
    for _, name, _, _ in string.Formatter().parse(template) if text else ():
        value = record.get(name) if name else ""
        if name and name in record and not isinstance(value, str):
            # str.format would make "12345" or "None" of it: a sentence the data never held
            raise UserError(f"{where}: field {name!r} is {json.dumps(value)[:40]}, not text; {member} needs "
                            f"{template!r}: fix the record or re-fetch the file")
    try:
        return template.format_map(record)
    except (KeyError, IndexError, TypeError) as err:
        raise UserError(f"{where}: field {err} missing; {member} needs {template!r}") from None
