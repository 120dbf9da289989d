"""The typed job configuration (antlm_bench.config): each option defined once, and everything derived from it --
the commands' flags, `run --config` files with flags over them, a sweep cell's file -- agrees with it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.config import (
    RunConfig,
    Section,
    field_at,
    flag_of,
    flag_paths,
    flag_words,
    read_config_file,
    run_config,
    section_of,
)
from antlm_bench.errors import UserError


def _commands() -> dict[str, object]:
    return typer.main.get_command(app).commands  # type: ignore[attr-defined]


def _sections() -> list[type[Section]]:
    return [section_of(field) for field in RunConfig.model_fields.values() if section_of(field) is not None]


def test_every_option_is_a_field_with_a_flag_and_help_once():
    paths = flag_paths()
    fields = [(section, name) for section in _sections() for name in section.model_fields]
    fields += [(RunConfig, name) for name, field in RunConfig.model_fields.items() if flag_of(field)]
    assert len(paths) == len(fields), "two fields share a flag"
    for section, name in fields:
        field = section.model_fields[name]
        assert flag_of(field).startswith("--") and field.description, f"{section.__name__}.{name}"


def test_a_flag_says_the_same_in_every_command_that_takes_it():
    """The commands' options are made from the fields: a flag's help is the field's wherever it is declared
    (sweep's per-cell options say so and then the field's words), and its default is the field's unless the
    command states another on purpose (train --eval-every none, run --seeds 42 as text)."""
    paths = flag_paths()
    own_defaults = {("train", "--eval-every"): "none", ("run", "--seeds"): "42"}
    # other options that share a name: eval's model folder, task default (three tasks), limit on every task, 2026
    # convention, results folder and GLUE seeds; train's run folder; the sweep's axes, lists of run's values
    others = {("eval", f) for f in ("--model", "--tasks", "--limit", "--convention", "--output", "--seeds")} \
        | {("train", "--output")} | {("sweep", f) for f in ("--model", "--schedule", "--seeds", "--preset", "--output")}
    seen = 0
    for command_name, command in _commands().items():
        for param in command.params:  # type: ignore[attr-defined]
            flag = max(param.opts, key=len) if param.opts else ""
            if flag not in paths or (command_name, flag) in others:
                continue
            field = field_at(paths[flag])
            seen += 1
            if command_name == "sweep" and param.default is None and flag != "--include-path":
                assert param.help == f"`run {flag}` for every cell: {field.description}", flag
                continue
            assert param.help == field.description, (command_name, flag)
            default = None if field.default_factory is not None else field.default
            assert param.default == own_defaults.get((command_name, flag), default), (command_name, flag)
    assert seen >= 40  # run alone has 28 of them


def test_one_device_option():
    helps = {name: next(p.help for p in command.params if "--device" in p.opts)  # type: ignore[attr-defined]
             for name, command in _commands().items()
             if any("--device" in p.opts for p in command.params)}  # type: ignore[attr-defined]
    assert set(helps) == {"run", "train", "eval", "sweep"}
    assert len({help.removeprefix("`run --device` for every cell: ") for help in helps.values()}) == 1


def test_plan_and_sweep_share_the_stopping_rule_defaults():
    from antlm_bench.sweep.settings import UntilDecidedSettings

    plan = {max(p.opts, key=len): p for p in _commands()["plan"].params}  # type: ignore[attr-defined]
    for flag in ("--max-seeds", "--round-seeds", "--alpha", "--tolerance"):
        field = next(f for f in UntilDecidedSettings.model_fields.values() if flag_of(f) == flag)
        assert plan[flag].default == field.default and plan[flag].help == field.description


def _random_config(rng: random.Random) -> RunConfig:
    flags = {"--preset": rng.choice(["tiny", "cpu"]), "--schedule": rng.choice(["4_CLM+16_MLM", "0.5_MIX(CLM:1,MLM:3)"]),
             "--seeds": rng.choice(["1-3", "5", "2,9"]), "--max-words": rng.randint(1, 10**6),
             "--eval-every": rng.choice(["none", "phase", "epoch"]), "--save-at-words": rng.choice(["1K,2M", "babylm"]),
             "--tasks": rng.choice(["blimp", "blimp,glue:rte"]), "--limit": rng.randint(1, 9),
             "--final-scoring": rng.choice(["auto", "clm"]), "--probe": rng.random() < 0.5,
             "--glue-epochs": rng.randint(1, 3), "--threads": rng.randint(1, 4), "--quiet": rng.random() < 0.5,
             "--label": rng.choice([None, "negative-control"]), "--include-path": [Path("a"), Path("b c")]}
    return run_config(flags={k: v for k, v in flags.items() if rng.random() < 0.7})


def test_flag_words_are_the_command_line_of_the_config():
    """A config's words (what a dry run prints) parsed back by run's own parser give the same config."""
    command = _commands()["run"]
    rng = random.Random(0)
    for _ in range(40):
        config = _random_config(rng)
        ctx = command.make_context("run", flag_words(config))  # type: ignore[attr-defined]
        given = {max(p.opts, key=len): ctx.params[p.name] for p in command.params  # type: ignore[attr-defined]
                 if p.name and ctx.get_parameter_source(p.name).name == "COMMANDLINE"}
        assert run_config(flags=given) == config


def test_a_config_file_round_trips_and_flags_go_over_it(tmp_path):
    rng = random.Random(1)
    for i in range(10):
        config = _random_config(rng)
        path = tmp_path / f"c{i}.json"
        path.write_text(config.model_dump_json())
        assert run_config(read_config_file(path, "a run's configuration", "model:, ...")) == config
    yaml = tmp_path / "study.yaml"
    yaml.write_text("model: {name: antlm-ltgbert, preset: cpu}\ndata: {max_words: 5000}\nseeds: 1-3\n")
    values = read_config_file(yaml, "a run's configuration", "model:, ...")
    over = run_config(values, {"--seeds": "4", "--limit": 2})
    assert (over.model.name, over.model.preset, over.data.max_words, over.seeds, over.evaluation.limit) == \
        ("antlm-ltgbert", "cpu", 5000, [4], 2)


@pytest.mark.parametrize(("file_text", "flags", "needle"), [
    ("data: {max_words: 0}\n", {}, "study.yaml: field data.max_words: Input should be greater than 0"),
    ("data: {max_words: 5}\n", {"--max-words": 0}, "--max-words: Input should be greater than 0"),
    ("model: {nmae: x}\n", {}, "study.yaml: field model.nmae: Extra inputs are not permitted"),
    ("seeds: 3-1\n", {}, "--seeds 3-1: the range runs backwards"),
    ("training: {eval_every: words}\n", {}, "--eval-every words needs --save-at-words"),
    ("evaluation: {final_scoring: mlm}\n", {}, "study.yaml: field evaluation.final_scoring"),
])
def test_a_bad_value_is_one_line_naming_its_flag_or_field(tmp_path, file_text, flags, needle):
    path = tmp_path / "study.yaml"
    path.write_text(file_text)
    with pytest.raises(UserError) as raised:
        run_config(read_config_file(path, "a run's configuration", "model:, ..."), flags, str(path))
    assert needle.replace("study.yaml", str(path)) in str(raised.value)
    assert "\n" not in str(raised.value)


def test_run_reads_its_config_file_and_the_command_line_wins(tmp_path, monkeypatch):
    """`run --config`: what reaches the pipeline is the file's values with the given flags over them (and a bad
    file is one line, exit 2, nothing run)."""
    seen = {}

    def stop(config, console=None):
        seen["config"] = config
        raise UserError("stopped by the test")

    monkeypatch.setattr("antlm_bench.pipeline.run_benchmark", stop)
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps({"model": {"preset": "tiny", "schedule": "0.5_CLM"}, "data": {"max_words": 3000},
                                "seeds": "1-2", "output": {"folder": str(tmp_path / "out")}}))
    result = CliRunner().invoke(app, ["run", "--config", str(path), "--seeds", "7", "--quiet"])
    assert result.exit_code == 2 and "stopped by the test" in result.output
    config = seen["config"]
    assert (config.model.schedule, config.data.max_words, config.seeds, config.output.quiet) == \
        ("0.5_CLM", 3000, [7], True)
    path.write_text("- a list\n")
    result = CliRunner().invoke(app, ["run", "--config", str(path)])
    assert result.exit_code == 2 and f"{path}: a run's configuration is a mapping" in result.output


def test_train_flags_are_made_from_its_config():
    """`train`'s options are TrainConfig's fields (the shared ones the sections' own definitions): each flag's help
    and default are its field's, so what run.json records and what `train --help` says cannot drift apart."""
    from antlm_bench.config import TrainConfig

    fields = {flag_of(field): field for field in TrainConfig.model_fields.values() if flag_of(field)}
    train = {max(p.opts, key=len): p for p in _commands()["train"].params}  # type: ignore[attr-defined]
    checked = 0
    for flag, field in fields.items():
        param = train[flag]
        default = None if field.default_factory is not None else field.default
        assert param.help == field.description, flag
        assert param.required if field.is_required() else param.default == default, flag
        checked += 1
    assert checked >= 28
    # the shared ones are one definition: the section's field and TrainConfig's say the same
    paths = flag_paths()
    for flag in ("--max-words", "--device", "--save-at-words", "--label", "--eval-limit", "--convention"):
        assert fields[flag].description == field_at(paths[flag]).description, flag


def test_a_config_files_paths_are_checked_as_the_options_are(tmp_path):
    """A file's output that is a file, or a corpus that is not there, is one line naming the file's field, exit 2,
    before anything runs: the checks `--output` and `--corpus` get."""
    afile = tmp_path / "a-file"
    afile.write_text("x")
    path = tmp_path / "study.yaml"
    for section, needle in (({"output": {"folder": str(afile)}}, "field output.folder"),
                            ({"data": {"corpus": str(tmp_path / "missing")}}, "field data.corpus")):
        path.write_text(json.dumps(section))
        result = CliRunner().invoke(app, ["run", "--config", str(path)])
        assert result.exit_code == 2 and f"{path}: {needle}" in result.output, result.output
