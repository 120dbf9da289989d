"""A run request resolved once, before anything trains: the defaults decided (and said), the recipe at its preset
(``recipes.ResolvedPreset``), the schedule canonical, the tasks found (a bad name refused), the task options over the
preset's budget, and each seed's run identity (``runs.identity.RunIdentity``). The driver and the reuse rule both
start from it, so they decide alike."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from antlm_bench.adapters.glue.options import GlueOptions
from antlm_bench.config import RunConfig
from antlm_bench.models import count_parameters
from antlm_bench.models.threads import choose_threads
from antlm_bench.options import resolve_device
from antlm_bench.pipeline.evaluations import eval_settings, glue_options, task_options
from antlm_bench.recipes import ResolvedPreset, load_recipe
from antlm_bench.registry import add_include_path
from antlm_bench.runs.identity import RunIdentity
from antlm_bench.runs.schedule import parse_schedule


@dataclass(frozen=True)
class ResolvedRun:
    """A run request with its defaults decided once: the recipe at its preset, the canonical schedule, the tasks (a
    bad name refused before any training), the task options over the preset's budget (``notes``: the budget's
    values applied, said before training) and each seed's run identity, in the order asked."""

    config: RunConfig
    preset: ResolvedPreset
    schedule: str
    requests: tuple[Any, ...]
    options: GlueOptions
    identities: tuple[RunIdentity, ...]
    notes: tuple[str, ...] = ()

    def settings_of(self, identity: RunIdentity) -> Callable[[Any], dict[str, Any]]:
        """A task request -> the settings its final evaluation of the seed is keyed by."""
        return lambda request: eval_settings(self.config, request, self.options, identity.seed, self.schedule)


def default_preset() -> tuple[str, str]:
    if torch.cuda.is_available():
        return "paper", f"CUDA device {torch.cuda.get_device_name(0)} found: preset paper"
    return "tiny", "no CUDA device: preset tiny (CPU quickstart size; --preset cpu learns grammar on a CPU in under an hour a seed, small or paper are larger)"


def run_threads(config: RunConfig, preset: ResolvedPreset) -> tuple[int, str]:
    """The torch threads a run of a recipe at ``preset`` uses, and why (``models.threads.choose_threads``); the
    sweep asks it too, to share the cores among its worker processes."""
    return choose_threads(config.machine.threads, count_parameters(preset),
                          resolve_device(config.machine.device))


def resolve_run(config: RunConfig, say: Callable[[str], None] = lambda _: None) -> ResolvedRun:
    """The request's defaults decided (the default preset said as it is chosen)."""
    from antlm_bench.tasks import resolve_tasks

    for folder in config.include_path:
        add_include_path(folder)
    name = config.model.preset
    if name is None:
        name, why = default_preset()
        say(why)
    recipe = load_recipe(config.model.name)
    preset = recipe.resolve(name)
    schedule = parse_schedule(config.model.schedule or recipe.default_schedule).canonical
    requests = tuple(resolve_tasks(config.evaluation.tasks))  # fail on a bad task name before any training
    identities = tuple(RunIdentity(recipe.name, preset.name, schedule, seed, config.label) for seed in config.seeds)
    return ResolvedRun(config, preset, schedule, requests, task_options(config, preset), identities,
                       _budget_notes(config, preset, requests))


def _budget_notes(config: RunConfig, preset: ResolvedPreset, requests: tuple[Any, ...]) -> tuple[str, ...]:
    """A preset's GLUE budget, where it applies: said, since it changes what GLUE means for the run."""
    budget = preset.spec.glue_budget
    if not budget or not any(r.adapter().takes_options for r in requests):
        return ()
    given = glue_options(config).given()
    applied = {k: v for k, v in budget.items() if k not in given}
    if not applied:
        return ()
    return (f"preset {preset.name}: GLUE budget " + ", ".join(f"{k}={v}" for k, v in applied.items())
            + " (override with --glue-epochs / --glue-max-train-examples)",)
