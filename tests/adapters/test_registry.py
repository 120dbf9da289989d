"""Task/recipe registries (the YAML folders and the lazy class registries), --tasks resolution, recipe validation
and the checkpoint record."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from antlm_bench import registry
from antlm_bench.errors import UserError
from antlm_bench.recipes import load_recipe
from antlm_bench.tasks import resolve_tasks


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


def test_a_shipped_task_class_is_imported_on_first_lookup_only():
    code = textwrap.dedent("""
        import sys
        from antlm_bench.tasks import resolve_tasks
        (request,) = resolve_tasks("blimp")
        print(sorted(m for m in sys.modules if m.startswith("antlm_bench.adapters")))
        adapter = request.adapter()
        print(type(adapter).__name__, sorted(m for m in sys.modules if m.startswith("antlm_bench.adapters.")))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before == "[]"
    assert after.startswith("MinimalPairTask ") and "'antlm_bench.adapters.minimal_pairs'" in after
    assert "glue" not in after and "babylm-2025" not in after


def test_every_shipped_task_class_is_a_task_adapter():
    from antlm_bench.adapters.base import TaskAdapter

    for name in registry.SHIPPED_TASK_CLASSES:
        assert issubclass(registry.TASK_CLASSES.get(name, "test"), TaskAdapter)


def test_spec_naming_an_unknown_class_is_one_line(tmp_path):
    (tmp_path / "toy.yaml").write_text("name: toy\nclass: NoSuchTask\n")
    registry.add_include_path(tmp_path)
    (request,) = resolve_tasks("toy")
    with pytest.raises(UserError) as err:
        request.adapter()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'toy.yaml'}: field class: unknown task class "
                                                       "'NoSuchTask'; known: ")
    assert "MinimalPairTask" in message and "GlueTask" in message


def test_registered_task_class_must_be_a_task_adapter(tmp_path, monkeypatch):
    from antlm_bench.adapters.minimal_pairs import MinimalPairTask

    class Mine(MinimalPairTask):
        pass

    class NotAnAdapter:
        def __init__(self, spec, members):
            pass

    monkeypatch.setattr(registry.TASK_CLASSES, "_registered", {})
    monkeypatch.setattr(registry.TASK_CLASSES, "_classes", {})
    registry.register_task_class("Mine")(Mine)
    registry.register_task_class("NotAnAdapter")(NotAnAdapter)
    (tmp_path / "mine.yaml").write_text("name: mine\nclass: Mine\n")
    (tmp_path / "other.yaml").write_text("name: other\nclass: NotAnAdapter\n")
    registry.add_include_path(tmp_path)
    assert type(resolve_tasks("mine")[0].adapter()) is Mine
    with pytest.raises(UserError, match=r"^task class 'NotAnAdapter': .*NotAnAdapter is not a subclass of "
                                         r"antlm_bench\.adapters\.base\.TaskAdapter"):
        resolve_tasks("other")[0].adapter()


def test_task_class_from_a_plugin_entry_point(tmp_path, monkeypatch):
    root = tmp_path / "site"
    info = root / "taskplug-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: taskplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[antlm_bench.task_classes]\nPlugTask = taskplug_mod:PlugTask\n")
    (root / "taskplug_mod.py").write_text("from antlm_bench.adapters.minimal_pairs import MinimalPairTask\n\n\n"
                                          "class PlugTask(MinimalPairTask):\n    pass\n")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(registry.TASK_CLASSES, "_entry_points", None)
    monkeypatch.setattr(registry.TASK_CLASSES, "_classes", {})
    (tmp_path / "plug.yaml").write_text("name: plug\nclass: PlugTask\n")
    registry.add_include_path(tmp_path)
    assert type(resolve_tasks("plug")[0].adapter()).__name__ == "PlugTask"
    sys.modules.pop("taskplug_mod", None)


def test_shipped_recipes_validate_and_paper_preset_matches_table_1():
    for name in ("antlm-babyllama", "antlm-ltgbert", "babyllama-clm-only", "ltgbert-mlm-only"):
        paper = load_recipe(name).resolve("paper").spec
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
