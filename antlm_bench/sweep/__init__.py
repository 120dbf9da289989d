"""``antlm-bench sweep``: a grid of ``antlm-bench run`` cells (recipes x presets x schedules x seeds) run by an
executor, and ``--until-decided``'s rounds of seeds.

- ``settings``: the sweep file (YAML) and the command line's values over it, validated as one ``SweepSettings``;
- ``grid``: the grid and its cells (each exactly a ``run`` cell: same folder, hashes and store);
- ``record``: the sweep folder (``<output>/sweep/``: the record, the decision, one log per cell);
- ``progress``: the live progress line;
- ``instruments``: the comparisons the board will not test (different instruments), said before the sweep starts;
- ``executors``: local worker processes and SLURM job arrays (submitit);
- ``decision``: each schedule against the baseline after a round (``results.stats.sequential``), and which primary
  endpoints may speak (the sensitivity rule);
- ``calibration``: the sensitivity rule on simulated sweeps with a known truth;
- ``plan``: the settings planned before anything runs (the grid resolved, the fewest seeds, the executor, the check
  that skips finished cells), with ``run``'s option parser as the command layer lends it;
- ``loop``: the sweep from start to end.

The command, ``antlm_bench/cli/sweep.py``, turns its options into one ``SweepSettings``, calls :func:`prepare_sweep`
and prints; docs/sweep.md says how to use it, on a laptop and on a cluster.
"""

from antlm_bench.sweep.decision import Decision, Rule, decision_lines
from antlm_bench.sweep.executors import (
    Executor,
    LocalExecutor,
    Slot,
    SlurmExecutor,
    SlurmResources,
    SweepInterrupted,
    local_slots,
)
from antlm_bench.sweep.grid import Grid, GridCell, canonical_schedules, next_seeds, parse_seeds, split_top_level
from antlm_bench.sweep.loop import PendingCheck, SweepOutcome, SweepPlan, run_sweep
from antlm_bench.sweep.plan import PreparedSweep, RunOption, RunParser, prepare_sweep
from antlm_bench.sweep.progress import Progress
from antlm_bench.sweep.record import SweepFolder, SweepRecord
from antlm_bench.sweep.settings import SlurmSettings, SweepSettings, UntilDecidedSettings, load_sweep_file, settings_of

__all__ = [
    "GridCell", "Decision", "Executor", "Grid", "LocalExecutor", "PendingCheck", "PreparedSweep", "Progress", "Rule",
    "RunOption", "RunParser", "SlurmExecutor", "SlurmResources", "SlurmSettings", "Slot", "SweepFolder",
    "SweepInterrupted", "SweepOutcome", "SweepPlan", "SweepRecord", "SweepSettings", "UntilDecidedSettings",
    "canonical_schedules", "decision_lines", "load_sweep_file", "local_slots", "next_seeds", "parse_seeds",
    "prepare_sweep", "run_sweep", "settings_of", "split_top_level",
]
