"""The ``antlm_state.json`` record that every AntLM checkpoint folder carries.

The trainer writes it (schedule, phase, epoch, step, tokens seen, seeds, hashes, version); the scorer reads it
to pick the scoring method of ``--scoring auto``: the method that matches how the last phase trained the model.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from antlm_bench.data.readers import read_json
from antlm_bench.errors import UserError

STATE_FILE = "antlm_state.json"

# how a phase's objective is scored (DESIGN.md: CLM -> clm, MLM -> pll, MNTP -> mntp)
SCORING_FOR_OBJECTIVE = {"CLM": "clm", "MLM": "pll", "MNTP": "mntp"}


def read_state(checkpoint: str | Path) -> dict[str, Any] | None:
    """The checkpoint's AntLM record, or None for a plain Hugging Face folder."""
    path = Path(checkpoint) / STATE_FILE
    if not path.is_file():
        return None
    state = read_json(path, "corrupt checkpoint record", "re-save the checkpoint")
    if not isinstance(state, dict) or "phase_objective" not in state:
        raise UserError(f"{path}: field phase_objective missing; not an antlm-bench checkpoint record")
    return state


def dominant_objective(objective: str) -> str:
    """``MIX(CLM:1,MLM:15)`` (or ``BATCHMIX(...)``) -> ``MLM`` (the heaviest weight; ties go to the first listed);
    plain names as is."""
    match = re.fullmatch(r"(?:BATCH)?MIX\((.*)\)", objective.strip().upper())
    if not match:
        return objective.strip().upper()
    best, best_weight = "", float("-inf")
    for part in match.group(1).split(","):
        name, _, weight = part.partition(":")
        if float(weight) > best_weight:
            best, best_weight = name.strip(), float(weight)
    return best


def auto_scoring_method(state: dict[str, Any] | None, is_masked_lm: bool) -> tuple[str, str]:
    """(method, why) for ``--scoring auto``."""
    if state is None:
        method = "pll" if is_masked_lm else "clm"
        kind = "masked" if is_masked_lm else "causal"
        return method, f"no {STATE_FILE}: plain {kind} LM, scored with {method}"
    objective = dominant_objective(str(state["phase_objective"]))
    if objective not in SCORING_FOR_OBJECTIVE:
        raise UserError(f"{STATE_FILE}: unknown phase_objective {state['phase_objective']!r}")
    method = SCORING_FOR_OBJECTIVE[objective]
    return method, f"last phase {state.get('phase_index')} was {state['phase_objective']}: scored with {method}"
