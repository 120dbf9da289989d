"""``antlm-bench list``: what the task and recipe registries hold."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from antlm_bench.cli.app import IncludePathOption, app, console
from antlm_bench.registry import add_include_path

list_app = typer.Typer(help="List registered tasks and model recipes.", no_args_is_help=True)
app.add_typer(list_app, name="list")


@list_app.command("tasks")
def list_tasks(include_path: list[Path] | None = IncludePathOption) -> None:
    """Tasks and task groups, with their adapter class and source file."""
    from antlm_bench.tasks import GroupSpec, all_specs

    for folder in include_path or []:
        add_include_path(folder)
    table = Table(title="tasks")
    for column in ("name", "kind", "description", "members / class", "file"):
        table.add_column(column)
    for name, spec in sorted(all_specs().items()):
        if isinstance(spec, GroupSpec):
            table.add_row(name, "group", spec.description, ", ".join(spec.task), _short(spec.source))
        else:
            detail = spec.class_name + (f" ({', '.join(spec.members)})" if spec.members else "")
            table.add_row(name, "task", spec.description, detail, _short(spec.source))
    console.print(table)


@list_app.command("models")
def list_models(include_path: list[Path] | None = IncludePathOption) -> None:
    """Model recipes with their presets and parameter counts."""
    from antlm_bench.models import count_parameters
    from antlm_bench.recipes import all_recipes

    for folder in include_path or []:
        add_include_path(folder)
    table = Table(title="model recipes")
    for column in ("recipe", "architecture", "default schedule", "preset", "layers x hidden", "vocab", "parameters"):
        table.add_column(column)
    for recipe in all_recipes():
        for preset_name, preset in recipe.presets.items():
            params = count_parameters(recipe, preset_name)
            table.add_row(
                recipe.name, recipe.architecture, recipe.default_schedule, preset_name,
                f"{preset.n_layers} x {preset.hidden_size}", str(preset.vocab_size), f"{params / 1e6:.2f}M",
            )
    console.print(table)


def _short(path: Path | None) -> str:
    """A spec's file relative to the working folder when that is shorter, for narrow terminals."""
    if path is None:
        return ""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return path.name
