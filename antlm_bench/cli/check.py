"""``antlm-bench check``: the CI regression gate (exit 0 fine, 1 regression or missing scores, 2 unusable input)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import typer
from rich import box
from rich.markup import escape
from rich.table import Table
from typer.core import TyperCommand

from antlm_bench.cli.app import app, console, err_console
from antlm_bench.cli.paths import output_file, path_text
from antlm_bench.errors import EnvironmentFailure


class _SeveralPathsCommand(TyperCommand):
    """``--results A B --baseline C D`` as ``leaderboard A B`` takes folders: each value up to the next option
    belongs to the option before it (the same as ``--results A --results B``)."""

    several = ("--results", "--baseline")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        spread: list[str] = []
        current = None
        for arg in args:
            if arg in self.several:
                current = arg
                spread.append(arg)
                continue
            if arg.startswith("-"):
                current = None
            elif current is not None and spread[-1] != current:
                spread.append(current)  # a second value of the same option
            spread.append(arg)
        return super().parse_args(ctx, spread)


@app.command("check", cls=_SeveralPathsCommand)
def check_command(
    results: list[Path] = typer.Option(..., "--results", help="Result folder(s) or scores.parquet of the new run "
                                       "(--results A B, or --results A --results B)."),
    baseline: list[Path] = typer.Option(..., "--baseline", help="Baseline scores.parquet or folder(s) (with "
                                        "items.parquet beside it for item-paired tests)."),
    tolerance: float = typer.Option(0.5, "--tolerance", help="Largest drop ignored on a percentage (accuracy, F1, "
                                    "GLUE's score), in percentage points."),
    margin_tolerance: float = typer.Option(0.05, "--margin-tolerance", help="Largest drop ignored on a minimal-pair "
                                           "margin (task.margin), in nats."),
    loss_tolerance: float = typer.Option(0.01, "--loss-tolerance", help="Largest rise ignored on a loss (heldout), "
                                         "in nats per token (0.01: a 1% rise in perplexity)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the drop's test."),
    rule: str = typer.Option("auto", "--rule", help="auto: a drop beyond the tolerance must also be significant "
                             "(seed-aware test, see docs/statistics.md); tolerance: the drop alone."),
    seed_sd: float | None = typer.Option(None, "--seed-sd", help="Training-seed SD of a task score in percentage "
                                         "points, for a one-seed side (else the baseline's own >= 3 seeds, when "
                                         "both sides record the same configuration fingerprint)."),
    family: str = typer.Option("row", "--family", help="The Holm family of the p-values: row (each group's "
                               "tasks and macro, the default), board (every comparison of the check) or none; "
                               "printed under the table."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="Pass even when the results lack a task, "
                                       "subtask, metric, items or group that the baseline has."),
    by: str | None = typer.Option(None, "--by", help="Grouping keys that match runs with baseline runs "
                                  "(default recipe,preset,schedule)."),
    markdown: Path | None = typer.Option(None, "--markdown", callback=output_file, parser=path_text, metavar="<path>",
                                         help="Also append the table as Markdown here "
                                         "(e.g. $GITHUB_STEP_SUMMARY)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object on stdout (each line's "
                                 "numbers in its `unit`: percentage points, or nats for a margin or a loss) instead "
                                 "of the table; the exit status is the same."),
) -> None:
    """Compare task and macro scores with a baseline; exit 1 on a significant drop beyond the tolerance, or when
    the results lack something the baseline has."""
    from antlm_bench.results.check import Tolerances, detectable_notes, family_note, report_markdown, run_check

    group_by = [k.strip() for k in by.split(",") if k.strip()] if by else None
    _require_paths(results, baseline)
    tolerances = Tolerances(tolerance, margin_tolerance, loss_tolerance)
    report = run_check(results, baseline, tolerances, alpha, rule, group_by, seed_sd, family, allow_missing)
    if markdown is not None:
        # appended (a CI step summary collects several), before anything is printed: a failed write is one line;
        # never through a link or into a FIFO planted at the name (a stream under /dev is written through)
        from antlm_bench.data.files import append_bytes

        try:
            append_bytes(markdown, report_markdown(report).encode("utf-8"))
        except OSError as err:
            raise EnvironmentFailure(f"--markdown {markdown}: cannot write ({err.strerror}); check the path and "
                                     "free space") from None
    if as_json:
        typer.echo(json.dumps(report_json(report), indent=2))
        if report.exit_code:
            sys.exit(report.exit_code)
        return
    console.print(_table(report, alpha, rule))
    console.print(f"[dim]{escape(family_note(report))}[/dim]")
    for note in detectable_notes(report):
        console.print(escape(note), soft_wrap=True)
    for note in report.notes:
        console.print(f"[yellow]note[/yellow] {escape(note)}")
    for item in report.missing:
        console.print(f"[red]missing[/red] {escape(item)}")
    if report.regressions:
        err_console.print(f"[red]regression:[/red] {len(report.regressions)} score(s) dropped by more than "
                          f"the tolerance ({tolerances.text()})" + (" and significantly" if rule == "auto" else ""))
    if report.failed_missing:
        err_console.print(f"[red]missing:[/red] the results lack {len(report.missing)} thing(s) the baseline has; "
                          "re-run them, or pass --allow-missing")
    if report.exit_code:
        sys.exit(report.exit_code)
    console.print("no regression" + (f" (allowed missing: {len(report.missing)})" if report.missing else ""))


def _require_paths(results: list[Path], baseline: list[Path]) -> None:
    """Name the option whose path is missing (a missing baseline is not "results"), and what to do about it."""
    from antlm_bench.errors import UserError

    for path in results:
        if not path.expanduser().exists():
            raise UserError(f"--results {path}: no such file or folder; give the folder the new run wrote "
                            "(its --output)")
    for path in baseline:
        if not path.expanduser().exists():
            raise UserError(f"--baseline {path}: no such file or folder; commit a baseline there first (the tiny "
                            "run's scores.parquet and items.parquet, see docs/ci-workflow.md)")


def report_json(report) -> dict:
    """The check report as plain data: every line of the table, the numbers unrounded and in the line's ``unit``
    (percentage points, or a metric's own: nats for a margin, nats per token for a loss)."""
    from antlm_bench.results.leaderboard import design_text
    from antlm_bench.results.leaderboard.definition import metric_kind

    lines = []
    for line in report.lines:
        c = line.comparison
        kind = metric_kind(c.metric)

        def shown(value: float | None, scale: float = kind.scale) -> float | None:  # in the line's unit
            return None if value is None else scale * value

        lines.append({
            "group": line.group, "task": line.column, "baseline": shown(line.baseline.value),
            "current": shown(line.current.value), "delta": shown(c.delta), "ci_low": shown(c.low),
            "ci_high": shown(c.high), "p": c.p_value, "p_raw": c.p_raw, "mde": shown(c.mde),
            "test": "tolerance only" if line.test == "tolerance" else design_text(c), "design": line.test,
            "paired_by_item": c.paired, "n_items": c.n_items, "baseline_seeds": line.baseline.n_seeds,
            "current_seeds": line.current.n_seeds, "status": line.status, "metric": c.metric,
            "unit": "pp" if kind.unit == "%" else kind.unit, "lower_is_better": kind.lower_is_better,
        })
    verdict = "regression" if report.regressions else ("missing" if report.failed_missing else "no regression")
    return {"verdict": verdict, "exit_code": report.exit_code, "tolerance": report.tolerances.as_dict(),
            "alpha": report.alpha, "rule": report.rule, "family": report.family, "seed_sd_pp": report.seed_sd,
            "lines": lines, "missing": list(report.missing), "notes": list(report.notes)}


def _table(report, alpha: float, rule: str) -> Table:
    """The delta table; narrow enough for an 80-column CI log (no vertical rules, item counts in Markdown)."""
    from antlm_bench.results.check import shown, task_text
    from antlm_bench.results.leaderboard import design_text, p_text

    groups = list(dict.fromkeys(line.group for line in report.lines))
    # the Holm family is printed under the table (family_note)
    title = f"check against the baseline (tolerance {report.tolerances.text()}, alpha {alpha}, rule {rule})"
    if len(groups) == 1:
        title += f"\n{groups[0]}"
    table = Table(title=escape(title), box=box.SIMPLE_HEAD)
    columns = (["group"] if len(groups) > 1 else []) + ["task", "base", "new", "delta pp",
                                                        f"{100 * (1 - alpha):g}% CI", "p", "MDE", "test", "status"]
    for column in columns:
        table.add_column(column, justify="right" if column in ("base", "new", "delta pp", "p", "MDE") else "left",
                         overflow="fold", no_wrap=column not in ("group", "task", "test"))
    for line in report.lines:
        c = line.comparison
        style = {"regression": "bold red", "improved": "green", "drop, not significant": "yellow"}.get(line.status)
        table.add_row(*([escape(line.group)] if len(groups) > 1 else []), escape(task_text(line)),
                      shown(line.baseline.value, c.metric), shown(line.current.value, c.metric),
                      shown(c.delta, c.metric, True),
                      f"[{shown(c.low, c.metric, True)},{shown(c.high, c.metric, True)}]" if c.low is not None else "-",
                      p_text(c.p_value).removeprefix("p=").removeprefix("p ").removeprefix("p"),
                      shown(c.mde, c.metric),
                      "tolerance only" if line.test == "tolerance" else design_text(c), line.status, style=style)
    return table
