"""Command-line values every stage shares, parsed once at the edge into typed values.

- :func:`parse_device` and :func:`resolve_device`: ``--device`` (auto, cpu, mps, cuda, cuda:N) checked once
  against this machine, and ``auto`` resolved the one way every command resolves it (CUDA when torch sees one).
- :func:`parse_seeds`: the one seeds grammar of ``run --seeds``, ``sweep --seeds``, a sweep file's ``seeds:`` and
  ``eval --seeds`` (GLUE fine-tuning seeds): integers and inclusive ranges separated by commas (``42``, ``1-3``,
  ``1,2,5-7``), or a YAML list of those. Repeats count once, the order given is kept. Parsed in time linear in the
  text and the seeds it names; a range of more than :data:`MAX_SEEDS` seeds (``1-10000000``) is refused before a
  single seed is made.
- :func:`parse_save_at_words`: ``--save-at-words`` (``train``, ``run``, a sweep's cells): word counts with K and M
  suffixes, or a BabyLM grid by name.
- :func:`parse_label`: ``run --label`` (and a sweep's negative control): a run's label, part of its name and its
  seeds (``runs.identity.training_seed``), never of its configuration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from antlm_bench.errors import UserError

# more seeds than this is a typo (1-10000000), never a study: each seed is a whole training run
MAX_SEEDS = 1000
# numpy's and torch's generators take seeds in [0, 2**32); one bit kept back for the offsets added per rank/step
MAX_SEED = 2**31 - 1
# minutes between resume points (`train`, `run`): the most a hard kill (SIGKILL, a lost machine) costs a run
SAVE_EVERY_MINUTES = 30.0

_ITEM = re.compile(r"\s*(\d{1,19})\s*(?:-\s*(\d{1,19})\s*)?")
EXAMPLE = "e.g. 42, 1-3 or 1,2,5-7"

_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")
# a label names a folder and a board row: lower-case letters, digits and inner hyphens, at most 40 characters
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")


def parse_device(name: str, option: str = "--device") -> str:
    """``name`` as given, if torch can use it here (auto, cpu, mps, cuda or cuda:N); else one :class:`UserError`
    naming ``option`` and what to use instead."""
    if not _DEVICE.fullmatch(name):
        raise UserError(f"{option} {name}: unknown; use auto, cpu, cuda or cuda:N")
    if name in ("auto", "cpu"):
        return name  # always usable; asked without importing torch (a model-free command's start stays fast)
    import torch

    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"{option} {name}: CUDA is not available on this machine; use {option} cpu")
    if name.startswith("cuda:") and int(name[5:]) >= torch.cuda.device_count():
        raise UserError(f"{option} {name}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                        f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if name == "mps" and not torch.backends.mps.is_available():
        raise UserError(f"{option} mps: not available on this machine; use {option} cpu")
    return name


def parse_label(value: str | None, option: str = "--label") -> str | None:
    """A run's label as given (None or empty: no label), if it can name a run folder and a board row; else one
    :class:`UserError` naming ``option`` and the rule."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _LABEL.fullmatch(value):
        raise UserError(f"{option} {value!r}: a label is 1 to 40 lower-case letters, digits and inner hyphens "
                        "(e.g. negative-control)")
    return value


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a CUDA device, else ``cpu``; any other name as given."""
    if name != "auto":
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def parse_seeds(value: str | int | Iterable[int | str], option: str = "--seeds") -> list[int]:
    """``"1-8"``, ``"1,2,5-7"``, an int or a list of those -> distinct seeds in the order given; anything else, an
    empty list, a backwards range, a seed outside [0, 2**31) or more than :data:`MAX_SEEDS` seeds is one
    :class:`UserError` naming ``option``."""
    if isinstance(value, bool):
        raise UserError(f"{option} {value!r}: give integers and ranges separated by commas, {EXAMPLE}")
    if isinstance(value, int):
        parts = [str(value)]
    elif isinstance(value, str):
        parts = value.split(",")
    elif isinstance(value, Iterable):
        parts = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                raise UserError(f"{option} {item!r}: each seed is an integer or a range such as 1-3")
            parts.extend(str(item).split(","))
    else:
        raise UserError(f"{option} {value!r}: give integers and ranges separated by commas, {EXAMPLE}")
    seeds: dict[int, None] = {}  # insertion-ordered set: linear, however many repeats
    for part in parts:
        match = _ITEM.fullmatch(part)
        if match is None:
            raise UserError(f"{option} {part.strip()!r}: give integers and ranges separated by commas, {EXAMPLE}")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise UserError(f"{option} {part.strip()}: the range runs backwards; write {last}-{first}")
        if last > MAX_SEED:
            raise UserError(f"{option} {part.strip()}: seeds run from 0 to {MAX_SEED}")
        if last - first + 1 + len(seeds) > MAX_SEEDS:  # counted before one seed is made
            raise UserError(f"{option} {part.strip()}: more than {MAX_SEEDS} seeds (each is a whole run); "
                            f"give a smaller range")
        for seed in range(first, last + 1):
            seeds[seed] = None
    if not seeds:
        raise UserError(f"{option}: give at least one seed, {EXAMPLE}")
    return list(seeds)


# --save-at-words grids by name: the BabyLM checkpoint rule (evaluation-pipeline-2025 README and collate_preds.py;
# the 2026 pipeline keeps it): every 1M words to 10M, every 10M to 100M (19 checkpoints, the strict-small track),
# and for the other tracks every 100M to 1,000M on top (28). ``babylm`` is the strict-small grid under its old name.
BABYLM_STRICT_SMALL_WORDS = [n * 1_000_000 for n in range(1, 10)] + [n * 10_000_000 for n in range(1, 11)]
BABYLM_STRICT_WORDS = BABYLM_STRICT_SMALL_WORDS + [n * 100_000_000 for n in range(2, 11)]
WORDS_GRIDS = {"babylm-strict-small": BABYLM_STRICT_SMALL_WORDS, "babylm-strict": BABYLM_STRICT_WORDS,
               "babylm": BABYLM_STRICT_SMALL_WORDS}
_WORDS_ITEM = r"(\d+(?:\.\d+)?)([KkMm]?)"


def parse_save_at_words(text: str | None) -> list[int]:
    """``--save-at-words``: a grid by name (``babylm-strict-small``: 19 counts, 1M..9M and 10M..100M;
    ``babylm-strict``: 28, adding 200M..1000M; ``babylm``: the strict-small grid) or a comma list of word counts
    (``500K``, ``1M``, ``2.5M``, ``1000``), possibly mixed (``babylm,5K``); sorted, without repeats. Refuses a
    zero, a fraction of a word, an unknown suffix."""
    if text is None or not str(text).strip():
        return []
    words: set[int] = set()
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        if item.lower() in WORDS_GRIDS:
            words.update(WORDS_GRIDS[item.lower()])
            continue
        match = re.fullmatch(_WORDS_ITEM, item)
        if not match:
            raise UserError(f"--save-at-words {text}: {item!r} is not a word count; use e.g. 1M,2M,500K or a grid: "
                            f"{', '.join(WORDS_GRIDS)}")
        scale = {"": 1, "k": 1_000, "m": 1_000_000}[match.group(2).lower()]
        value = float(match.group(1)) * scale
        if value != int(value) or int(value) <= 0:
            raise UserError(f"--save-at-words {text}: {item!r} is not a positive whole number of words")
        words.add(int(value))
    return sorted(words)


__all__ = ["BABYLM_STRICT_SMALL_WORDS", "BABYLM_STRICT_WORDS", "MAX_SEED", "MAX_SEEDS", "WORDS_GRIDS", "parse_device",
           "parse_label", "parse_save_at_words", "parse_seeds", "resolve_device"]
