"""Named scoring conventions: how minimal-pair texts are presented to a model, as each BabyLM pipeline does.

- ``babylm-2025`` (the default): texts are scored as given, no leading space (the BabyLM 2025 evaluation
  pipeline).
- ``babylm-2024``: ``" " + text``, as the 2024 lm-eval-harness BLiMP / supplement / EWoK tasks that the AntLM
  paper used present them. On a tiny model this alone moved BLiMP from 51.2 to 52.4.

Every score row records its convention (``convention`` column); a leaderboard ranks rows of one convention only,
and says which rows it left out. Tables written before the column read as ``babylm-2025``, or ``babylm-2024``
where the row's notes say ``leading_space`` (the old ``--leading-space`` option).
"""

from __future__ import annotations

from antlm_bench.errors import UserError

DEFAULT_CONVENTION = "babylm-2025"
# convention -> whether minimal-pair texts get a leading space
CONVENTIONS: dict[str, bool] = {"babylm-2025": False, "babylm-2024": True}


def resolve_convention(convention: str | None, leading_space: bool = False) -> tuple[str, bool]:
    """(convention, leading_space) from ``--convention`` and the older ``--leading-space`` (which names
    babylm-2024); a contradiction between the two is a user error."""
    if convention is None:
        return ("babylm-2024", True) if leading_space else (DEFAULT_CONVENTION, False)
    if convention not in CONVENTIONS:
        raise UserError(f"--convention {convention}: unknown; use {' or '.join(CONVENTIONS)}")
    if leading_space and not CONVENTIONS[convention]:
        raise UserError(f"--leading-space contradicts --convention {convention} (no leading space); drop one "
                        "(--convention babylm-2024 scores with the leading space)")
    return convention, CONVENTIONS[convention]
