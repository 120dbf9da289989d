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
from antlm_bench.pipeline.evaluations import eval_settings, task_options
from antlm_bench.recipes import ResolvedPreset, load_recipe
from antlm_bench.registry import add_include_path
from antlm_bench.runs.identity import RunIdentity
from antlm_bench.runs.schedule import parse_schedule


@dataclass(frozen=True)
class ResolvedRun:
    """A run request with its defaults decided once: the recipe at its preset, the canonical schedule, the tasks (a
    bad name refused before any training) and the task options over the preset's budget."""

    config: RunConfig
    preset: ResolvedPreset
    schedule: str
    requests: tuple[Any, ...]
    options: GlueOptions

    def identity(self, seed: int) -> RunIdentity:
        """Which run ``seed`` is: its folder's name, and what a record must say to be it."""
        return RunIdentity(self.preset.recipe.name, self.preset.name, self.schedule, seed, self.config.label)

    def settings_of(self, seed: int) -> Callable[[Any], dict[str, Any]]:
        """A task request -> the settings its final evaluation of ``seed`` is keyed by."""
        return lambda request: eval_settings(self.config, request, self.options, seed, self.schedule)


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
    """The request's defaults decided (and said), and its notes: a preset's GLUE budget applied."""
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
    return ResolvedRun(config, preset, schedule, requests, task_options(config, preset))
