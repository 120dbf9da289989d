"""Trainer recipes: the declarative ``trainers/*.yaml`` files, validated with pydantic.

A recipe names an architecture backend, size presets, the tokenizer, the optimizer, one learning-rate schedule
per objective, the masking policy and the default schedule. ``antlm-bench list models`` prints them.

``Recipe.resolve(preset)`` is the one lookup of a preset (and the one refusal of an unknown one): its
``ResolvedPreset`` (the recipe, the preset's name and sizes; ``overridden`` puts a run's own knobs over both) is what
the corpus, the tokenizer, the model and the trainer take, never a preset's name to look up again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from antlm_bench.errors import UserError, did_you_mean, validation_line
from antlm_bench.registry import BACKENDS, discover

Objective = Literal["CLM", "MLM", "MNTP"]


class _Strict(BaseModel):
    # no inf / nan anywhere in a recipe: an infinite rate or weight fails deep in the optimizer, not here
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class LRSchedule(_Strict):
    """Learning-rate shape within one phase."""

    kind: Literal["cosine", "cosine_with_restarts", "linear", "constant"]
    warmup_ratio: float = Field(0.01, ge=0, lt=1)  # of the phase's steps (of each cycle for restarts)
    cycle_epochs: float | None = Field(None, gt=0)  # restarts: one cycle every N epochs
    cycles: int | None = Field(None, gt=0, le=10_000)  # restarts: N cycles over the phase
    min_lr_ratio: float = Field(0.0, ge=0, le=1)

    def describe(self) -> str:
        """One human line: ``cosine with restarts every 4 epochs, warm-up 1%``."""
        if self.kind == "cosine_with_restarts":
            if self.cycle_epochs is not None:
                cycle = f"every {self.cycle_epochs:g} epochs"
            else:
                cycle = f"{self.cycles or 1} cycles"
            text = f"cosine with restarts, {cycle}"
        else:
            text = self.kind
        if self.warmup_ratio:
            text += f", warm-up {self.warmup_ratio * 100:g}%"
        if self.min_lr_ratio:
            text += f", floor {self.min_lr_ratio:g}"
        return text


class Preset(_Strict):
    """Model size and the batch/sequence settings that go with it."""

    n_layers: int = Field(gt=0)
    n_heads: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    max_seq_len: int = Field(128, gt=0)  # packed training sequence length
    max_position_embeddings: int = Field(512, gt=0)
    position_bucket_size: int = Field(32, gt=0)  # LTG-BERT relative-position buckets
    dropout: float = Field(0.1, ge=0, lt=1)
    tie_word_embeddings: bool = True
    global_batch_size: int = Field(gt=0)  # sequences per optimizer step
    micro_batch_size: int = Field(gt=0)  # sequences per forward pass (gradient accumulation fills the rest)
    max_words: int | None = None  # default --max-words cap of the corpus for this preset
    eval_limit: int | None = None  # default --eval-limit for per-phase scoring at this size
    glue_budget: dict[str, Any] = {}  # default GLUE options for `run` at this size (e.g. epochs, max_train_examples)
    # the optimizer's peak learning rate and every LR schedule's warm-up at this size (None: the recipe's own): a
    # few-million-parameter model at a global batch of 16 learns fastest at a higher rate than the paper's
    # (leaderboards/learning-curve)
    lr: float | None = Field(None, gt=0, le=1)
    warmup_ratio: float | None = Field(None, ge=0, lt=1)
    # this size's own LR schedule per objective, in place of the recipe's (e.g. one cosine for a 2-epoch CPU run,
    # where the paper's restarts every 4 epochs of 72 would never complete a cycle)
    lr_schedules: dict[Objective, LRSchedule] = {}
    # architecture `hf`: a transformers config (model_type plus its own fields) that overrides the sizes above
    hf_config: dict[str, Any] = {}
    # what this size was measured to learn and cost, one line naming the board that shows it (`list models`)
    measured: str | None = Field(None, max_length=300)

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> Preset:
        # each head gets hidden_size / n_heads dimensions: transformers refuses the model deep in training otherwise
        if self.hidden_size % self.n_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by n_heads {self.n_heads}; "
                             "choose sizes whose ratio is a whole number")
        hidden, heads = self.hf_config.get("hidden_size"), self.hf_config.get("num_attention_heads")
        if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads:
            raise ValueError(f"hf_config: hidden_size {hidden} is not divisible by num_attention_heads {heads}")
        return self


class Optimizer(_Strict):
    name: Literal["adamw"] = "adamw"
    # AdamW moves each weight by about lr per step: above 1 a model cannot train, and 1e39 overflows float32
    # inside the optimizer step (a traceback after the run has started) instead of failing here
    lr: float = Field(gt=0, le=1)
    weight_decay: float = Field(0.1, ge=0, le=1)
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = Field(1e-6, gt=0, le=1)
    grad_clip: float | None = Field(1.0, ge=0)  # 0 or null: no clipping

    @field_validator("betas")
    @classmethod
    def _betas_below_one(cls, betas: tuple[float, float]) -> tuple[float, float]:
        if not all(0 <= beta < 1 for beta in betas):
            raise ValueError(f"each beta must be in [0, 1), got {list(betas)}")
        return betas


class Masking(_Strict):
    rate: float = Field(0.15, gt=0, lt=1)
    mask_token_ratio: float = Field(0.8, ge=0, le=1)
    random_token_ratio: float = Field(0.1, ge=0, le=1)
    # span: LTG-BERT's subword spans as their code draws them (one replacement decision per span, the last span
    # running over the row's budget: ~17% chosen for rate 0.15); span_budget: the same, the last span cut to the
    # budget (the configured rate, shorter spans); whole_word_span: spans of 1..max_span whole words
    strategy: Literal["token", "whole_word", "span", "span_budget", "whole_word_span"] = "token"
    max_span: int = Field(3, gt=0)  # whole_word_span only: geometric span lengths capped here, in words


class TokenizerSpec(_Strict):
    kind: Literal["bpe"] = "bpe"
    min_frequency: int = Field(2, ge=1)
    lowercase: bool = False


class Recipe(_Strict):
    name: str
    description: str = ""
    architecture: str  # a registered backend (antlm_bench.models, or a plug-in): checked in load_recipe
    default_schedule: str
    tokenizer: TokenizerSpec = TokenizerSpec()
    optimizer: Optimizer
    lr_schedules: dict[Objective, LRSchedule]
    masking: Masking = Masking()
    # at a phase boundary the LR schedule always restarts; AdamW's moments and step count either carry over
    # ("keep") or start from zero ("reset", as a fresh optimizer per phase would). Default keep: one optimizer
    # for the whole run, what a recipe without the key has always done.
    optimizer_at_phase: Literal["keep", "reset"] = "keep"
    # how a MIX step weighs its objectives (training.objectives.MixedBatch.loss_scales): "row_share", each
    # objective's mean token loss weighted by its share of the batch's rows (GPT-BERT's default), or "token", the
    # mean over every labelled token of the batch (a CLM row then weighs about 1/rate times a masked one)
    mix_loss: Literal["row_share", "token"] = "row_share"
    presets: dict[str, Preset]
    source: Path | None = None  # the YAML file it came from

    def resolve(self, preset: str) -> ResolvedPreset:
        """This recipe at ``preset``, looked up once and passed down (the one place an unknown preset is refused)."""
        if preset not in self.presets:
            raise UserError(f"recipe {self.name}: unknown preset {preset!r}; known: {', '.join(self.presets)}")
        return ResolvedPreset(self, preset, self.presets[preset])

    def lr_schedule(self, objective: str) -> LRSchedule:
        # MNTP is masked prediction too: it follows the MLM schedule unless the recipe gives its own
        if objective in self.lr_schedules:
            return self.lr_schedules[objective]  # type: ignore[index]
        if objective == "MNTP" and "MLM" in self.lr_schedules:
            return self.lr_schedules["MLM"]
        raise UserError(f"recipe {self.name}: no lr_schedules entry for {objective} (file {self.source})")


@dataclass(frozen=True)
class ResolvedPreset:
    """A recipe at one of its presets (``Recipe.resolve``): what a run trains, looked up once at the edge and handed
    to every part that needs the sizes (corpus, tokenizer, model, fingerprints) instead of a preset's name."""

    recipe: Recipe
    name: str
    spec: Preset  # ``recipe.presets[name]``

    @property
    def where(self) -> str:
        """How a message names it: ``recipe antlm-babyllama preset tiny``."""
        return f"recipe {self.recipe.name} preset {self.name}"

    def overridden(self, *, lr: float | None = None, global_batch_size: int | None = None,
                   warmup_ratio: float | None = None) -> ResolvedPreset:
        """This preset as a run trains it: the preset's own learning rate, schedules and warm-up (where it sets
        them), then a run's own knobs (``train --lr / --global-batch-size / --warmup-ratio``) over both: the
        optimizer's learning rate, the preset's global batch (its micro-batch capped to it) and every LR schedule's
        warm-up. Validated as the file's own values are; the result is what the run records (itself when nothing
        changes)."""
        chosen, recipe = self.spec, self.recipe
        lr = lr if lr is not None else chosen.lr
        warmup_ratio = warmup_ratio if warmup_ratio is not None else chosen.warmup_ratio
        if lr is None and global_batch_size is None and warmup_ratio is None and not chosen.lr_schedules:
            return self
        document = recipe.model_dump()
        document["lr_schedules"].update(chosen.model_dump()["lr_schedules"])
        if lr is not None:
            document["optimizer"]["lr"] = lr
        if global_batch_size is not None:
            sizes = document["presets"][self.name]
            sizes["global_batch_size"] = global_batch_size
            sizes["micro_batch_size"] = min(sizes["micro_batch_size"], global_batch_size)
        if warmup_ratio is not None:
            for spec in document["lr_schedules"].values():
                spec["warmup_ratio"] = warmup_ratio
        try:
            changed = Recipe.model_validate(document)
        except ValidationError as err:
            raise UserError(_format_validation(f"recipe {recipe.name} with this run's overrides", err)) from None
        return ResolvedPreset(changed, self.name, changed.presets[self.name])


def _format_validation(path: Path | str, err: ValidationError) -> str:
    return f"{path}: {validation_line(err)}"


def load_recipe(name: str) -> Recipe:
    recipes = discover("trainers")
    if name not in recipes:
        raise UserError(f"unknown model recipe {name!r}; {did_you_mean(name, set(recipes))}known: "
                        f"{', '.join(sorted(recipes))}")
    path, document = recipes[name]
    try:
        recipe = Recipe.model_validate({**document, "source": path})
    except ValidationError as err:
        raise UserError(_format_validation(path, err)) from None
    if recipe.architecture not in BACKENDS:
        raise UserError(f"{path}: field architecture: unknown backend {recipe.architecture!r}; known: "
                        f"{', '.join(BACKENDS.names())} (a plug-in announces more through the entry-point group "
                        "antlm_bench.backends)")
    return recipe


def all_recipes() -> list[Recipe]:
    return [load_recipe(name) for name in sorted(discover("trainers"))]
