"""``antlm-bench schedule "4_CLM+16_MLM+4_CLM"``: the canonical form and the phases it runs."""

from __future__ import annotations

import typer
from rich.table import Table

from antlm_bench.cli.app import app, console, flag
from antlm_bench.config import ModelConfig, RunConfig


@app.command("schedule")
def schedule_command(
    schedule: str = typer.Argument(..., help='A schedule such as "4_CLM+16_MLM+4_CLM" or "3x(1_CLM+2_MLM)".'),
    model: str = flag(ModelConfig, "name", "-m"),  # the recipe whose per-objective LR schedules the table shows
    include_path: list[str] | None = flag(RunConfig, "include_path"),
) -> None:
    """Print the schedule's canonical form and a table of its phases (epochs, objective, attention, LR)."""
    from antlm_bench.recipes import load_recipe
    from antlm_bench.registry import add_include_path
    from antlm_bench.runs.schedule import format_number, parse_schedule

    for folder in include_path or []:
        add_include_path(folder)
    parsed = parse_schedule(schedule)
    recipe = load_recipe(model)
    console.print(parsed.canonical, markup=False)
    table = Table(caption=f"LR schedules of recipe {recipe.name}; {format_number(parsed.total_epochs)} epochs in all")
    for column in ("phase", "epochs", "from epoch", "objective", "attention", "LR schedule"):
        numeric = column in ("phase", "epochs", "from epoch")
        table.add_column(column, justify="right" if numeric else "left", no_wrap=column == "objective")
    start = 0.0
    for index, phase in enumerate(parsed.phases):
        lr = recipe.lr_schedule(phase.dominant_objective).describe()
        if phase.weights is not None:  # MIX or BATCHMIX
            lr = f"{phase.dominant_objective}'s: {lr}"  # the heaviest weight decides
        table.add_row(
            str(index), format_number(phase.epochs), format_number(round(start, 9)), phase.label,
            phase.attention_mode, lr,
        )
        start += phase.epochs
    console.print(table)
