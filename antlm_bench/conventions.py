"""Named scoring conventions: how minimal-pair texts are presented to a model, as each BabyLM pipeline does.

- ``babylm-2025`` (the default): texts are scored as given, no leading space (the BabyLM 2025 evaluation
  pipeline).
- ``babylm-2024``: ``" " + text``, as the 2024 lm-eval-harness BLiMP / supplement / EWoK tasks that the AntLM
  paper used present them. On a tiny model this alone moved BLiMP from 51.2 to 52.4.

The convention is resolved once, at the edge (``resolve_convention``), and handed down as a ``Convention``; every
score row records its name (``convention`` column), and a leaderboard or a check compares rows of one convention
only.
"""

from __future__ import annotations

from dataclasses import dataclass

from antlm_bench.errors import UserError


@dataclass(frozen=True)
class Convention:
    name: str
    leading_space: bool  # minimal-pair texts are scored as " " + text


CONVENTIONS = {c.name: c for c in (Convention("babylm-2025", False), Convention("babylm-2024", True))}
DEFAULT_CONVENTION = "babylm-2025"


def resolve_convention(name: str | Convention) -> Convention:
    """The named convention; an unknown name is one line listing the known ones."""
    if isinstance(name, Convention):
        return name
    if name not in CONVENTIONS:
        raise UserError(f"--convention {name}: unknown; use {' or '.join(CONVENTIONS)}")
    return CONVENTIONS[name]
