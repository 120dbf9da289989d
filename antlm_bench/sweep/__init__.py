"""``antlm-bench sweep``: a grid of ``antlm-bench run`` cells (recipes x presets x schedules x seeds) run by an
executor, and ``--until-decided``'s rounds of seeds.

- ``settings``: the sweep file (YAML) and the command line's values over it, validated as one ``SweepSettings``;
- ``grid``: the grid and its cells (each exactly a ``run`` cell: same folder, hashes and store);
- ``record``: the sweep folder (``<output>/sweep/``: the record, the decision, one log per cell);
- ``progress``: the live progress line;
- ``instruments``: the comparisons the board will not test (different instruments), said before the sweep starts;
- ``executors``: local worker processes and SLURM job arrays (submitit);
- ``squeue``: the SLURM jobs' states from squeue, not sacct (clusters without accounting too);
- ``rule``: the stopping rule: each schedule against the baseline after a round (``results.stats.sequential``), and
  which primary endpoints may speak (the sensitivity rule);
- ``decision_file``: the decision's file (``decision.json``), written, read and checked against the tables beside it;
- ``decision_text``: the decision in words, at each look and under the board;
- ``calibration``: the sensitivity rule on simulated sweeps with a known truth;
- ``plan``: the settings planned before anything runs (the grid resolved, the fewest seeds, the executor, the check
  that skips finished cells), with ``run``'s option parser as the command layer lends it;
- ``loop``: the sweep from start to end.

The command, ``antlm_bench/cli/sweep.py``, turns its options into one ``SweepSettings``, calls :func:`prepare_sweep`
and prints; docs/sweep.md says how to use it, on a laptop and on a cluster.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> module, imported on first use: reading a decision (``leaderboard``) must not import the trainer, which
# ``executors`` and ``plan`` do through ``pipeline`` (torch)
_EXPORTS = {
    "decision_text": ["decision_lines"],
    "executors": ["Executor", "LocalExecutor", "Slot", "SlurmExecutor", "SlurmResources", "SweepInterrupted",
                  "local_slots"],
    "grid": ["Grid", "GridCell", "canonical_schedules", "next_seeds", "parse_seeds", "split_top_level"],
    "loop": ["PendingCheck", "SweepOutcome", "SweepPlan", "run_sweep"],
    "plan": ["PreparedSweep", "prepare_sweep"],
    "progress": ["Progress"],
    "record": ["SweepFolder", "SweepRecord"],
    "rule": ["Decision", "Rule"],
    "settings": ["SlurmSettings", "SweepSettings", "UntilDecidedSettings", "settings_of"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
