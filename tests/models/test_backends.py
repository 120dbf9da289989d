"""Backends through the registry: architecture `hf` (stock transformers models under the schedule grammar) and
plug-in backends from the entry-point group `antlm_bench.backends`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from trainer_support import tiny_config
from transformers import GPT2LMHeadModel, ModernBertForMaskedLM, RobertaForMaskedLM

from antlm_bench import registry
from antlm_bench.errors import UserError
from antlm_bench.models import build_model, hf, is_masked_lm, load_model
from antlm_bench.recipes import load_recipe
from antlm_bench.training.trainer import train

REPO = Path(__file__).resolve().parents[2]


def _hf(recipe: str, seed: int = 0):
    torch.manual_seed(seed)
    return build_model(load_recipe(recipe).resolve("tiny")).eval()


@pytest.mark.parametrize("recipe, stock, native", [("hf-gpt2", GPT2LMHeadModel, "causal"),
                                                  ("hf-roberta", RobertaForMaskedLM, "bidirectional"),
                                                  ("hf-modernbert", ModernBertForMaskedLM, "bidirectional")])
def test_hf_model_is_the_stock_class_and_switches_attention(recipe, stock, native):
    model = _hf(recipe)
    assert isinstance(model, stock) and type(model).__name__ == stock.__name__
    assert model.native_attention == native
    assert hf.mask_problem(model) is None
    ids = torch.randint(5, 2048, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = model(input_ids=ids).logits
        ours = model.lm_logits(model.hidden_states(ids))
        causal = model.hidden_states(ids, attention_mode="causal")
        both = model.hidden_states(ids, attention_mode="bidirectional")
    torch.testing.assert_close(ours, plain, rtol=1e-5, atol=1e-5)
    # causal: the first position sees itself only, whatever follows; bidirectional: it sees the whole row
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 2048
    with torch.no_grad():
        torch.testing.assert_close(model.hidden_states(changed, attention_mode="causal")[:, 0], causal[:, 0])
        assert not torch.allclose(model.hidden_states(changed, attention_mode="bidirectional")[:, 0], both[:, 0])
    # padding in the other mode: the padded row's real tokens equal the unpadded row
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    other = "bidirectional" if native == "causal" else "causal"
    with torch.no_grad():
        padded = model.hidden_states(ids, mask, other)[1, :6]
        alone = model.hidden_states(ids[1:, :6], None, other)[0]
    torch.testing.assert_close(padded, alone, rtol=1e-4, atol=1e-4)


def test_scoring_reads_an_hf_models_own_positions():
    """A learned position table (GPT-2, RoBERTa) ends at its size; rotary ModernBERT does not."""
    from antlm_bench.scoring.model import wrap_model

    expected = {"hf-gpt2": (512, False), "hf-roberta": (514, False), "hf-modernbert": (512, True)}
    for recipe, (length, extends) in expected.items():
        scoring = wrap_model(_hf(recipe), None)
        assert scoring.kind == "antlm" and (scoring.max_length, scoring.extends_positions) == (length, extends)


def test_hf_model_that_ignores_the_mask_is_refused():
    model = _hf("hf-gpt2")
    ignoring = type("GPT2LMHeadModel", (type(model),), {"_model_mask": lambda self, allowed, dtype: None})
    broken = ignoring(model.config)
    with pytest.raises(UserError) as err:
        hf.check_masks(broken)
    message = str(err.value)
    assert "\n" not in message and "cannot switch attention per phase" in message and "model_type gpt2" in message


def test_sliding_window_that_a_mask_replaces_is_refused():
    """ModernBERT's stock local layers: a 4-D mask silently replaces their window, so the check says no."""
    preset = load_recipe("hf-modernbert").resolve("tiny").spec
    fields = {**preset.hf_config, "global_attn_every_n_layers": 3, "local_attention": 8}
    config = hf.make_config(preset.model_copy(update={"hf_config": fields}), {"pad_token_id": 0})
    assert hf._window(config) == 8
    torch.manual_seed(0)
    with pytest.raises(UserError, match="ModernBertForMaskedLM .*cannot switch attention per phase"):
        hf.HfBackend.build(config)


def test_hf_config_errors_are_one_line(tmp_path):
    recipe = load_recipe("hf-gpt2")
    preset = recipe.resolve("tiny").spec
    for fields, expected in (({"n_inner": 8}, "model_type"),
                             ({"model_type": "no-such-model"}, "no-such-model"),
                             ({"model_type": "gpt2", "n_layer": 3}, "num_hidden_layers")):
        with pytest.raises(UserError, match=expected):
            hf.make_config(preset.model_copy(update={"hf_config": fields}), {})


def test_hf_gpt2_trains_under_a_schedule_and_saves_a_plain_gpt2(tmp_path):
    result = train(tiny_config(tmp_path, tmp_path / "run", model="hf-gpt2", schedule="0.2_CLM+0.2_MLM+0.1_CLM"))
    assert result.steps > 0 and all(torch.isfinite(torch.tensor(result.losses)))
    folder = result.final_checkpoint
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["GPT2LMHeadModel"] and config["antlm_architecture"] == "hf"
    plain = GPT2LMHeadModel.from_pretrained(folder).eval()
    ours = load_model(folder)
    assert not is_masked_lm(folder)
    ids = torch.randint(5, 100, (1, 7))
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids=ids).logits, plain(input_ids=ids).logits)
        # and ours still switches: bidirectional states differ from the stock (causal) ones
        assert not torch.allclose(ours.hidden_states(ids, attention_mode="bidirectional")[:, 0],
                                  ours.hidden_states(ids, attention_mode="causal")[:, 0])


# -- plug-ins -------------------------------------------------------------------------------------------------

_PLUGIN = '''
"""A plug-in backend: BabyLlama under another name, with its own recipe folder."""
from pathlib import Path

from antlm_bench.models.babyllama import BabyLlamaBackend


class TinyPlugBackend(BabyLlamaBackend):
    @staticmethod
    def make_config(preset, special_ids):
        config = BabyLlamaBackend.make_config(preset, special_ids)
        config.antlm_architecture = "tinyplug"
        return config


def trainers() -> str:
    return str(Path(__file__).parent / "trainers")
'''

_RECIPE = '''
name: tinyplug-lm
description: a backend from a plug-in distribution
architecture: tinyplug
default_schedule: 0.2_CLM
optimizer: {lr: 1.0e-3}
lr_schedules:
  CLM: {kind: cosine}
  MLM: {kind: cosine}
presets:
  tiny: {n_layers: 1, n_heads: 2, hidden_size: 32, intermediate_size: 64, vocab_size: 2048, max_seq_len: 32,
         global_batch_size: 16, micro_batch_size: 16, dropout: 0.0}
'''


def _install_plugin(root: Path) -> Path:
    """A distribution as pip would leave it: the package and its dist-info (METADATA, entry_points.txt)."""
    package = root / "tinyplug"
    (package / "trainers").mkdir(parents=True)
    (package / "__init__.py").write_text(_PLUGIN)
    (package / "trainers" / "tinyplug-lm.yaml").write_text(_RECIPE)
    info = root / "tinyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [antlm_bench.backends]
        tinyplug = tinyplug:TinyPlugBackend

        [antlm_bench.trainers]
        tinyplug = tinyplug:trainers
    """))
    return root


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    root = _install_plugin(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(registry.BACKENDS, "_entry_points", None)  # the group is read again, with the plug-in
    yield root
    registry.BACKENDS._classes.pop("tinyplug", None)
    sys.modules.pop("tinyplug", None)


def test_plugin_backend_is_listed_trained_and_scored(plugin_path, tmp_path, real_data_dir):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    listed = subprocess.run([sys.executable, "-m", "antlm_bench", "list", "models", "--json"], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    rows = [row for row in json.loads(listed.stdout) if row["recipe"] == "tinyplug-lm"]
    assert rows and rows[0]["architecture"] == "tinyplug"

    from antlm_bench.evaluate import evaluate

    assert "tinyplug" in registry.BACKENDS.names()
    result = train(tiny_config(tmp_path, tmp_path / "run", model="tinyplug-lm", schedule="0.2_CLM"))
    folder = result.final_checkpoint
    assert json.loads((folder / "config.json").read_text())["antlm_architecture"] == "tinyplug"
    model = load_model(folder)
    assert type(model).__name__ == "BabyLlamaForCausalLM"
    scores = evaluate(str(folder), "blimp", limit=2, data_dir=real_data_dir)
    assert scores is not None


def test_recipe_naming_an_unknown_backend_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_include_paths", [])
    (tmp_path / "nope.yaml").write_text(_RECIPE.replace("tinyplug-lm", "nope-lm").replace("tinyplug", "nope"))
    registry.add_include_path(tmp_path)
    with pytest.raises(UserError) as err:
        load_recipe("nope-lm")
    message = str(err.value)
    assert "\n" not in message and "nope.yaml" in message and "unknown backend 'nope'" in message
    assert "hf" in message and "antlm_bench.backends" in message


def _install_entry_points(root: Path, name: str, entry_points: str) -> Path:
    info = root / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return root


@pytest.mark.parametrize("module, value, why", [
    ("", "no_such_module_xyz:Backend", "cannot import it (ModuleNotFoundError"),
    ("class NotABackend:\n    pass\n", "badplug_mod:NotABackend", "badplug_mod.NotABackend is not a subclass of "
                                                                    "antlm_bench.models.backend.Backend"),
    ("", "badplug_mod", "is not a subclass of antlm_bench.models.backend.Backend"),  # a module, not a class
    ("from antlm_bench.models.backend import Backend\nclass Half(Backend):\n    lm_class = classifier_class = "
     "object\n", "badplug_mod:Half", "Half does not define make_config"),
])
def test_broken_plugin_is_one_line_naming_it(tmp_path, monkeypatch, module, value, why):
    root = _install_entry_points(tmp_path / "site", "badplug", f"[antlm_bench.backends]\nbadplug = {value}\n")
    (root / "badplug_mod.py").write_text(module)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(registry.BACKENDS, "_entry_points", None)
    assert "badplug" in registry.BACKENDS.names()  # listed without importing it
    assert "babyllama" in registry.BACKENDS.names()  # a broken plug-in costs only its own name
    with pytest.raises(UserError) as err:
        registry.BACKENDS.get("badplug", "architecture")
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"architecture backend plug-in badplug = {value} (badplug)")
    assert why in message
    sys.modules.pop("badplug_mod", None)


def test_backend_without_a_model_class_is_refused_when_defined():
    from antlm_bench.models.backend import Backend

    with pytest.raises(TypeError, match="set lm_class, or override both build and load_lm"):
        type("NoModel", (Backend,), {"classifier_class": object, "build": classmethod(lambda cls, config: None)})
    with pytest.raises(TypeError, match="set classifier_class, or override load_classifier"):
        type("NoClassifier", (Backend,), {"lm_class": object})


def test_registry_imports_a_shipped_backend_only_when_it_is_looked_up():
    code = textwrap.dedent("""
        import sys
        from antlm_bench.recipes import load_recipe
        from antlm_bench.registry import BACKENDS
        load_recipe("antlm-ltgbert")  # checks the architecture's name: nothing imported
        print(sorted(m for m in sys.modules if m.startswith("antlm_bench.models")))
        BACKENDS.get("ltgbert", "test")
        print(sorted(m for m in sys.modules if m.startswith("antlm_bench.models.")))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before == "[]"
    assert "'antlm_bench.models.ltgbert'" in after and "'antlm_bench.models.hf'" not in after


def test_registered_backend_is_checked_and_found(monkeypatch):
    from antlm_bench.models.babyllama import BabyLlamaBackend
    from antlm_bench.models.backend import backend_of

    class Renamed(BabyLlamaBackend):
        pass

    monkeypatch.setattr(registry.BACKENDS, "_registered", {})
    monkeypatch.setattr(registry.BACKENDS, "_classes", {})
    registry.register_backend("renamed")(Renamed)
    assert backend_of({"antlm_architecture": "renamed"}) is Renamed
    assert backend_of({"antlm_architecture": "nothing-made-me"}) is None
    registry.register_backend("not-a-backend")(dict)
    with pytest.raises(UserError, match=r"^architecture backend 'not-a-backend': builtins\.dict is not a subclass"):
        registry.BACKENDS.get("not-a-backend", "architecture")


@pytest.mark.slow
def test_hf_roberta_resume_after_kill_is_bit_identical(tmp_path):
    """Architecture hf under both attention modes (a 4-D causal mask on the encoder), dropout 0.1: kill -9 in the
    MLM phase, --resume, the same weights as an uninterrupted run."""
    import signal

    from safetensors.torch import load_file
    from trainer_support import ENV, KILLER, train_by_cli

    common = dict(model="hf-roberta", schedule="1_CLM+1_MLM", save_every_steps=3, deterministic=True)
    reference = tiny_config(tmp_path, tmp_path / "reference", **common)
    train_by_cli(reference)
    interrupted = tiny_config(tmp_path, tmp_path / "interrupted", **common)
    record = json.loads((tmp_path / "reference" / "run.json").read_text())
    spe, total = record["steps_per_epoch"], record["total_steps"]
    kill_at = next(step for step in range(total - 1, spe, -1) if step % 3)  # in the MLM phase, after no save
    assert spe < kill_at < total
    died = subprocess.run([sys.executable, "-c", KILLER, interrupted.model_dump_json(), str(kill_at)], env=ENV,
                          capture_output=True, text=True, timeout=600)
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    train_by_cli(interrupted.model_copy(update={"resume": True}))
    a = load_file(tmp_path / "reference" / "checkpoints" / "phase-1-MLM" / "model.safetensors")
    b = load_file(tmp_path / "interrupted" / "checkpoints" / "phase-1-MLM" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
