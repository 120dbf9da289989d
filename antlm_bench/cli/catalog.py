"""``antlm-bench list``: what the task and recipe registries hold."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from antlm_bench.cli.app import app, console, flag
from antlm_bench.config import RunConfig
from antlm_bench.registry import add_include_path

list_app = typer.Typer(help="List registered tasks and model recipes.", no_args_is_help=True)
app.add_typer(list_app, name="list")

JsonOption = typer.Option(False, "--json", help="Print a JSON list (one object per row) instead of the table.")


@list_app.command("tasks")
def list_tasks(include_path: list[Path] | None = flag(RunConfig, "include_path"), as_json: bool = JsonOption) -> None:
    """Tasks and task groups, with their adapter class and source file."""
    from antlm_bench.tasks import GroupSpec, all_specs

    for folder in include_path or []:
        add_include_path(folder)
    records = []
    for name, spec in sorted(all_specs().items()):
        source = None if spec.source is None else str(spec.source)
        if isinstance(spec, GroupSpec):
            records.append({"name": name, "kind": "group", "description": spec.description,
                            "members": list(spec.task), "class": None, "file": source})
        else:
            records.append({"name": name, "kind": "task", "description": spec.description,
                            "members": list(spec.members or []), "class": spec.class_name, "file": source})
    if as_json:
        typer.echo(json.dumps(records, indent=2))
        return
    table = Table(title="tasks")
    for column in ("name", "kind", "description", "members / class", "file"):
        table.add_column(column)
    for record, spec in zip(records, (spec for _, spec in sorted(all_specs().items()))):
        if record["kind"] == "group":
            detail = ", ".join(record["members"])
        else:
            detail = record["class"] + (f" ({', '.join(record['members'])})" if record["members"] else "")
        table.add_row(record["name"], record["kind"], record["description"], detail, _short(spec.source))
    console.print(table)


@list_app.command("models")
def list_models(include_path: list[Path] | None = flag(RunConfig, "include_path"), as_json: bool = JsonOption) -> None:
    """Model recipes with their presets and parameter counts."""
    from antlm_bench.models import count_parameters
    from antlm_bench.recipes import all_recipes

    for folder in include_path or []:
        add_include_path(folder)
    records = []
    for recipe in all_recipes():
        for preset_name, preset in recipe.presets.items():
            records.append({"recipe": recipe.name, "architecture": recipe.architecture,
                            "default_schedule": recipe.default_schedule, "preset": preset_name,
                            "layers": preset.n_layers, "hidden_size": preset.hidden_size,
                            "vocab_size": preset.vocab_size,
                            "parameters": count_parameters(recipe.resolve(preset_name)),
                            "measured": preset.measured})
    if as_json:
        typer.echo(json.dumps(records, indent=2))
        return
    table = Table(title="model recipes")
    for column in ("recipe", "architecture", "default schedule", "preset", "layers x hidden", "vocab", "parameters",
                   "measured (on a 2-core CPU)"):
        table.add_column(column)
    for r in records:
        table.add_row(r["recipe"], r["architecture"], r["default_schedule"], r["preset"],
                      f"{r['layers']} x {r['hidden_size']}", str(r["vocab_size"]), f"{r['parameters'] / 1e6:.2f}M",
                      r["measured"] or "")
    console.print(table)


def _short(path: Path | None) -> str:
    """A spec's file relative to the working folder when that is shorter, for narrow terminals."""
    if path is None:
        return ""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return path.name


@app.command("lm-eval-tasks")
def lm_eval_tasks(
    list_them: bool = typer.Option(False, "--list", help="List the task and group names instead of the path."),
) -> None:
    """Print the folder of the shipped offline lm-eval tasks (BLiMP filtered, supplement, EWoK, read from the data
    folder, never the hub), for lm-eval's --include_path:

        lm_eval --model hf --model_args pretrained=DIR --include_path "$(antlm-bench lm-eval-tasks)" --tasks antlm_blimp_filtered
    """
    import antlm_bench

    folder = Path(antlm_bench.__file__).resolve().parent / "lm_eval_tasks"
    if not list_them:
        typer.echo(str(folder))
        return
    import re

    names = set()
    for path in sorted(folder.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        names.update(re.findall(r"^(?:task|group): (\S+)$", text, flags=re.M))
    typer.echo("\n".join(sorted(names)))
