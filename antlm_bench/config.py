"""The job configuration of ``antlm-bench run`` and of every sweep cell, typed once: one section per concern (the
model, its data, the machine, training, evaluation, the output), each option a field that holds its type, default,
validation, help text and command-line flag (torchtitan's single job config is the model). Everything else is
derived from these fields:

- the command-line flags: ``cli.flags.flag(Section, "field")`` is a typer option whose default and help are the
  field's, so a flag says the same thing in every command that has it (``--device`` in run, train, eval, sweep);
- the config file: ``run --config FILE`` reads a YAML (or JSON) mapping of the sections (``model: {name:
  antlm-ltgbert, preset: cpu}``, ``data: {max_words: 20000}``), the flags given on the command line over it;
- a sweep's cells: each cell is a :class:`RunConfig` (``sweep.grid.GridCell.config``), written to the sweep's folder
  and run as ``run --config <cell file>``; a sweep file's ``run:`` options (by their flags' names) are set on it by
  :func:`flag_paths`, never passed on as words;
- the run record: run.json's ``config`` is the trainer's ``TrainConfig``, built from these sections by the pipeline.

A rejected value is one line naming its flag, or its field in the config file (:func:`run_config`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from antlm_bench.errors import UserError, validation_line
from antlm_bench.options import (
    MAX_SEED,
    SAVE_EVERY_MINUTES,
    parse_device,
    parse_label,
    parse_save_at_words,
    parse_seeds,
)

PRECISION_HELP = ("auto (bf16 autocast with float32 master weights where the CPU or GPU multiplies bf16 natively "
                  "and the model is wide enough to gain, else float32; said and recorded in run.json), fp32 or "
                  "bf16. Part of the run's configuration: bf16 and fp32 seeds are never pooled.")
SAVE_AT_WORDS_HELP = ("Checkpoints chck_<N>M at these words seen (repeats counted): 1M,2M,... (K and M suffixes), "
                      "or a BabyLM grid: babylm-strict-small (19: every 1M to 10M, then every 10M to 100M; babylm is "
                      "its alias) or babylm-strict (28: and every 100M to 1000M). Counts the schedule never reaches "
                      "are named at the start.")
TASKS_HELP = ("Tasks to evaluate the final model on (any of `antlm-bench list tasks`): blimp, blimp_supplement, ewok, "
              "glue (glue:rte,mrpc for a few members), entity_tracking, wug_adj, reading, or the groups babylm (the "
              "first four), zero-shot (all but glue) and babylm-2025 (all seven).")
FINAL_SCORING_HELP = ("Method of the final minimal-pair evaluation: auto (the last phase's: CLM -> clm, MLM -> "
                      "pll), clm or pll for every run. Schedules that end in different objectives are compared "
                      "only when scored alike: the board never tests clm against pll. Per-phase scores keep "
                      "each phase's own method.")
LABEL_HELP = ("A name beside the seed (lower-case letters, digits, hyphens): in the run folder's name, its records and "
              "rows (the board shows SCHEDULE \\[label] as its own row), and in every random draw, so seed s under a "
              "label is another initialisation and data order than seed s without; not part of the configuration "
              "(a negative control: sweep --negative-control).")


def option(default: Any = None, flag: str = "", help: str = "", **constraints: Any) -> Any:
    """A configuration field that is also a command-line option: ``flag`` (its long spelling) and ``help`` ride in
    the field's metadata, where ``cli.flags`` and :func:`flag_paths` read them; ``constraints`` are pydantic's
    (``gt=0``, ``default_factory=...``)."""
    if "default_factory" in constraints:
        return Field(description=help, json_schema_extra={"flag": flag}, **constraints)
    return Field(default, description=help, json_schema_extra={"flag": flag}, **constraints)


class Section(BaseModel):
    """A section of the configuration: its fields only, none unknown."""

    model_config = ConfigDict(extra="forbid")


# The options a training run takes, each defined once: a section below holds it, and so does the trainer's own
# edge (TrainConfig below, whose dump is run.json's config), so both validate and explain it alike.
Recipe = Annotated[str, option("antlm-babyllama", "--model", "Trainer recipe (see `antlm-bench list models`).")]
PresetName = Annotated[str | None, option(None, "--preset", "Model size: tiny, cpu, small or paper (default: paper "
                                                            "with CUDA, tiny otherwise).")]
ScheduleText = Annotated[str | None, option(None, "--schedule", "Schedule such as 4_CLM+16_MLM+4_CLM (default: the "
                                                                "recipe's).")]
DataDir = Annotated[Path | None, option(None, "--data-dir", "Data folder (default: $ANTLM_BENCH_DATA, then "
                                                            "~/.cache/antlm-bench/data).")]
Corpus = Annotated[Path | None, option(None, "--corpus", "Pre-training text folder of *.train files (default: the "
                                                         "data folder's pretrain_sample).")]
CacheDir = Annotated[Path | None, option(None, "--cache-dir", "Tokenizer / packed corpus cache.")]
MaxWords = Annotated[int | None, option(None, "--max-words", "Cap the pre-training corpus (default: the preset's "
                                                             "cap).", gt=0)]
# at the edge: a device this machine lacks is refused before any work
Device = Annotated[str, AfterValidator(parse_device),
                   option("auto", "--device", "auto (CUDA when torch sees a device, else cpu), cpu, mps, cuda or "
                                              "cuda:N.")]
PrecisionName = Annotated[Literal["auto", "fp32", "bf16"], option("auto", "--precision", PRECISION_HELP)]
Threads = Annotated[int | None, option(None, "--threads", "CPU threads for torch (default: 1 below 10M parameters, "
                                                          "torch's default above, unless $OMP_NUM_THREADS is set; "
                                                          "run.json and eval.json record the choice).", gt=0)]
EvalEvery = Annotated[Literal["none", "phase", "epoch", "words"], option(
    "phase", "--eval-every", "Score the minimal-pair tasks during training: at every phase end (phase), epoch end "
    "(epoch), at each --save-at-words checkpoint with the fast suite (words: `run` then draws curves over words "
    "seen), or not at all (none).")]
EvalLimit = Annotated[int | None, option(None, "--eval-limit", "Items per subtask when scoring during training "
                                                               "(default: the preset's eval_limit).", gt=0)]
SaveAtWords = Annotated[list[int], BeforeValidator(lambda value: parse_save_at_words(value)
                                                   if isinstance(value, str) or value is None else value),
                        option(flag="--save-at-words", help=SAVE_AT_WORDS_HELP, default_factory=list)]
# not part of the configuration: checkpoint settings never change the network a seed trains; None (a library
# caller's): no resume point by the clock
SaveEveryMinutes = Annotated[float | None, option(SAVE_EVERY_MINUTES, "--save-every-minutes", "A resume point every M "
                                           "minutes of training: the most a hard kill (SIGKILL, a lost machine) "
                                           "costs; Ctrl-C and SIGTERM write one anyway.", gt=0)]
Convention = Annotated[Literal["babylm-2025", "babylm-2024"], option(
    "babylm-2025", "--convention", "Scoring convention of the minimal-pair scores: babylm-2025 (texts as given) or "
    "babylm-2024 (a leading space, the AntLM paper's lm-eval tasks); recorded in every row.")]
# a name beside the seed (runs.identity): in the folder names and rows, and in every random draw
Label = Annotated[str | None, BeforeValidator(parse_label), option(None, "--label", LABEL_HELP)]


class ModelConfig(Section):
    """What trains: the recipe, its size and the schedule it trains under."""

    name: Recipe
    preset: PresetName
    schedule: ScheduleText


class DataConfig(Section):
    """What it trains on: the data folder, the pre-training text and its cap."""

    data_dir: DataDir
    corpus: Corpus
    cache_dir: CacheDir
    max_words: MaxWords


class MachineConfig(Section):
    """Where it runs: the device, the arithmetic and the CPU threads."""

    device: Device
    precision: PrecisionName
    threads: Threads


class TrainingConfig(Section):
    """How training is watched and kept: per-phase scores and checkpoints (the recipe holds the rest)."""

    eval_every: EvalEvery
    eval_limit: EvalLimit
    save_at_words: SaveAtWords
    save_every_minutes: SaveEveryMinutes

    @model_validator(mode="after")
    def _words_need_counts(self) -> TrainingConfig:
        if self.eval_every == "words" and not self.save_at_words:
            raise ValueError("--eval-every words needs --save-at-words")
        return self


class EvaluationConfig(Section):
    """What the final model is scored on, and how."""

    tasks: str = option("babylm", "--tasks", TASKS_HELP)
    limit: int | None = option(None, "--limit", "Final minimal-pair evaluation on the first N items per subtask (a "
                                                "quick look; rows record it).", gt=0)
    final_scoring: Literal["auto", "clm", "pll"] = option("auto", "--final-scoring", FINAL_SCORING_HELP)
    convention: Convention
    batch_tokens: int = option(4096, "--batch-tokens", "Token budget per forward pass (rows x padded length); bounds "
                                                        "peak memory whatever a sentence's length.", gt=0)
    glue_epochs: int | None = option(None, "--glue-epochs", "GLUE fine-tuning epochs (default: 10, 30 for WSC; the "
                                                            "tiny preset uses a smaller CPU budget and says so).")
    glue_max_train_examples: int | None = option(None, "--glue-max-train-examples", "Cap each GLUE training split.")
    probe: bool = option(False, "--probe", "GLUE by a frozen-feature logistic-regression probe (fast on CPU; rows say "
                                           "scoring=probe, never mixed with fine-tuning).")
    glue_protocol: str | None = option(None, "--glue-protocol", "GLUE: default (best epoch on a slice of the training "
                                       "split: honest selection) or babylm-official (as the BabyLM 2025 pipeline: best "
                                       "epoch on the reported split, first-position pooling for every model; rows say "
                                       "scoring=finetune-official, never ranked with the default).")


class OutputConfig(Section):
    """Where results go, and what is shown while they are made."""

    folder: Path = option(Path("results"), "--output", "Folder for run folders and tables.")
    quiet: bool = option(False, "--quiet", "No progress bars.")


class RunConfig(BaseModel):
    """``antlm-bench run``'s whole job, and one sweep cell's: the sections, the seeds and the label."""

    model_config = ConfigDict(extra="forbid")

    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    machine: MachineConfig = Field(default_factory=MachineConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    seeds: list[int] = option(flag="--seeds", help="Seeds: 42, 1-3 or 1,2,5-7 (at most 1000); one run per seed, "
                              "summarised as mean and spread.", default_factory=lambda: [42])
    label: Label
    # extra folders of task specs and recipes (registry.add_include_path), searched before the shipped ones
    include_path: list[Path] = option(flag="--include-path", help="Extra folder of task specs / trainer recipes, "
                                      "searched before the shipped ones.", default_factory=list)

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, value: Any) -> Any:
        return parse_seeds(value)

    def with_flags(self, flags: Mapping[str, Any]) -> RunConfig:
        """This configuration with the flags' values over it (``{"--limit": 3}``), validated as the command line
        would be."""
        return run_config(self.model_dump(), flags)


class TrainConfig(BaseModel):
    """Everything ``antlm-bench train`` takes, and what ``run`` builds per seed (``pipeline.run``): the training
    options above plus the trainer's own (seed, resume, knobs over the recipe, checkpointing); its dump is run.json's
    ``config``. Lives here, not beside the trainer, so that ``train``'s flags are made from it without importing
    torch."""

    model_config = ConfigDict(extra="forbid")

    model: Recipe
    preset: str = "tiny"  # a preset's name; the command resolves its default (pipeline.default_preset)
    output: Path = option(..., "--output", "Run folder: checkpoints, metrics, scores.")
    schedule: ScheduleText
    data_dir: DataDir
    corpus: Corpus
    cache_dir: CacheDir
    # numpy and torch take seeds in [0, 2**32) (options.MAX_SEED)
    seed: int = option(42, "--seed", f"The training seed, 0 to {MAX_SEED}.", ge=0, le=MAX_SEED)
    label: Label
    max_words: MaxWords
    resume: bool = option(False, "--resume", "Continue the run in --output from its last checkpoint.")
    overwrite: bool = option(False, "--overwrite", "Delete the run in --output and start again.")
    eval_every: EvalEvery = "none"  # train scores nothing unless asked
    eval_tasks: str = option("blimp", "--eval-tasks", "Tasks for --eval-every.")
    eval_limit: EvalLimit
    convention: Convention
    save_every_steps: int | None = option(None, "--save-every-steps", "Resume point every N steps.", gt=0)
    save_every_minutes: SaveEveryMinutes
    save_every_epoch: bool = option(False, "--save-every-epoch", "A checkpoint at every epoch end.")
    # checkpoints/chck_<N>M at the first step where the words seen (repeats counted) reach each of these
    save_at_words: SaveAtWords
    micro_batch_size: int | None = option(None, "--micro-batch-size", "Sequences per forward pass (gradient "
                                          "accumulation keeps the recipe's global batch; default: the preset's).",
                                          gt=0)
    # a run's own knobs over the recipe file's (ResolvedPreset.overridden): part of the configuration fingerprint
    lr: float | None = option(None, "--lr", "Peak learning rate (default: the recipe's optimizer.lr).", gt=0, le=1)
    global_batch_size: int | None = option(None, "--global-batch-size", "Sequences per optimizer step (default: the "
                                                                        "preset's).", gt=0)
    warmup_ratio: float | None = option(None, "--warmup-ratio", "Linear warm-up, as a share of each phase's (or "
                                        "cycle's) steps (default: the recipe's lr_schedules).", ge=0, lt=1)
    # stop after this many global steps (smoke runs, benchmarks)
    max_steps: int | None = option(None, "--max-steps", "Stop after this many optimizer steps.", gt=0)
    device: Device
    # auto: bf16 autocast where the chip has native bf16 and the model is wide enough to gain (models.precision);
    # a resume keeps the precision its run started with
    precision: PrecisionName
    # torch.use_deterministic_algorithms (bit-exact reruns; slower on GPU)
    deterministic: bool = option(False, "--deterministic", "Deterministic kernels (bit-exact reruns).")
    report_to: list[Literal["tensorboard", "wandb"]] = option(
        flag="--report-to", help="tensorboard and/or wandb (if installed).", default_factory=list)
    progress: bool = True
    # CPU threads for torch, as the caller chose them (models.threads.choose_threads) and why; applied and recorded
    # in run.json's config. None: torch's current setting. Not part of the run's identity (a resume may differ).
    torch_threads: int | None = Field(None, gt=0)
    torch_threads_reason: str = ""

    @field_validator("save_at_words", mode="before")
    @classmethod
    def _words(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_save_at_words(value)
        if isinstance(value, (list, tuple)) and any(isinstance(v, str) for v in value):
            return parse_save_at_words(",".join(str(v) for v in value))
        return sorted(set(value)) if isinstance(value, (list, tuple)) else value

    @model_validator(mode="after")
    def _words_eval(self) -> TrainConfig:
        if any(w <= 0 for w in self.save_at_words):
            raise ValueError("save_at_words: word counts must be positive")
        if self.eval_every == "words" and not self.save_at_words:
            raise ValueError("eval_every words needs --save-at-words")
        return self


def flag_of(field: Any) -> str:
    """A field's command-line flag (``option``'s metadata)."""
    return (field.json_schema_extra or {}).get("flag", "")


def section_of(field: Any) -> type[Section] | None:
    """The section a field holds (``RunConfig.data`` -> ``DataConfig``), or None for an option."""
    annotation = field.annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, Section) else None


def flag_paths(model: type[BaseModel] = RunConfig) -> dict[str, tuple[str, ...]]:
    """Each flag of ``model``'s fields (sections included) -> the field's path: ``--max-words`` -> ``("data",
    "max_words")``; the one map from what a user types to where the value lives."""
    paths: dict[str, tuple[str, ...]] = {}
    for name, field in model.model_fields.items():
        section = section_of(field)
        if section is not None:
            paths.update({flag: (name, *path) for flag, path in flag_paths(section).items()})
        elif flag_of(field):
            paths[flag_of(field)] = (name,)
    return paths


def field_at(path: tuple[str, ...], model: type[BaseModel] = RunConfig) -> Any:
    """The pydantic field at ``path`` (``("data", "max_words")``)."""
    *sections, name = path
    for section in sections:
        model = model.model_fields[section].annotation
    return model.model_fields[name]


def nested(values: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
    """``{("data", "max_words"): 5}`` -> ``{"data": {"max_words": 5}}``."""
    tree: dict[str, Any] = {}
    for path, value in values.items():
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return tree


def merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over``'s values over ``base``'s, section by section."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) \
            else value
    return out


def flag_words(config: RunConfig) -> list[str]:
    """The command line of ``config``: each field that differs from its default as its flag and value
    (``--max-words 20000``, a switch alone, a list's items joined by commas, or repeated for --include-path)."""
    paths = flag_paths()
    words: list[str] = []
    for flag, path in paths.items():
        section: Any = config
        for part in path[:-1]:
            section = getattr(section, part)
        value = getattr(section, path[-1])
        field = field_at(path)
        default = field.default_factory() if field.default_factory is not None else field.default
        if value == default:
            continue
        if isinstance(value, bool):
            words.append(flag)
        elif flag == "--include-path":
            words += [word for folder in value for word in (flag, str(folder))]
        elif isinstance(value, list):
            words += [flag, ",".join(map(str, value))]
        else:
            words += [flag, str(value)]
    return words


def read_config_file(path: Path, kind: str, keys: str) -> dict[str, Any]:
    """A YAML (or JSON) file's top-level mapping (``run --config``, ``sweep --config``); anything else is one line
    naming the file and, for a syntax error, its line. ``kind`` names the file (``a sweep file``), ``keys`` its
    top-level keys (``models:, schedules:, ...``)."""
    import yaml

    from antlm_bench.data.readers import read_text

    text = read_text(path, f"give {kind}: UTF-8 YAML ({keys})")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise UserError(f"{where}: not valid YAML ({getattr(err, 'problem', None) or err})") from None
    except RecursionError:
        raise UserError(f"{path}: YAML nested too deeply; fix the file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: {kind} is a mapping ({keys}), not a {type(data).__name__}")
    return data


def run_config(file_values: Mapping[str, Any] | None = None, flags: Mapping[str, Any] | None = None,
               source: str = "the config file") -> RunConfig:
    """The :class:`RunConfig` of a config file's sections (``file_values``) with command-line values over them
    (``flags``: flag -> value, e.g. ``{"--max-words": 5}``); a rejected value is one line naming its flag when the
    command line gave it, else its field in ``source``."""
    paths = flag_paths()
    given = {paths[flag]: value for flag, value in (flags or {}).items()}
    try:
        return RunConfig.model_validate(merged(file_values or {}, nested(given)))
    except ValidationError as err:
        first = err.errors()[0]
        loc = tuple(str(part) for part in first["loc"])
        whole = RunConfig.model_fields.get(loc[-1]) if loc else None
        if first["type"] == "value_error" and whole is not None and section_of(whole) is not None:
            # a rule across a section's fields (--eval-every words needs --save-at-words): its own words
            raise UserError(first["msg"].removeprefix("Value error, ")) from None
        by_flag = {path: flag for flag, path in paths.items() if path in given}
        flag = next((by_flag[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in by_flag), None)
        if flag is not None:
            raise UserError(validation_line(err, option=True, flags={loc[0]: flag})) from None
        raise UserError(f"{source}: {validation_line(err)}") from None

__all__ = ["CacheDir", "Convention", "Corpus", "DataConfig", "DataDir", "Device", "EvalEvery", "EvalLimit",
           "EvaluationConfig", "Label", "MachineConfig", "MaxWords", "ModelConfig", "OutputConfig", "PrecisionName",
           "PresetName", "Recipe", "RunConfig", "SaveAtWords", "SaveEveryMinutes", "ScheduleText", "Section",
           "Threads", "TrainConfig", "TrainingConfig", "field_at", "flag_of", "flag_paths", "flag_words", "merged",
           "nested", "option", "read_config_file", "run_config", "section_of"]
