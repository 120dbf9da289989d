"""Examples, the sealed reported split, and deterministic (hash-based) splits.

Model selection uses a held-out slice of the *training* split; the reported split is sealed (:class:`SealedSplit`)
until selection is over. Every split is fixed by the examples' ids alone: the same on every machine, in every order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

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
    dev: list[Example]  # for model selection only; carved from the training split
    report: SealedSplit
    notes: list[str] = field(default_factory=list)


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
