"""Named scoring conventions: how texts are presented to a model and which items count, as each BabyLM pipeline
does.

- ``babylm-2025`` (the default): texts are scored as given, no leading space (the BabyLM 2025 evaluation
  pipeline).
- ``babylm-2024``: ``" " + text``, as the 2024 lm-eval-harness BLiMP / supplement / EWoK tasks that the AntLM
  paper used present them. On a tiny model this alone moved BLiMP from 51.2 to 52.4.
- ``babylm-2026`` (evaluation only: ``eval``, not ``train`` / ``run``): as 2025, and entity tracking drops the
  items whose correct option is a "nothing" answer (the 2026 pipeline's collate_preds.py counts 6,780 items in its
  18 groups where the 2025 files hold 9,483, and its leaderboard scores the key ``entity_tracking_filtered`` with
  ``skip_nothing_targets``): "nothing." is only ever an option where it is the correct one, so a model that likes
  the word scored those items for free. The 2026 fast entity-tracking set is the ``regular`` file, filtered; the
  2026 task group (``babylm-2026``) has no WUG task, which the 2026 pipeline no longer collates.

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
    # entity tracking: items whose correct option (the first) contains "nothing" are not scored
    skip_nothing_targets: bool = False


CONVENTIONS = {c.name: c for c in (Convention("babylm-2025", False), Convention("babylm-2024", True),
                                   Convention("babylm-2026", False, skip_nothing_targets=True))}
DEFAULT_CONVENTION = "babylm-2025"


def resolve_convention(name: str | Convention) -> Convention:
    """The named convention; an unknown name is one line listing the known ones."""
    if isinstance(name, Convention):
        return name
    if name not in CONVENTIONS:
        known = list(CONVENTIONS)
        raise UserError(f"--convention {name}: unknown; use {', '.join(known[:-1])} or {known[-1]}")
    return CONVENTIONS[name]
