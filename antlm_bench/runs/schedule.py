"""The schedule grammar: which objective trains the model for how many epochs.

    schedule := sequence
    sequence := item ("+" item)*
    item     := phase | repeat
    phase    := NUMBER "_" objective                       4_CLM   0.5_MLM   2_MIX(CLM:1,MLM:15)
    repeat   := INTEGER "x" "(" sequence ")"               3x(1_CLM+2_MLM)
    objective:= "CLM" | "MLM" | "MNTP" | mixture
    mixture  := ("MIX" | "BATCHMIX") "(" NAME ":" NUMBER ("," NAME ":" NUMBER)* ")"

Two mixtures: ``MIX(CLM:1,MLM:15)`` splits EVERY global batch by the weights, row by row (GPT-BERT: each step
trains both objectives; with 32 rows, 2 CLM rows and 30 MLM rows); ``BATCHMIX(CLM:1,MLM:15)`` draws ONE objective
per optimizer step by the weights (the CLM share of an epoch then wanders: 1.8%-10.1% against 6.25% was measured
on the tiny preset). Both are deterministic functions of (seed, step), so a resumed run repeats them exactly.

Whitespace anywhere between tokens and the case of letters are forgiven. Every schedule has one canonical string
(``Schedule.canonical``): epochs written as the shortest decimal (``4`` not ``4.0``, ``0.5``), objectives in upper
case, MIX weights in the order given, and repeat groups KEPT as groups (``3x(1_CLM+2_MLM)``): the string a table
stores says how the schedule was written, while ``Schedule.phases`` is the flat list of phases the trainer runs.
Adjacent phases of the same objective are not merged: a phase boundary restarts the learning-rate schedule.

A bad schedule raises ``ScheduleError`` (a ``UserError``): one line saying what was expected at which character,
and ``context_lines`` (the schedule and a caret under the offending character) that the CLI prints below it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from antlm_bench.errors import UserError

OBJECTIVES = ("CLM", "MLM", "MNTP")  # objectives a MIX may draw from
MIXTURES = ("MIX", "BATCHMIX")  # per sample (rows of every batch) and per batch (one objective per step)
ALL_OBJECTIVES = (*OBJECTIVES, *MIXTURES)
MAX_PHASES = 10_000  # after expanding repeats; a larger number is a typo, not a schedule
MAX_DEPTH = 32  # nested repeat groups; the parser recurses once per level, so a bound keeps it off RecursionError

# which attention mask each objective trains with (mixtures: each part's own, row by row or batch by batch)
ATTENTION_MODE = {"CLM": "causal", "MLM": "bidirectional", "MNTP": "bidirectional", "MIX": "per row",
                  "BATCHMIX": "per batch"}


class ScheduleError(UserError):
    """A malformed schedule; ``position`` is the 0-based offending character in ``text``."""

    def __init__(self, text: str, position: int, expected: str) -> None:
        self.text = text
        self.position = max(0, min(position, len(text)))
        if not text.strip():
            where = ""
        elif self.position >= len(text):
            where = " at the end"
        else:
            where = f" at character {self.position + 1}"
        # a schedule of thousands of characters would make a line nobody reads; the caret line shows it whole
        shown = text if len(text) <= 80 else text[:60] + "..." + text[-10:]
        super().__init__(
            f"schedule {shown!r}: {expected}{where}; write e.g. 4_CLM+16_MLM+4_CLM, 0.5_MNTP, 2_MIX(CLM:1,MLM:15), "
            "3x(1_CLM+2_MLM)"
        )

    @property
    def context_lines(self) -> list[str]:
        """The schedule and a caret under the offending character, for the CLI to print below the error."""
        return [self.text, " " * self.position + "^"]


def format_number(value: float) -> str:
    """The shortest decimal that reads back as the same float, never in exponent form: 4.0 -> "4", 0.5 -> "0.5"."""
    text = format(Decimal(repr(float(value))), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


@dataclass
class Phase:
    """One contiguous stretch of training under one objective (``weights`` only for a mixture, in the order
    given)."""

    epochs: float
    objective: str
    weights: dict[str, float] | None = None

    @property
    def label(self) -> str:
        """The objective as written in a schedule: ``CLM``, ``MIX(CLM:1,MLM:15)`` or ``BATCHMIX(CLM:1,MLM:15)``."""
        if self.objective not in MIXTURES:
            return self.objective
        assert self.weights is not None
        return self.objective + "(" + ",".join(f"{name}:{format_number(w)}" for name, w in self.weights.items()) + ")"

    @property
    def canonical(self) -> str:
        return f"{format_number(self.epochs)}_{self.label}"

    @property
    def attention_mode(self) -> str:
        return ATTENTION_MODE[self.objective]

    @property
    def dominant_objective(self) -> str:
        """The objective that decides the LR schedule and the scoring method (a mixture: the heaviest weight)."""
        if self.objective not in MIXTURES:
            return self.objective
        assert self.weights
        return max(self.weights.items(), key=lambda kv: kv[1])[0]  # max keeps the first of equal weights


@dataclass
class Repeat:
    """``times x (items)``: a group repeated in place."""

    times: int
    items: list[Phase | Repeat] = field(default_factory=list)

    @property
    def canonical(self) -> str:
        return f"{self.times}x(" + "+".join(item.canonical for item in self.items) + ")"

    def expand(self) -> list[Phase]:
        return [phase for _ in range(self.times) for phase in _expand(self.items)]


Item = Phase | Repeat


def _expand(items: list[Item]) -> list[Phase]:
    out: list[Phase] = []
    for item in items:
        out.extend(item.expand() if isinstance(item, Repeat) else [item])
    return out


@dataclass
class Schedule:
    """A parsed schedule: ``items`` as written (repeat groups kept), ``phases`` expanded in training order."""

    items: list[Item]

    @property
    def phases(self) -> list[Phase]:
        return _expand(self.items)

    @property
    def canonical(self) -> str:
        return "+".join(item.canonical for item in self.items)

    @property
    def total_epochs(self) -> float:
        return math.fsum(phase.epochs for phase in self.phases)

    def __str__(self) -> str:
        return self.canonical


class _Parser:
    """Recursive descent over the raw text, so that every error knows its character position."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0  # repeat groups open at the current position

    # -- lexical helpers ---------------------------------------------------------------------------------------
    def _skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _peek(self) -> str:
        self._skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _fail(self, expected: str, position: int | None = None) -> ScheduleError:
        return ScheduleError(self.text, self.pos if position is None else position, expected)

    def _expect(self, char: str, what: str) -> None:
        if self._peek() != char:
            raise self._fail(f"expected {what}")
        self.pos += 1

    def _number(self, what: str) -> tuple[str, int]:
        """Digits with at most one decimal point; returns (text, start position)."""
        self._skip()
        start = self.pos
        seen_dot = False
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char.isdigit() and char.isascii():
                self.pos += 1
            elif char == "." and not seen_dot:
                seen_dot = True
                self.pos += 1
            else:
                break
        literal = self.text[start : self.pos]
        if not any(c.isdigit() for c in literal):
            self.pos = start
            raise self._fail(f"expected {what}")
        return literal, start

    def _word(self) -> tuple[str, int]:
        self._skip()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isascii() and self.text[self.pos].isalpha():
            self.pos += 1
        return self.text[start : self.pos].upper(), start

    # -- grammar -----------------------------------------------------------------------------------------------
    def schedule(self) -> Schedule:
        if not self.text.strip():
            raise self._fail("the schedule is empty", 0)
        items = self.sequence()
        if self._peek():
            char = self._peek()
            hint = "'+' between phases" if char != ")" else "'+' or the end (this ')' closes no group)"
            raise self._fail(f"expected {hint}, found {char!r}")
        return Schedule(items)

    def sequence(self) -> list[Item]:
        items = [self.item()]
        while self._peek() == "+":
            self.pos += 1
            items.append(self.item())
        return items

    def item(self) -> Item:
        literal, start = self._number("a number of epochs (or a repeat count like 3x)")
        after = self._peek()
        if after in ("x", "X"):
            if "." in literal or not literal.strip("0"):
                raise self._fail("expected a whole repeat count of at least 1", start)
            # digits counted before int(): it refuses literals of more than 4300 digits with a ValueError
            if len(literal.lstrip("0")) > len(str(MAX_PHASES)) or int(literal) > MAX_PHASES:
                raise self._fail(f"expected a repeat count of at most {MAX_PHASES}", start)
            self.pos += 1
            self._expect("(", "'(' after the repeat count")
            if self.depth >= MAX_DEPTH:
                raise self._fail(f"expected at most {MAX_DEPTH} nested repeat groups", self.pos - 1)
            self.depth += 1
            items = self.sequence()
            self.depth -= 1
            self._expect(")", "')' closing the repeat group")
            return Repeat(int(literal), items)
        if after != "_":
            raise self._fail("expected '_' between the epochs and the objective (as in 4_CLM)")
        epochs = float(literal)
        if not math.isfinite(epochs):
            raise self._fail("expected a finite number of epochs", start)
        if not epochs > 0:
            raise self._fail("expected a positive number of epochs", start)
        self.pos += 1
        return self.objective(epochs)

    def objective(self, epochs: float) -> Phase:
        name, start = self._word()
        if name not in ALL_OBJECTIVES:
            raise self._fail(f"expected an objective ({', '.join(ALL_OBJECTIVES)})", start)
        if name not in MIXTURES:
            return Phase(epochs, name)
        self._expect("(", f"'(' after {name}, as in {name}(CLM:1,MLM:15)")
        weights: dict[str, float] = {}
        while True:
            part, part_start = self._word()
            if part not in OBJECTIVES:
                raise self._fail(f"expected an objective to mix ({', '.join(OBJECTIVES)})", part_start)
            if part in weights:
                raise self._fail(f"expected each objective once in {name}; {part} repeats", part_start)
            self._expect(":", f"':' and a weight after {part}")
            literal, weight_start = self._number(f"a weight for {part}")
            weight = float(literal)
            if not (weight > 0 and math.isfinite(weight)):
                raise self._fail("expected a positive weight", weight_start)
            weights[part] = weight
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect(")", f"',' or ')' in {name}(...)")
            return Phase(epochs, name, weights)


def parse_schedule(text: str) -> Schedule:
    """Parse and validate a schedule string; raises ``ScheduleError`` pointing at the offending character."""
    schedule = _Parser(text).schedule()
    n_phases = _count_phases(schedule.items)
    if n_phases > MAX_PHASES:
        raise ScheduleError(text, 0, f"expected at most {MAX_PHASES} phases after expanding repeats, got {n_phases}")
    return schedule


def _count_phases(items: list[Item]) -> int:
    return sum(item.times * _count_phases(item.items) if isinstance(item, Repeat) else 1 for item in items)


def phase_end_steps(phases: list[Phase], steps_per_epoch: int) -> list[int]:
    """The global step at which each phase ends, from the CUMULATIVE epochs: phase k ends at
    ``round_half_up(epochs_1 + ... + epochs_k) * steps_per_epoch)``, so fractional phases never pile up rounding
    (``0.5_CLM+0.5_MLM`` takes as many steps as ``1_CLM``, ``3x(0.25_CLM+0.25_MLM)`` as many as ``1.5_CLM``).
    Epochs are summed as exact decimals (the schedule's own digits), never as floats; a phase too short to reach
    its own step still gets one (and the ones after it start one later: exactness needs phases of a step or more)."""
    ends: list[int] = []
    total = Fraction(0)
    for phase in phases:
        total += Fraction(format_number(phase.epochs))
        end = math.floor(total * steps_per_epoch + Fraction(1, 2))  # half up: 2.5 -> 3, as round-half-even is not
        ends.append(max(end, (ends[-1] if ends else 0) + 1))
    return ends
