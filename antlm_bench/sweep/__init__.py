"""``antlm-bench sweep``: a grid of ``antlm-bench run`` cells (recipes x presets x schedules x seeds) run by an
executor, and ``--until-decided``'s rounds of seeds.

- ``grid``: the grid and its cells (each exactly a ``run`` cell: same folder, hashes and store);
- ``record``: the sweep folder (``<output>/sweep/``: the record, the decision, one log per cell);
- ``progress``: the live progress line;
- ``instruments``: the comparisons the board will not test (different instruments), said before the sweep starts;
- ``executors``: local worker processes and SLURM job arrays (submitit);
- ``decision``: each schedule against the baseline after a round (``results.stats.sequential``);
- ``loop``: the sweep from start to end.

The command itself (options, YAML file, the check that skips finished cells) is ``antlm_bench/cli/sweep.py``;
docs/sweep.md says how to use it, on a laptop and on a cluster.
"""

from antlm_bench.sweep.decision import Comparison, Rule, decision_lines
from antlm_bench.sweep.executors import (
    Executor,
    LocalExecutor,
    Slot,
    SlurmExecutor,
    SlurmResources,
    SweepInterrupted,
    local_slots,
)
from antlm_bench.sweep.grid import Cell, Grid, canonical_schedules, next_seeds, parse_seeds, split_top_level
from antlm_bench.sweep.loop import PendingCheck, SweepOutcome, SweepPlan, run_sweep
from antlm_bench.sweep.progress import Progress
from antlm_bench.sweep.record import SweepFolder, SweepRecord

__all__ = [
    "Cell", "Comparison", "Executor", "Grid", "LocalExecutor", "PendingCheck", "Progress", "Rule", "SlurmExecutor",
    "SlurmResources", "Slot", "SweepFolder", "SweepInterrupted", "SweepOutcome", "SweepPlan", "SweepRecord",
    "canonical_schedules", "decision_lines", "local_slots", "next_seeds", "parse_seeds", "run_sweep",
    "split_top_level",
]
