"""``antlm-bench leaderboard``: result tables -> one ranked table (terminal, Markdown, HTML page or Parquet)."""

from __future__ import annotations

from pathlib import Path

import typer

from antlm_bench.cli.app import app, console, err_console, flag
from antlm_bench.cli.paths import output_file, path_text
from antlm_bench.config import RunConfig
from antlm_bench.errors import UserError
from antlm_bench.registry import add_include_path


def parse_reference(text: str | None) -> dict[str, str]:
    """``schedule=4_CLM,preset=small`` -> {"schedule": "4_CLM", "preset": "small"}."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--reference {text}: expected KEY=VALUE[,KEY=VALUE], e.g. schedule=4_CLM")
        out[key.strip()] = value.strip()
    return out


@app.command("leaderboard")
def leaderboard_command(
    results: list[Path] | None = typer.Argument(None, help="Result folders or scores.parquet files (searched "
                                                "recursively), in addition to the definition's results."),
    definition: str | None = typer.Option(None, "--definition", "-d", help="A leaderboards/*.yaml file, or the "
                                          "name of one: which results, tasks, metrics and macro it holds."),
    fmt: str | None = typer.Option(None, "--format", "-f", help="terminal, markdown, html or parquet "
                                   "(default: from --out's suffix, else terminal)."),
    out: Path | None = typer.Option(None, "--out", "-o", callback=output_file, parser=path_text, metavar="<path>",
                                    help="Write here (atomically) instead of the terminal."),
    by: str | None = typer.Option(None, "--by", help="Comma-separated grouping keys (default recipe,preset,"
                                  "schedule); runs that differ only otherwise are seeds of one row."),
    reference: str | None = typer.Option(None, "--reference", help="The row the others are compared with, e.g. "
                                         "schedule=4_CLM (default: the leader)."),
    plots: Path | None = typer.Option(None, "--plots", help="Also write per-checkpoint curves (PNG and SVG) here."),
    x_axis: str = typer.Option("epoch", "--x", help="Curves' x axis: epoch, tokens, or words (words "
                                "seen, for runs trained with --save-at-words and --eval-every words)."),
    wide: bool = typer.Option(False, "--wide", help="Terminal text: every cell in full (mean [95% interval] ±SD "
                              "method) and no line wrapped. Default: at most 200 columns where the output is not a "
                              "terminal (compact cells, the intervals in a table of their own, prose wrapped at "
                              "words; the same numbers)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the gaps."),
    family: str = typer.Option("board", "--family", help="The Holm family of the gaps' p-values: board (every gap "
                               "on the board, the default), row (each row's tasks and macro) or none; printed "
                               "under the table."),
    subtasks: str | None = typer.Option(None, "--subtasks", help="Instead of the board: TASK's subtasks (BLiMP's "
                                        "paradigms) down the side and the board's rows across, each the mean over "
                                        "the row's seeds ±seed SD (terminal or markdown)."),
    include_path: list[Path] | None = flag(RunConfig, "include_path"),
) -> None:
    """Rank configurations by macro score: seeds averaged, 95% intervals over seeds and items, seed-aware gaps, and
    per task the seed SD, the spread of the configurations' means and how often single seeds order two rows as
    their means do. Percentages, except a minimal-pair task's margin (task.margin, nats) and heldout's loss (nats
    per token, lower is better), which are never in the macro. A number on a --limit subset is marked and its row
    ranked after every full evaluation; one ranking in every format. Without --definition the board is named
    after the folders given."""
    from antlm_bench.results.leaderboard import format_for, leaderboard_from_paths, write_leaderboard
    from antlm_bench.results.leaderboard.results import results_reader

    for folder in include_path or []:
        add_include_path(folder)
    if x_axis not in ("epoch", "tokens", "words"):
        raise UserError(f"--x {x_axis}: choose epoch, tokens or words")
    if plots is not None and (plots.is_symlink() or (plots.exists() and not plots.is_dir())):
        raise UserError(f"--plots {plots}: {'a symbolic link' if plots.is_symlink() else 'a file'}, not a folder; "
                        "give a folder for the curves (made if missing)")
    group_by = [k.strip() for k in by.split(",") if k.strip()] if by else None
    chosen_format = format_for(fmt, out)  # a bad --format or --out suffix: one line before any table is read
    wanted = parse_reference(reference)
    sweep_note = None
    if not wanted:  # an until-decided sweep's board: gaps to its --baseline, the sign of its decision lines
        wanted, sweep_note = _sweep_reference(results or [], definition, group_by)
    if subtasks is not None and chosen_format not in ("terminal", "markdown"):
        raise UserError(f"--subtasks {subtasks}: writes terminal or markdown, not {chosen_format}; choose --format "
                        "markdown or an --out FILE.md")
    reader = results_reader()  # each table read once: the board and the sweep decisions checked under it share it
    board = leaderboard_from_paths(results or [], definition, group_by, wanted, alpha, family, reader)
    if subtasks is not None:
        _write_subtasks(board, subtasks.strip(), chosen_format, out)
        return
    if sweep_note is not None:
        board.notes.append(sweep_note)
    if plots is not None:
        from antlm_bench.results.leaderboard.plots import X_AXES

        attribute = X_AXES[x_axis][0]
        if not any(getattr(point, attribute) is not None for row in board.rows for curve in row.curves.values()
                   for point in curve):
            hint = " (train with --save-at-words)" if x_axis == "words" else ""
            raise UserError(f"--x {x_axis}: no curve point of these runs records {X_AXES[x_axis][1].split(' (')[0]}"
                            f"{hint}; nothing to draw, no plot written: choose another --x")
    # the folders `sweep --until-decided` decided in: each decision under the board in every text format, read
    # (and checked against its tables) before anything is written, so that a damaged one is one line instead of a
    # board and a line; in every format (the Parquet export's gaps too) one verdict per comparison: the gaps a
    # sweep decided carry its verdict, not a fixed-sample test
    from antlm_bench.results.leaderboard.definition import definition_result_paths
    from antlm_bench.sweep.decision_text import decision_view, swept_gaps

    view = decision_view([*definition_result_paths(board.definition), *(results or [])], reader)
    board.decisions = view.lines
    board.swept = swept_gaps(board.group_by, [(c.row, c.reference, c.column) for c in board.comparisons], view)
    written = write_leaderboard(board, chosen_format, out, console, plots, x_axis, wide)
    for path in written:
        err_console.print(f"wrote {path}")


def _write_subtasks(board, task: str, fmt: str, out: Path | None) -> None:
    from antlm_bench.data import atomic_write_bytes
    from antlm_bench.results.leaderboard.subtasks import (
        render_subtasks_markdown,
        render_subtasks_terminal,
        subtask_table,
    )

    table = subtask_table(board, task)
    if fmt == "markdown":
        text = render_subtasks_markdown(table)
        if out is None:
            console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            atomic_write_bytes(out, text.encode("utf-8"))
            err_console.print(f"wrote {out}")
    elif out is None:
        render_subtasks_terminal(table, console)
    else:
        import io

        from rich.console import Console

        from antlm_bench.results.leaderboard.text import FILE_WIDTH

        buffer = io.StringIO()
        render_subtasks_terminal(table, Console(file=buffer, width=FILE_WIDTH, no_color=True))
        atomic_write_bytes(out, buffer.getvalue().encode("utf-8"))
        err_console.print(f"wrote {out}")


def _sweep_reference(results: list[Path], definition: str | None,
                     group_by: list[str] | None) -> tuple[dict[str, str], str | None]:
    """The reference of a board over sweeps that decided against one ``--baseline``
    (``sweep.decision_text.decision_reference``), and the note that says so; none where the definition names its
    own reference."""
    from antlm_bench.results.leaderboard import load_definition
    from antlm_bench.results.leaderboard.definition import LeaderboardDefinition, definition_result_paths
    from antlm_bench.sweep.decision_text import decision_reference

    loaded = load_definition(definition) if definition is not None else LeaderboardDefinition()
    if loaded.reference:
        return {}, None
    folders = [*definition_result_paths(loaded), *results]
    wanted = decision_reference(folders, group_by or loaded.group_by)
    if wanted is None:
        return {}, None
    shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
    return wanted, (f"gaps are to the sweep's --baseline ({shown}), as its decision lines are; --reference KEY=VALUE "
                    "to take them to another row")


@app.command("power")
def power_command(
    results: list[Path] | None = typer.Argument(None, help="Result folders or scores.parquet files."),
    definition: str | None = typer.Option(None, "--definition", "-d", help="A leaderboards/*.yaml file or name."),
    gap: float = typer.Option(1.0, "--gap", help="The gap to detect, in percentage points."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level (two-sided)."),
    power: float = typer.Option(0.8, "--power", help="Probability of detecting the gap."),
    seed_sd: float | None = typer.Option(None, "--seed-sd", help="Seed SD in points for rows with one seed."),
    by: str | None = typer.Option(None, "--by", help="Grouping keys (default recipe,preset,schedule)."),
    include_path: list[Path] | None = flag(RunConfig, "include_path"),
) -> None:
    """How many seeds a side a gap needs, with the range the seed SD's own uncertainty allows: the board's paired
    test over seeds (k-1 df) from each row's observed seed SD and item variance (matched seeds uncorrelated, items
    unpaired: upper bounds); and the minimum detectable effect with the seeds the row has."""
    from rich.markup import escape
    from rich.table import Table

    from antlm_bench.results.leaderboard import key_text, leaderboard_from_paths
    from antlm_bench.results.leaderboard.power import power_lines

    for folder in include_path or []:
        add_include_path(folder)
    # a gap or seed SD is a number of percentage points: inf or 1e308 would overflow the power arithmetic
    if not 0 < gap <= 100:
        raise UserError(f"--gap {gap}: must be a number of percentage points above 0 and at most 100")
    if not 0 < power < 1:
        raise UserError(f"--power {power}: must be between 0 and 1")
    if seed_sd is not None and not 0 < seed_sd <= 100:
        raise UserError(f"--seed-sd {seed_sd}: must be a number of percentage points above 0 and at most 100")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha}: must be between 0 and 1")
    group_by = [k.strip() for k in by.split(",") if k.strip()] if by else None
    board = leaderboard_from_paths(results or [], definition, group_by, {}, alpha, "none")
    lines = power_lines(board, gap / 100, alpha, power, None if seed_sd is None else seed_sd / 100)
    table = Table(title=escape(f"seeds needed to detect a {gap:g}-point gap ({100 * power:g}% power, "
                               f"alpha {alpha}, paired over seeds, k-1 df)"))
    for column in ("row", "task", "seeds", "seed SD [95% CI]", "SD from", "item SE", "MDE now",
                   f"seeds/side for {gap:g} [range]"):
        table.add_column(escape(column), justify="left" if column in ("row", "task", "SD from") else "right",
                         overflow="fold")
    for line in lines:
        table.add_row(escape(key_text(board, line.row)), escape(line.column), str(line.n_seeds), _sd_text(line),
                      "-" if line.seed_sd is None else ("--seed-sd" if line.sd_seeds is None
                                                        else f"{line.sd_seeds} seeds"),
                      "-" if line.item_se is None else f"{100 * line.item_se:.2f}",
                      "-" if line.mde_now is None else f"{100 * line.mde_now:.2f}", _seeds_text(line))
    console.print(table)
    console.print("[dim]" + escape(
        "seed SD: SD of the per-seed scores, with its chi-square 95% interval (it rests on the seeds named in 'SD "
        "from'); seeds/side: at the observed SD, [range] at the two ends of its interval ('>1000': the items' noise "
        "alone is too large at that gap; 'unknown': the seeds scored exactly alike, so no seed variance was measured); "
        "item SE: the items' sampling error alone; MDE now: the smallest gap a "
        "comparison with this many seeds a side detects; method: docs/statistics.md") + "[/dim]")


def _sd_text(line) -> str:
    if line.seed_sd is None:
        return "-"
    text = f"{100 * line.seed_sd:.2f}"
    if line.sd_interval is not None:
        text += f" [{100 * line.sd_interval[0]:.2f}, {100 * line.sd_interval[1]:.2f}]"
    return text


def _seeds_text(line) -> str:
    def count(k: int | None) -> str:
        return ">1000" if k is None else str(k)

    if line.seed_sd is None or line.item_se is None:
        return "-"
    if line.no_seed_variance:
        return "unknown (seeds scored alike)"
    text = count(line.seeds_for_gap)
    if line.sd_interval is not None:
        text += f" [{count(line.seeds_low)}, {count(line.seeds_high)}]"
    return text
