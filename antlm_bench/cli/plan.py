"""``antlm-bench plan``: what a ``sweep --until-decided`` design can decide, before a seed runs: power, seeds and
CPU-hours by simulating the sweep's own rule (``results.stats.planning``)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from antlm_bench.cli.app import app, console, flag
from antlm_bench.errors import UserError
from antlm_bench.options import MAX_SEEDS
from antlm_bench.sweep.settings import UntilDecidedSettings

if TYPE_CHECKING:
    from antlm_bench.results.stats.planning import Design, GapPlan

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

    @property
    def names_noise(self) -> bool:
        """Whether an SD or a correlation is set (``sd_seeds`` only says what one rests on)."""
        return self.paired_sd is not None or self.seed_sd is not None or self.correlation is not None

    def noise(self) -> tuple[float, float]:
        """The simulation's seed SD and same-seed correlation. A paired difference SD alone is two uncorrelated
        sides of SD paired / sqrt(2); what is not known is a seed SD of 1 and no correlation."""
        if self.paired_sd is not None:
            return self.paired_sd / math.sqrt(2.0), 0.0
        return (1.0 if self.seed_sd is None else self.seed_sd), (0.0 if self.correlation is None else self.correlation)


@dataclass(frozen=True)
class RunCost:
    """What one seed of the sweep costs: its training runs, and the CPU-minutes of each (None: not given)."""

    runs_per_seed: int
    cpu_minutes_per_run: float | None


def _check_given_noise(given: PlannedFrom, pilot: bool, baseline: str | None, row: str | None,
                       pilot_seeds: str | None) -> None:
    """The noise given on the command line, and the options that read the pilot: one line where they conflict."""
    if given.paired_sd is not None:
        if given.seed_sd is not None or given.correlation is not None:
            raise UserError("--paired-sd: give it instead of --seed-sd and --correlation, not with them")
        if not (math.isfinite(given.paired_sd) and 0 < given.paired_sd <= 100):
            raise UserError(f"--paired-sd {given.paired_sd}: a number of points above 0 and at most 100")
    if given.sd_seeds is not None and not (given.paired_sd is not None or given.seed_sd is not None):
        raise UserError("--sd-seeds: the seeds a given --paired-sd or --seed-sd rests on; give one of them")
    if given.sd_seeds is not None and not 2 <= given.sd_seeds <= 10_000:
        raise UserError(f"--sd-seeds {given.sd_seeds}: an SD rests on at least 2 seeds")
    if not pilot and (baseline is not None or row is not None or pilot_seeds is not None):
        raise UserError("--baseline, --row and --pilot-seeds read the pilot: give --pilot RESULTS as well")
    if row is not None and baseline is None:
        raise UserError("--row: the comparison against --baseline; give --baseline as well")


def _planned_from(given: PlannedFrom, pilot: list[Path] | None, column: str, baseline: str | None, row: str | None,
                  pilot_seeds: str | None, seen: list[float]) -> PlannedFrom:
    """The truth to simulate: the numbers given (what the pilot says is printed all the same); else the pilot's;
    else the SD of the ``--observed`` differences; else the defaults (``PlannedFrom.noise``)."""
    if pilot:
        read = _from_pilot(pilot, column, baseline, row, _seed_labels(pilot_seeds) if pilot_seeds is not None else None)
        if given.names_noise:
            console.print("(the given --paired-sd, --seed-sd or --correlation take precedence over the pilot's)")
            return given
        if baseline is not None and read.paired_sd is None:
            raise UserError(f"--pilot --baseline {baseline}: no row shares 3 seeds with {baseline} on {column}, so "
                            "no comparison's own noise is known; give --paired-sd, or --seed-sd and --correlation")
        return read
    if seen and not given.names_noise:
        if len(seen) < 2 or statistics.stdev(seen) == 0:
            raise UserError(f"--observed: {len(seen)} difference(s) without spread give no SD; give --paired-sd")
        return PlannedFrom(paired_sd=statistics.stdev(seen), sd_seeds=len(seen), source="the observed differences'")
    return given


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
    at, reference_of = _baseline_pairing(board, baseline)
    estimate = pilot_estimate(board, column, reference_of, None if seeds is None else set(seeds))
    frozen = "" if seeds is None else f", seeds {','.join(seeds)} only (--pilot-seeds)"
    if estimate is None:
        raise UserError(f"--pilot: no row has two seeds on {column}{frozen}; a seed SD needs at least two seeds of "
                        "one configuration")
    # a row by its schedule alone where every row is of one recipe and preset
    alone = len({key[:at] + key[at + 1:] for key, _, _ in estimate.paired_sds}) == 1
    names = {key: key[at] if alone else " ".join(key) for key, _, _ in estimate.paired_sds}
    chosen = estimate.paired_sds
    if row is not None:  # refused before anything is printed: one line
        chosen = tuple(entry for entry in estimate.paired_sds if entry[0][at] == row)
        if not chosen:
            shown = ", ".join(names[key] for key, _, _ in estimate.paired_sds) or "none does"
            raise UserError(f"--row {row}: no row of the pilot with that schedule shares 3 seeds with {baseline} "
                            f"on {column} ({shown})")
    _say_pilot(estimate, column, baseline, frozen, names)
    if baseline is None:
        return PlannedFrom(estimate.seed_sd, None, None, estimate.sd_df + 1,
                           f"the pilot's seed SD pooled over {estimate.rows} row(s), correlation 0 (no --baseline)")
    if not chosen:
        return PlannedFrom(source="no comparison's own noise")  # the caller refuses it unless the truth is given
    # the noisiest of the rows named (several recipes or presets may share a schedule): the conservative choice
    key, sd, n = max(chosen, key=lambda entry: entry[1])
    how = "--row" if row is not None else "the largest of the rows' (no --row)"
    return PlannedFrom(None, None, sd, n, f"{names[key]} against {baseline}, its own same-seed differences over {n} "
                                          f"seeds, {how}")


def _baseline_pairing(board: Any, baseline: str | None) -> tuple[int, Callable[[tuple[str, ...]], Any] | None]:
    """Where the schedule is in the pilot board's row keys, and each row's baseline row of its recipe and preset
    (None where it has none; no pairing at all without ``baseline``)."""
    if baseline is None:
        return 0, None
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

    return at, reference_of


def _say_pilot(estimate: Any, column: str, baseline: str | None, frozen: str, names: dict[Any, str]) -> None:
    """What the pilot read: the pooled seed SD, the same-seed correlation and each row's paired difference SD."""
    said = [f"pilot: {column} seed SD {estimate.seed_sd:.3g} (pooled over {estimate.rows} row(s), "
            f"{estimate.sd_df} degree(s) of freedom{frozen})"]
    if estimate.correlation is not None:
        said.append(f"same-seed correlation with {baseline} {estimate.correlation:+.2f} (over {estimate.pairs} "
                    "paired seeds, pooled over the rows)")
    elif baseline is not None:
        said.append(f"no row shares 3 seeds with {baseline}: correlation not estimated")
    console.print(escape("; ".join(said)))
    if baseline is not None and estimate.paired_sds:
        console.print(escape(f"pilot: {column} paired difference SD against {baseline} (each row's same-seed "
                             "differences): " + "; ".join(
                                 f"{names[key]} {sd:.3g} ({n} seeds)" for key, sd, n in estimate.paired_sds)))


def _seed_labels(text: str) -> list[str]:
    from antlm_bench.options import parse_seeds

    return [str(seed) for seed in parse_seeds(text, "--pilot-seeds")]


def _check_design(design: Design, planned: PlannedFrom, others_gap: float, cost: RunCost, observed: int,
                  reps: int) -> None:
    """The design, the truth it is simulated under and the simulation's size, each within its range: one line
    naming the option where not."""
    seed_sd, correlation = planned.noise()
    if not 1 <= design.comparisons <= 10_000:
        raise UserError(f"--comparisons {design.comparisons}: give the family's size, from 1 to 10000")
    if not 2 <= design.max_seeds <= MAX_SEEDS:
        raise UserError(f"--max-seeds {design.max_seeds}: from 2 to {MAX_SEEDS}")
    if not 1 <= design.first_seeds <= design.max_seeds:
        raise UserError(f"--first-seeds {design.first_seeds}: from 1 to --max-seeds ({design.max_seeds})")
    if design.round_seeds < 1:
        raise UserError(f"--round-seeds {design.round_seeds}: at least 1")
    if not 0 < design.alpha < 1:
        raise UserError(f"--alpha {design.alpha}: must be between 0 and 1")
    if not (math.isfinite(seed_sd) and 0 < seed_sd <= 100):
        raise UserError(f"--seed-sd {seed_sd}: a number of points above 0 and at most 100")
    if not -1 <= correlation < 1:
        raise UserError(f"--correlation {correlation}: from -1 to below 1 (at 1 the two sides never differ)")
    tolerance = design.tolerance
    if tolerance is not None and not (math.isfinite(tolerance) and 0 < tolerance <= 100):
        raise UserError(f"--tolerance {tolerance}: a number of points above 0 and at most 100")
    if not (math.isfinite(others_gap) and abs(others_gap) <= 100):
        raise UserError(f"--others-gap {others_gap}: a number of points between -100 and 100")
    if cost.runs_per_seed < 1:
        raise UserError(f"--runs-per-seed {cost.runs_per_seed}: at least 1")
    minutes = cost.cpu_minutes_per_run
    if minutes is not None and not (math.isfinite(minutes) and minutes > 0):
        raise UserError(f"--cpu-minutes-per-run {minutes}: a positive number of minutes")
    if observed >= design.max_seeds:
        raise UserError(f"--observed: {observed} seeds, at the cap (--max-seeds {design.max_seeds}): no seed is left "
                        "to simulate; the sweep's verdict there is its last")
    if reps < 100:
        raise UserError(f"--reps {reps}: at least 100 (the shares' margins are printed beside them)")
    if reps * design.comparisons * design.max_seeds > MAX_DRAWS:
        raise UserError(f"--reps {reps}: {reps} x {design.comparisons} comparisons x {design.max_seeds} seeds is "
                        f"more than {MAX_DRAWS:,} draws; give fewer --reps")


def _say_design(design: Design, planned: PlannedFrom, others_gap: float, seen: list[float]) -> None:
    """The design and its truth in one line; the looks that cannot decide; what ``--observed`` keeps."""
    from antlm_bench.results.stats.planning import Truth

    seed_sd, correlation = planned.noise()
    first = design.first_decidable()
    looks = design.looks()
    console.print(escape(
        f"design: {design.comparisons} comparison(s) sharing alpha {design.alpha:g} (Bonferroni: "
        f"{design.alpha_each:.3g} each), looks at {', '.join(map(str, looks))} seeds a side, cap {design.max_seeds}"
        + (f", equivalence within ±{design.tolerance:g}" if design.tolerance else ", no equivalence margin")
        + (f"; truth: paired difference SD {planned.paired_sd:.3g} ({planned.source})"
           if planned.paired_sd is not None else
           f"; truth: seed SD {seed_sd:.3g}, same-seed correlation {correlation:.2g} (paired difference SD "
           f"{Truth(seed_sd, correlation, 0).difference_sd:.3g})")
        + f", other comparisons' gap {others_gap:g}"))
    if first is None:
        console.print(escape(f"no look can decide anything: the interval is unbounded up to {design.max_seeds} seeds "
                             "at this alpha; allow more seeds or fewer comparisons"))
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


def _truth_sds(planned: PlannedFrom) -> list[tuple[str, float]]:
    """The seed SDs to simulate, each with its table's title prefix: the planned one, and where it is an estimate
    (``sd_seeds``) the upper end of its 95% interval (chi-square, sd_seeds - 1 df) as well, the noise the design
    must survive if the pilot was lucky."""
    seed_sd = planned.noise()[0]
    truths = [("", seed_sd)]
    if planned.sd_seeds is not None:
        from antlm_bench.results.stats import seed_sd_interval

        upper = seed_sd_interval(seed_sd, planned.sd_seeds)[1]
        shown = upper * math.sqrt(2.0) if planned.paired_sd is not None else upper
        what_sd = "paired difference SD" if planned.paired_sd is not None else "seed SD"
        truths.append((f"at the upper 95% bound of the {what_sd} ({shown:.3g}, from {planned.sd_seeds} seeds): ",
                       upper))
    return truths


def _plan_table(plans: list[GapPlan], title: str, reps: int, seen: list[float], paired: bool,
                cost: RunCost) -> Table:
    """One table of simulated sweeps: per true gap, the shares the rule decides, the seeds and CPU-hours."""
    table = Table(title=escape(title))
    columns = ["true gap", "decided (right sign)", "wrong sign", "equivalent", "others: any difference",
               "family: any difference",
               "mean seeds a side", "all decided", "fixed-n t at cap"]
    if cost.cpu_minutes_per_run is not None:
        columns.append("CPU-hours to go" if seen else "CPU-hours")
    for column in columns:
        table.add_column(escape(column), justify="left" if column == "true gap" else "right")
    for plan in plans:
        table.add_row(*(escape(cell) for cell in _plan_row(plan, reps, seen, paired, cost)))
    return table


def _plan_row(plan: GapPlan, reps: int, seen: list[float], paired: bool, cost: RunCost) -> list[str]:
    """One true gap's row of :func:`_plan_table`."""
    from antlm_bench.results.stats.planning import PlanOutcome

    def share(p: float) -> str:
        return f"{100 * p:.1f}% ±{100 * PlanOutcome.margin(p, reps):.1f}"

    g, out = plan.truth.gap, plan.outcome
    paired_sd = plan.truth.seed_sd * math.sqrt(2.0) if paired else None
    unit = f"{g / paired_sd:.2g} paired SD" if paired_sd is not None else f"{g / plan.truth.seed_sd:.2g} seed SD"
    row = ["0 (A/A)" if g == 0 else f"{g:g} ({unit})", share(out.decided_right),
           share(out.decided_wrong_sign), share(out.decided_equivalent), share(out.others_difference),
           share(out.family_difference), f"{out.mean_seeds:.1f}", share(out.all_decided),
           "-" if plan.fixed_power is None else f"{100 * plan.fixed_power:.1f}%"]
    if cost.cpu_minutes_per_run is not None:
        row.append(f"{(out.mean_seeds - len(seen)) * cost.runs_per_seed * cost.cpu_minutes_per_run / 60:.1f}")
    return row


def _say_record(planned: PlannedFrom) -> None:
    """The numbers a design records: the same command with them in place of ``--pilot`` gives the same tables."""
    seed_sd, correlation = planned.noise()
    if planned.paired_sd is not None:
        inputs = f"--paired-sd {planned.paired_sd:.6g}"
    else:
        inputs = f"--seed-sd {seed_sd:.6g} --correlation {correlation:.6g}"
    inputs += f" --sd-seeds {planned.sd_seeds}" if planned.sd_seeds is not None else ""
    console.print(escape(f"planned from: {planned.source}; a design records these numbers ({inputs}): the same "
                         "command with them in place of --pilot reproduces these tables after the pilot's folder has "
                         "grown"))


# what the tables' columns mean, printed under them
TABLE_LEGEND = (
    "decided: the comparison of interest's verdict at the stop (A/A row: a difference of either sign, the false "
    "positive rate of one comparison); others: sweeps in which any other comparison of the family is decided a "
    "difference (an error when their gap is 0); family: any comparison at all (the A/A row's is the family's error "
    "rate, to hold at or under alpha); all decided: sweeps that stopped with every comparison decided "
    "(the rest ran to the cap); fixed-n t at cap: a paired t test at the cap, Bonferroni, one look, for "
    "reference (not with --observed); CPU-hours: mean seeds (those still to run with --observed) x "
    "--runs-per-seed x --cpu-minutes-per-run. Method: docs/statistics.md (Planning a sweep).")


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

    from antlm_bench.results.stats.planning import Design, simulate_gaps

    gaps = _points(gap, "--gap")
    seen = _points(observed, "--observed") if observed is not None else []
    given = PlannedFrom(seed_sd, correlation, paired_sd, sd_seeds)
    _check_given_noise(given, bool(pilot), baseline, row, pilot_seeds)
    planned = _planned_from(given, pilot, column, baseline, row, pilot_seeds, seen)
    design = Design(comparisons, max_seeds, first_seeds, round_seeds, alpha, tolerance)
    cost = RunCost(runs_per_seed, cpu_minutes_per_run)
    _check_design(design, planned, others_gap, cost, len(seen), reps)
    _say_design(design, planned, others_gap, seen)
    what = f"continuations of the sweep after {len(seen)} seeds" if seen else "sweeps"
    for prefix, sd_here in _truth_sds(planned):
        plans = simulate_gaps(design, sd_here, planned.noise()[1], gaps, others_gap, reps, seed, seen)
        title = (f"{prefix}simulated {what} ({reps:,} per gap, Gaussian seeds, seed {seed}): shares ±95% simulation "
                 "margin")
        console.print(_plan_table(plans, title, reps, seen, planned.paired_sd is not None, cost))
    _say_record(planned)
    console.print("[dim]" + escape(TABLE_LEGEND) + "[/dim]")
