"""``antlm-bench plan``: what a ``sweep --until-decided`` design can decide, before a seed runs: power, seeds and
CPU-hours by simulating the sweep's own rule (``results.stats.planning``)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from antlm_bench.cli.app import app, console, flag
from antlm_bench.errors import UserError
from antlm_bench.options import MAX_SEEDS
from antlm_bench.sweep.settings import UntilDecidedSettings

if TYPE_CHECKING:
    from antlm_bench.results.stats.planning import Design

# reps x comparisons x seeds floats are drawn at once; more than this would need gigabytes
MAX_DRAWS = 50_000_000


def _points(text: str, option: str) -> list[float]:
    """Comma-separated numbers of points (gaps, or paired differences), each within +-100; a bad one is one line."""
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise UserError(f"{option} {part.strip()!r}: give numbers separated by commas, e.g. 1,2") from None
        if not math.isfinite(value) or abs(value) > 100:
            raise UserError(f"{option} {part.strip()}: a number of points between -100 and 100")
        values.append(value)
    return values


@dataclass(frozen=True)
class PlannedFrom:
    """The truth a plan simulates, and what it rests on: either one comparison's paired difference SD (its own
    same-seed differences), or a seed SD and a same-seed correlation; ``sd_seeds``: how many seeds the SD was
    estimated on (None: given as known), whose upper 95% bound the plan also simulates."""

    seed_sd: float | None = None
    correlation: float | None = None
    paired_sd: float | None = None
    sd_seeds: int | None = None
    source: str = "given"


def _from_pilot(paths: list[Path], column: str, baseline: str | None, row: str | None,
                seeds: list[str] | None) -> PlannedFrom:
    """What the pilot's board says of ``column``: with ``baseline``, the comparison's own paired difference SD
    (``row`` against the baseline; by default the row whose differences vary most, the conservative choice), never
    a seed SD pooled over unrelated rows; without, the pooled seed SD (correlation unknown: 0). Says what it read,
    and each row's paired SD."""
    from antlm_bench.results.leaderboard import leaderboard_from_paths
    from antlm_bench.results.leaderboard.power import pilot_estimate

    board = leaderboard_from_paths(paths, None, None, {}, 0.05, "none")
    if column != "macro" and column not in board.columns:
        raise UserError(f"--column {column}: not a column of the pilot's board ({', '.join(board.columns)})")
    reference_of = None
    at = 0
    if baseline is not None:
        if "schedule" not in board.group_by:
            raise UserError("--baseline: the pilot's board does not group by schedule")
        at = board.group_by.index("schedule")
        keys = {row.key for row in board.rows}
        if not any(key[at] == baseline for key in keys):
            raise UserError(f"--baseline {baseline}: no row of the pilot has that schedule "
                            f"({', '.join(sorted({key[at] for key in keys}))})")

        def reference_of(key: tuple[str, ...]) -> tuple[str, ...] | None:
            wanted = key[:at] + (baseline,) + key[at + 1:]
            return wanted if wanted in keys else None

    estimate = pilot_estimate(board, column, reference_of, None if seeds is None else set(seeds))
    frozen = "" if seeds is None else f", seeds {','.join(seeds)} only (--pilot-seeds)"
    if estimate is None:
        raise UserError(f"--pilot: no row has two seeds on {column}{frozen}; a seed SD needs at least two seeds of "
                        "one configuration")
    others = {key[:at] + key[at + 1:] for key, _, _ in estimate.paired_sds}

    def name(key: tuple[str, ...]) -> str:  # the schedule alone where every row is of one recipe and preset
        return key[at] if len(others) == 1 else " ".join(key)

    chosen = estimate.paired_sds
    if row is not None:  # refused before anything is printed: one line
        chosen = tuple(entry for entry in estimate.paired_sds if entry[0][at] == row)
        if not chosen:
            raise UserError(f"--row {row}: no row of the pilot with that schedule shares 3 seeds with {baseline} "
                            f"on {column} ({', '.join(name(key) for key, _, _ in estimate.paired_sds) or 'none does'})")
    said = [f"pilot: {column} seed SD {estimate.seed_sd:.3g} (pooled over {estimate.rows} row(s), "
            f"{estimate.sd_df} degree(s) of freedom{frozen})"]
    if estimate.correlation is not None:
        said.append(f"same-seed correlation with {baseline} {estimate.correlation:+.2f} (over {estimate.pairs} "
                    "paired seeds, pooled over the rows)")
    elif baseline is not None:
        said.append(f"no row shares 3 seeds with {baseline}: correlation not estimated")
    console.print(escape("; ".join(said)))
    if baseline is None:
        return PlannedFrom(estimate.seed_sd, None, None, estimate.sd_df + 1,
                           f"the pilot's seed SD pooled over {estimate.rows} row(s), correlation 0 (no --baseline)")
    if estimate.paired_sds:
        console.print(escape(f"pilot: {column} paired difference SD against {baseline} (each row's same-seed "
                             "differences): " + "; ".join(
                                 f"{name(key)} {sd:.3g} ({n} seeds)" for key, sd, n in estimate.paired_sds)))
    if not chosen:
        return PlannedFrom(source="no comparison's own noise")  # the caller refuses it unless the truth is given
    # the noisiest of the rows named (several recipes or presets may share a schedule): the conservative choice
    key, sd, n = max(chosen, key=lambda entry: entry[1])
    how = "--row" if row is not None else "the largest of the rows' (no --row)"
    return PlannedFrom(None, None, sd, n, f"{name(key)} against {baseline}, its own same-seed differences over {n} "
                                           f"seeds, {how}")


def _seed_labels(text: str) -> list[str]:
    from antlm_bench.options import parse_seeds

    return [str(seed) for seed in parse_seeds(text, "--pilot-seeds")]


def _plan_table(design: Design, gaps: list[float], seed_sd: float, correlation: float, others_gap: float, reps: int,
                seed: int, seen: list[float], paired: bool, runs_per_seed: int, cpu_minutes_per_run: float | None,
                title: str) -> None:
    """One table of simulated sweeps: per true gap, the shares the rule decides, the seeds and CPU-hours."""
    import numpy as np

    from antlm_bench.results.stats.planning import PlanOutcome, Truth, fixed_sample_power, simulate_design

    paired_sd = seed_sd * math.sqrt(2.0) if paired else None
    table = Table(title=escape(f"{title} ({reps:,} per gap, Gaussian seeds, seed {seed}): shares "
                               "±95% simulation margin"))
    columns = ["true gap", "decided (right sign)", "wrong sign", "equivalent", "others: any difference",
               "family: any difference",
               "mean seeds a side", "all decided", "fixed-n t at cap"]
    if cpu_minutes_per_run is not None:
        columns.append("CPU-hours to go" if seen else "CPU-hours")
    for column in columns:
        table.add_column(escape(column), justify="left" if column == "true gap" else "right")
    rng = np.random.default_rng(seed)
    for g in [0.0, *[g for g in gaps if g != 0]]:
        truth = Truth(seed_sd, correlation, g, others_gap)
        out = simulate_design(design, truth, reps, rng, observed=seen)

        def share(p: float) -> str:
            return f"{100 * p:.1f}% ±{100 * PlanOutcome.margin(p, reps):.1f}"

        unit = f"{g / paired_sd:.2g} paired SD" if paired_sd is not None else f"{g / seed_sd:.2g} seed SD"
        row = ["0 (A/A)" if g == 0 else f"{g:g} ({unit})", share(out.decided_right),
               share(out.decided_wrong_sign), share(out.decided_equivalent), share(out.others_difference),
               share(out.family_difference), f"{out.mean_seeds:.1f}", share(out.all_decided),
               # the fixed-n t's power is that of a design planned in advance: no conditional reading
               "-" if g == 0 or seen else f"{100 * fixed_sample_power(design, truth):.1f}%"]
        if cpu_minutes_per_run is not None:
            row.append(f"{(out.mean_seeds - len(seen)) * runs_per_seed * cpu_minutes_per_run / 60:.1f}")
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)


@app.command("plan")
def plan_command(
    comparisons: int = typer.Option(..., "--comparisons", "-k", help="Comparisons in the family that shares alpha "
                                    "(schedules other than the baseline x columns x recipes and presets)."),
    gap: str = typer.Option("1,2", "--gap", help="True gap(s) of the comparison of interest, in the units of "
                            "--seed-sd (percentage points), comma-separated."),
    seed_sd: float | None = typer.Option(None, "--seed-sd", help="SD of one configuration's per-seed scores "
                                         "(points; default: from --pilot, else 1): e.g. a board's ±SD."),
    correlation: float | None = typer.Option(None, "--correlation", help="Correlation of the two sides' scores at "
                                             "the same seed (same initialisation and data order), in [-1, 1) "
                                             "(default: from --pilot with --baseline, else 0)."),
    paired_sd: float | None = typer.Option(None, "--paired-sd", help="SD of one comparison's same-seed "
                                           "differences (points), instead of --seed-sd and --correlation: the "
                                           "noise of that comparison alone, e.g. a row's value that --pilot with "
                                           "--baseline prints."),
    pilot: list[Path] | None = typer.Option(None, "--pilot", help="Result folders of pilot runs: with --baseline, "
                                            "the comparison's own paired difference SD (--row against the "
                                            "baseline; default: the row whose differences vary most) is read from "
                                            "their board; without, the seed SD pooled over their rows."),
    pilot_seeds: str | None = typer.Option(None, "--pilot-seeds", help="--pilot: only these seeds count (e.g. "
                                           "1-3): a pilot frozen at the seeds a design was planned from, so that "
                                           "its command reproduces its table after the folder has grown."),
    row: str | None = typer.Option(None, "--row", help="--pilot with --baseline: the schedule of the comparison "
                                   "to plan for (its own same-seed differences to the baseline are the noise)."),
    sd_seeds: int | None = typer.Option(None, "--sd-seeds", help="How many seeds the given --paired-sd or "
                                        "--seed-sd was estimated on: the plan is repeated at its upper 95% bound "
                                        "(read from --pilot or --observed, it is known)."),
    column: str = typer.Option("blimp", "--column", help="--pilot: the board column to read (a task, "
                               "task.margin or macro)."),
    baseline: str | None = typer.Option(None, "--baseline", help="--pilot: the baseline schedule; each other row is "
                                        "paired by seed with the baseline row of its recipe and preset."),
    max_seeds: int = flag(UntilDecidedSettings, "max_seeds"),
    first_seeds: int = typer.Option(3, "--first-seeds", help="Seeds in the first round (the sweep's --seeds)."),
    round_seeds: int = flag(UntilDecidedSettings, "round_seeds"),
    alpha: float = flag(UntilDecidedSettings, "alpha"),
    tolerance: float | None = flag(UntilDecidedSettings, "tolerance"),
    others_gap: float = typer.Option(0.0, "--others-gap", help="True gap of every other comparison of the family "
                                     "(0: nulls)."),
    runs_per_seed: int = typer.Option(2, "--runs-per-seed", help="Training runs one seed of the sweep costs (its "
                                      "configurations: the baseline and each schedule, per recipe and preset)."),
    cpu_minutes_per_run: float | None = typer.Option(None, "--cpu-minutes-per-run", help="CPU-minutes of one run "
                                                     "(training and evaluation), for the expected CPU-hours."),
    observed: str | None = typer.Option(None, "--observed", help="A sweep under way: the comparison of interest's "
                                        "paired differences so far (points, one a seed, comma-separated, signed as "
                                        "--gap: schedule minus baseline). The simulated sweeps keep them and go on "
                                        "from the look at that many seeds: the shares are conditional on them "
                                        "(conditional power), the CPU-hours those still to spend. Without "
                                        "--paired-sd, --seed-sd, --correlation or --pilot, the truth's paired SD "
                                        "is theirs."),
    reps: int = typer.Option(20_000, "--reps", help="Simulated sweeps per gap."),
    seed: int = typer.Option(0, "--seed", help="Seed of the simulation."),
) -> None:
    """What a `sweep --until-decided` design can decide, before any seed runs: for each true gap, the chance that
    the sweep decides it (right sign), decides it wrongly, or calls it equivalent; the others' false differences;
    seeds a side and CPU-hours at the stop. Simulates the sweep's own rule (Lai's confidence sequence, Bonferroni
    over the family, looks after every round, verdicts at the stop) on Gaussian per-seed scores."""

    from antlm_bench.results.stats.planning import Design, Truth

    gaps = _points(gap, "--gap")
    seen = _points(observed, "--observed") if observed is not None else []
    given = paired_sd is not None or seed_sd is not None or correlation is not None
    if paired_sd is not None:
        if seed_sd is not None or correlation is not None:
            raise UserError("--paired-sd: give it instead of --seed-sd and --correlation, not with them")
        if not (math.isfinite(paired_sd) and 0 < paired_sd <= 100):
            raise UserError(f"--paired-sd {paired_sd}: a number of points above 0 and at most 100")
    if sd_seeds is not None and not (paired_sd is not None or seed_sd is not None):
        raise UserError("--sd-seeds: the seeds a given --paired-sd or --seed-sd rests on; give one of them")
    if sd_seeds is not None and not 2 <= sd_seeds <= 10_000:
        raise UserError(f"--sd-seeds {sd_seeds}: an SD rests on at least 2 seeds")
    if not pilot and (baseline is not None or row is not None or pilot_seeds is not None):
        raise UserError("--baseline, --row and --pilot-seeds read the pilot: give --pilot RESULTS as well")
    if row is not None and baseline is None:
        raise UserError("--row: the comparison against --baseline; give --baseline as well")
    planned = PlannedFrom(seed_sd, correlation, paired_sd, sd_seeds)
    if pilot:
        read = _from_pilot(pilot, column, baseline, row, _seed_labels(pilot_seeds) if pilot_seeds is not None else None)
        if given:  # what the pilot says is printed; the given numbers are the truth
            console.print("(the given --paired-sd, --seed-sd or --correlation take precedence over the pilot's)")
        elif baseline is not None and read.paired_sd is None:
            raise UserError(f"--pilot --baseline {baseline}: no row shares 3 seeds with {baseline} on {column}, so "
                            "no comparison's own noise is known; give --paired-sd, or --seed-sd and --correlation")
        else:
            planned = read
    elif seen and not given:
        if len(seen) < 2 or statistics.stdev(seen) == 0:
            raise UserError(f"--observed: {len(seen)} difference(s) without spread give no SD; give --paired-sd")
        planned = PlannedFrom(paired_sd=statistics.stdev(seen), sd_seeds=len(seen),
                              source="the observed differences'")
    paired_sd, sd_from = planned.paired_sd, planned.source
    seed_sd, correlation = planned.seed_sd, planned.correlation
    if paired_sd is not None:
        # the simulation's truth is the differences' SD alone: two uncorrelated sides of SD paired / sqrt(2)
        seed_sd, correlation = paired_sd / math.sqrt(2.0), 0.0
    seed_sd = 1.0 if seed_sd is None else seed_sd
    correlation = 0.0 if correlation is None else correlation
    if not 1 <= comparisons <= 10_000:
        raise UserError(f"--comparisons {comparisons}: give the family's size, from 1 to 10000")
    if not 2 <= max_seeds <= MAX_SEEDS:
        raise UserError(f"--max-seeds {max_seeds}: from 2 to {MAX_SEEDS}")
    if not 1 <= first_seeds <= max_seeds:
        raise UserError(f"--first-seeds {first_seeds}: from 1 to --max-seeds ({max_seeds})")
    if round_seeds < 1:
        raise UserError(f"--round-seeds {round_seeds}: at least 1")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha}: must be between 0 and 1")
    if not (math.isfinite(seed_sd) and 0 < seed_sd <= 100):
        raise UserError(f"--seed-sd {seed_sd}: a number of points above 0 and at most 100")
    if not -1 <= correlation < 1:
        raise UserError(f"--correlation {correlation}: from -1 to below 1 (at 1 the two sides never differ)")
    if tolerance is not None and not (math.isfinite(tolerance) and 0 < tolerance <= 100):
        raise UserError(f"--tolerance {tolerance}: a number of points above 0 and at most 100")
    if not (math.isfinite(others_gap) and abs(others_gap) <= 100):
        raise UserError(f"--others-gap {others_gap}: a number of points between -100 and 100")
    if runs_per_seed < 1:
        raise UserError(f"--runs-per-seed {runs_per_seed}: at least 1")
    if cpu_minutes_per_run is not None and not (math.isfinite(cpu_minutes_per_run) and cpu_minutes_per_run > 0):
        raise UserError(f"--cpu-minutes-per-run {cpu_minutes_per_run}: a positive number of minutes")
    if len(seen) >= max_seeds:
        raise UserError(f"--observed: {len(seen)} seeds, at the cap (--max-seeds {max_seeds}): no seed is left to "
                        "simulate; the sweep's verdict there is its last")
    if reps < 100:
        raise UserError(f"--reps {reps}: at least 100 (the shares' margins are printed beside them)")
    if reps * comparisons * max_seeds > MAX_DRAWS:
        raise UserError(f"--reps {reps}: {reps} x {comparisons} comparisons x {max_seeds} seeds is more than "
                        f"{MAX_DRAWS:,} draws; give fewer --reps")

    design = Design(comparisons, max_seeds, first_seeds, round_seeds, alpha, tolerance)
    first = design.first_decidable()
    looks = design.looks()
    console.print(escape(
        f"design: {comparisons} comparison(s) sharing alpha {alpha:g} (Bonferroni: {design.alpha_each:.3g} each), "
        f"looks at {', '.join(map(str, looks))} seeds a side, cap {max_seeds}"
        + (f", equivalence within ±{tolerance:g}" if tolerance else ", no equivalence margin")
        + (f"; truth: paired difference SD {paired_sd:.3g} ({sd_from})" if paired_sd is not None else
           f"; truth: seed SD {seed_sd:.3g}, same-seed correlation {correlation:.2g} (paired difference SD "
           f"{Truth(seed_sd, correlation, 0).difference_sd:.3g})")
        + f", other comparisons' gap {others_gap:g}"))
    if first is None:
        console.print(escape(f"no look can decide anything: the interval is unbounded up to {max_seeds} seeds at "
                             f"this alpha; allow more seeds or fewer comparisons"))
    elif first > looks[0]:
        wasted = [n for n in looks if n < first]
        console.print(escape(f"the looks at {', '.join(map(str, wasted))} seed(s) cannot decide anything (the "
                             f"interval is unbounded before {first} seeds): start the sweep at --seeds 1-{first}"))
    if seen:
        console.print(escape(
            f"given: {len(seen)} observed paired difference(s) of the comparison of interest (mean "
            f"{statistics.fmean(seen):+.3g}); each simulated sweep keeps them and goes on from its look at "
            f"{len(seen)} seeds: the shares are conditional on them (conditional power), the CPU-hours those still to "
            "spend; the other comparisons' seeds so far are simulated, not observed"))
    what = f"continuations of the sweep after {len(seen)} seeds" if seen else "sweeps"
    truths = [("", seed_sd)]
    if planned.sd_seeds is not None:
        from antlm_bench.results.stats import seed_sd_interval

        # the SD is an estimate: plan also at the upper end of its 95% interval (chi-square, sd_seeds - 1 df), the
        # noise the design must survive if the pilot was lucky
        upper = seed_sd_interval(seed_sd, planned.sd_seeds)[1]
        shown = upper * math.sqrt(2.0) if paired_sd is not None else upper
        what_sd = "paired difference SD" if paired_sd is not None else "seed SD"
        truths.append((f"at the upper 95% bound of the {what_sd} ({shown:.3g}, from {planned.sd_seeds} seeds): ",
                       upper))
    for prefix, sd_here in truths:
        _plan_table(design, gaps, sd_here, correlation, others_gap, reps, seed, seen, paired_sd is not None,
                    runs_per_seed, cpu_minutes_per_run, f"{prefix}simulated {what}")
    if paired_sd is not None:
        inputs = f"--paired-sd {paired_sd:.6g}"
    else:
        inputs = f"--seed-sd {seed_sd:.6g} --correlation {correlation:.6g}"
    inputs += f" --sd-seeds {planned.sd_seeds}" if planned.sd_seeds is not None else ""
    console.print(escape(f"planned from: {sd_from}; a design records these numbers ({inputs}): the same command "
                         "with them in place of --pilot reproduces these tables after the pilot's folder has grown"))
    console.print("[dim]" + escape(
        "decided: the comparison of interest's verdict at the stop (A/A row: a difference of either sign, the false "
        "positive rate of one comparison); others: sweeps in which any other comparison of the family is decided a "
        "difference (an error when their gap is 0); family: any comparison at all (the A/A row's is the family's error rate, to hold at or under alpha); all decided: sweeps that stopped with every comparison decided "
        "(the rest ran to the cap); fixed-n t at cap: a paired t test at the cap, Bonferroni, one look, for "
        "reference (not with --observed); CPU-hours: mean seeds (those still to run with --observed) x "
        "--runs-per-seed x --cpu-minutes-per-run. Method: docs/statistics.md "
        "(Planning a sweep).") + "[/dim]")
