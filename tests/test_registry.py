"""Task/recipe registries, --tasks resolution, recipe validation and the checkpoint record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from antlm_bench import registry
from antlm_bench.errors import UserError
from antlm_bench.recipes import load_recipe
from antlm_bench.tasks import resolve_tasks
from antlm_bench.runs.record import auto_scoring_method, dominant_objective, read_state


@pytest.fixture(autouse=True)
def _isolated_include_paths(monkeypatch):
    monkeypatch.setattr(registry, "_include_paths", [])


def names(requests):
    return [(r.name, r.members) for r in requests]


def test_group_expands_to_its_tasks():
    resolved = dict(names(resolve_tasks("babylm")))
    assert {"blimp", "blimp_supplement", "ewok"} <= set(resolved)


def test_members_after_colon_belong_to_that_task(tmp_path):
    spec = tmp_path / "toy.yaml"
    spec.write_text("name: toy\nclass: MinimalPairTask\nmembers: {a: {}, b: {}, c: {}}\n")
    registry.add_include_path(tmp_path)
    assert names(resolve_tasks("blimp,toy:a,c,ewok")) == [("blimp", None), ("toy", ["a", "c"]), ("ewok", None)]


def test_unknown_task_lists_known_ones():
    with pytest.raises(UserError, match=r"unknown task 'blimpp'.*blimp_supplement"):
        resolve_tasks("blimpp")


def test_unknown_member_is_named(tmp_path):
    (tmp_path / "toy.yaml").write_text("name: toy\nclass: MinimalPairTask\nmembers: {a: {}}\n")
    registry.add_include_path(tmp_path)
    with pytest.raises(UserError, match="no member 'zz'"):
        resolve_tasks("toy:zz")


def test_include_path_overrides_shipped_spec(tmp_path):
    (tmp_path / "blimp.yaml").write_text("name: blimp\nclass: MinimalPairTask\ndescription: mine\n")
    registry.add_include_path(tmp_path)
    (request,) = resolve_tasks("blimp")
    assert request.spec.description == "mine"


def test_bad_yaml_names_file_and_line(tmp_path):
    (tmp_path / "broken.yaml").write_text("name: x\nclass: [unclosed\n")
    registry.add_include_path(tmp_path)
    with pytest.raises(UserError, match=r"broken\.yaml:\d+"):
        resolve_tasks("blimp")


def test_shipped_recipes_validate_and_paper_preset_matches_table_1():
    for name in ("antlm-babyllama", "antlm-ltgbert", "babyllama", "ltgbert"):
        paper = load_recipe(name).preset("paper")
        assert (paper.n_layers, paper.n_heads, paper.hidden_size, paper.intermediate_size, paper.vocab_size) == (
            12, 12, 768, 2048, 16000,
        )


def test_recipe_field_error_names_file_and_field(tmp_path):
    (tmp_path / "bad.yaml").write_text(
        "name: bad\narchitecture: babyllama\ndefault_schedule: 1_CLM\noptimizer: {lr: -1}\n"
        "lr_schedules: {CLM: {kind: cosine}}\npresets: {}\n"
    )
    registry.add_include_path(tmp_path)
    with pytest.raises(UserError, match=r"bad\.yaml: field optimizer\.lr"):
        load_recipe("bad")


def test_mntp_falls_back_to_the_mlm_schedule():
    recipe = load_recipe("antlm-babyllama")
    assert recipe.lr_schedule("MNTP") == recipe.lr_schedule("MLM")
    assert recipe.lr_schedule("MLM").kind == "cosine_with_restarts"
    assert recipe.lr_schedule("CLM").kind == "cosine"


def test_auto_scoring_follows_the_last_phase(tmp_path):
    assert auto_scoring_method(None, is_masked_lm=True)[0] == "pll"
    assert auto_scoring_method(None, is_masked_lm=False)[0] == "clm"
    for objective, method in [("CLM", "clm"), ("MLM", "pll"), ("MNTP", "mntp"), ("MIX(CLM:1,MLM:15)", "pll")]:
        (tmp_path / "antlm_state.json").write_text(json.dumps({"phase_objective": objective, "phase_index": 2}))
        assert auto_scoring_method(read_state(tmp_path), is_masked_lm=False)[0] == method
    assert dominant_objective("MIX(CLM:3,MLM:1)") == "CLM"


def test_corrupt_checkpoint_record_is_a_user_error(tmp_path):
    (tmp_path / "antlm_state.json").write_text("{not json")
    with pytest.raises(UserError, match="antlm_state.json:1"):
        read_state(tmp_path)
    assert read_state(Path(tmp_path / "missing")) is None
