"""Leaderboard definitions (``leaderboards/<name>.yaml``) and the names every part of the board shares."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from antlm_bench.errors import UserError

DEFAULT_TASKS = ("blimp", "blimp_supplement", "ewok", "glue")
DEFAULT_GROUP_BY = ("recipe", "preset", "schedule")
# config_fingerprint: the run record's hash of the recipe's content, preset, schedule and convention; the board
# splits a group whose runs record two of them even when it is not named here (board._split_configurations)
GROUP_KEYS = ("recipe", "architecture", "preset", "schedule", "seed", "run_id", "limit", "data_hash",
              "config_fingerprint")
# when a checkpoint was scored several ways and its last phase does not decide, the first of these wins
SCORING_PREFERENCE = ("clm", "pll", "mntp", "pll-word-l2r", "finetune", "finetune-official", "probe")
# GLUE's methods (adapters/glue): their rows' seed is the fine-tuning seed, not the training seed
FINETUNED_SCORING = ("finetune", "finetune-official", "probe")
# a linear probe is a different measurement from fine-tuning, and fine-tuning under the BabyLM 2025 pipeline's
# protocol (best epoch chosen on the reported split) another: their rows get their own column
SEPARATE_SCORING = ("probe", "finetune-official")
REQUIRED_COLUMNS = ("run_id", "task", "subtask", "metric", "value", "scoring")
Z95 = 1.959963984540054
MACRO = "macro"
EVAL_SETS = ("full", "fast")
# ----------------------------------------------------------------------------------------------------------
# definitions


class LeaderboardDefinition(BaseModel):
    """``leaderboards/<name>.yaml``: which runs, tasks and metrics a leaderboard holds."""

    model_config = ConfigDict(extra="forbid")

    name: str = "results"
    description: str = ""
    results: list[str] = []  # globs, relative to the definition file
    tasks: list[str] = list(DEFAULT_TASKS)
    macro_tasks: list[str] | None = None  # default: the four AntLM tasks that are among ``tasks``
    metrics: dict[str, str] = {}  # task -> metric of its task-level row (default: score, else accuracy)
    group_by: list[str] = list(DEFAULT_GROUP_BY)
    scoring: dict[str, list[str]] = {}  # task (or "*") -> allowed scoring methods
    filters: dict[str, list[str]] = {}  # run column -> allowed values, e.g. {preset: [small]}
    reference: dict[str, str] = {}  # the row the others are compared with (default: the leader)
    source: Path | None = None

    @model_validator(mode="after")
    def _one_eval_set(self) -> LeaderboardDefinition:
        """A board holds one evaluation set: "full" unless ``filters: {eval_set: [fast]}``. Fast scores (the
        official BabyLM 2025 fast subsets) are other numbers, never averaged or compared with full ones."""
        chosen = [str(v) for v in self.filters.get("eval_set", ["full"])]
        if len(chosen) != 1 or chosen[0] not in EVAL_SETS:
            raise ValueError(f"filters.eval_set must name one of {', '.join(EVAL_SETS)} (fast and full scores "
                             "are never mixed on one board)")
        self.filters = {**self.filters, "eval_set": chosen}
        return self

    def effective_macro_tasks(self) -> list[str]:
        if self.macro_tasks is not None:
            return list(self.macro_tasks)
        return [t for t in DEFAULT_TASKS if t in self.tasks] if set(DEFAULT_TASKS) <= set(self.tasks) else []


def load_definition(name_or_path: str | Path) -> LeaderboardDefinition:
    """A definition by file path, or by name from ``leaderboards/`` (and ``--include-path`` folders)."""
    from antlm_bench.registry import discover, load_yaml

    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise UserError(f"leaderboard definition {path}: no such file")
        document = load_yaml(path)
    else:
        found = discover("leaderboards")
        if str(name_or_path) not in found:
            known = ", ".join(sorted(found)) or "none"
            raise UserError(f"unknown leaderboard {str(name_or_path)!r}; known: {known} (or give a .yaml path)")
        path, document = found[str(name_or_path)]
    try:
        definition = LeaderboardDefinition.model_validate({**document, "source": path})
    except ValidationError as err:
        first = err.errors()[0]
        raise UserError(f"{path}: field {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    for key in definition.group_by:
        if key not in GROUP_KEYS:
            raise UserError(f"{path}: field group_by: unknown key {key!r}; choose from {', '.join(GROUP_KEYS)}")
    return definition


def definition_result_paths(definition: LeaderboardDefinition) -> list[Path]:
    """The definition's ``results`` globs, relative to its file."""
    base = definition.source.parent if definition.source else Path.cwd()
    paths: list[Path] = []
    for pattern in definition.results:
        matches = sorted(base.glob(pattern)) if any(c in pattern for c in "*?[") else [base / pattern]
        paths.extend(m for m in matches if m.exists())
    return paths
