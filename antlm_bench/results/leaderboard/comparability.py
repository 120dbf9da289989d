"""Are two cells measured by one instrument? The one rule that the board, ``sweep --until-decided`` and ``check``
read before they test a gap.

A gap between two numbers is a fact about two models only when one instrument measured both. Three things make
two instruments out of one task:
- the scoring method: clm and pll put different numbers on the same model (a gap would compare the methods);
- the tokenization, for a per-token loss: nats per token of two tokenizers count different tokens;
- the items: a ``--limit`` scores the first N items of each subtask, another limit or every item other items.

The answer is typed (``Incomparable``), carried on each ``Comparison``, and turned into words in one place here,
so no reader ever matches a note's text. Conventions and evaluation sets are settled earlier, where the results
are read (a board filters on them; ``check`` refuses two of either).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from antlm_bench.results.leaderboard.definition import metric_kind
from antlm_bench.results.leaderboard.model import Cell


class Incomparable(str, Enum):
    """Why a gap is not tested: the two sides are measured by different instruments."""

    SCORING = "scoring"  # two scoring methods (clm vs pll)
    TOKENIZATION = "tokenization"  # per-token losses of rows that may tokenize differently
    ITEMS = "items"  # numbers on different items (a --limit against another, or every item)
    TASKS = "tasks"  # a macro: one of its tasks is measured by different instruments


@dataclass(frozen=True)
class InstrumentDifference:
    """The reason, its short form (``clm vs pll``, ``--limit 50 vs every item``) and the note a reader sees."""

    reason: Incomparable
    detail: str
    note: str


def limit_text(limit: int | None) -> str:
    """``--limit 50`` (the first 50 items of each subtask), or ``every item``."""
    return "every item" if limit is None else f"--limit {limit}"


def instrument_difference(a: Cell, b: Cell) -> InstrumentDifference | None:
    """None when one instrument measured both cells; else the first difference found (method, tokens, items)."""
    if a.scoring != b.scoring:
        detail = f"{a.scoring} vs {b.scoring}"
        return InstrumentDifference(Incomparable.SCORING, detail,
                                    f"scored by {detail}: different instruments, not tested")
    if metric_kind(a.metric).per_token and (a.tokenizer_key is None or a.tokenizer_key != b.tokenizer_key):
        return InstrumentDifference(Incomparable.TOKENIZATION, "other tokens",
                                    "per-token losses of rows that may tokenize differently (another recipe, preset "
                                    "or corpus): different instruments, not tested")
    if a.limit != b.limit:
        detail = f"{limit_text(a.limit)} vs {limit_text(b.limit)}"
        return InstrumentDifference(Incomparable.ITEMS, detail,
                                    f"{detail}: different instruments (other items), not tested")
    return None


def macro_difference(task_differences: list[InstrumentDifference], a: Cell, b: Cell) -> InstrumentDifference | None:
    """A macro's instrument: different when one of its tasks is scored by two methods, or when the two macros
    stand on other items."""
    details = sorted({d.detail for d in task_differences if d.reason is Incomparable.SCORING})
    if a.limit != b.limit:
        details.append(f"{limit_text(a.limit)} vs {limit_text(b.limit)}")
    if not details:
        return None
    detail = ", ".join(details)
    return InstrumentDifference(Incomparable.TASKS, detail,
                                f"{detail} among its tasks: different instruments, not tested")


__all__ = ["Incomparable", "InstrumentDifference", "instrument_difference", "limit_text", "macro_difference"]
