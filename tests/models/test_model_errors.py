"""A damaged checkpoint is one line naming the file (and the field), exit status 2, and no output: truncated or
corrupt weights, wrong-typed config fields, weights that do not fit, and weights that give NaN / infinite
log-probabilities (which would otherwise score as a plausible accuracy)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from trainer_support import tiny_config
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.training.trainer import train


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny trained BabyLlama (CLM) and LTG-BERT (MLM) checkpoint."""
    tmp = tmp_path_factory.mktemp("checkpoints")
    train(tiny_config(tmp, tmp / "llama", schedule="0.25_CLM"))
    train(tiny_config(tmp, tmp / "bert", model="antlm-ltgbert", schedule="0.25_MLM"))
    return {"babyllama": tmp / "llama" / "checkpoints" / "phase-0-CLM",
            "ltgbert": tmp / "bert" / "checkpoints" / "phase-0-MLM"}


def _rewrite_weights(change: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = folder / "model.safetensors"
        save_file(change(load_file(path)), path, metadata={"format": "pt"})
    return apply


def _unrecorded(change: Callable[[Path], None]) -> Callable[[Path], None]:
    """``change``, in a checkpoint whose record predates the weights digest (schema 2): what eval's scoring must
    then catch itself, without the identity check that refuses weights changed after training first."""
    def apply(folder: Path) -> None:
        change(folder)
        record = json.loads((folder / "antlm_state.json").read_text())
        record.pop("weights_digest")
        (folder / "antlm_state.json").write_text(json.dumps({**record, "schema_version": 2}))
    return apply


def _cut(fraction: float) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = folder / "model.safetensors"
        path.write_bytes(path.read_bytes()[: int(path.stat().st_size * fraction)])
    return apply


def _config(**fields: object) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = folder / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))
    return apply


def _first_tensor_changed(make: Callable[[torch.Tensor], torch.Tensor | None]):
    def change(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        key = sorted(weights)[0]
        new = make(weights[key])
        if new is None:
            weights.pop(key)
        else:
            weights[key] = new
        return weights
    return change


_DAMAGE: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "weights cut in half": (_cut(0.5), ("model.safetensors", "truncated or corrupt")),
    "weights empty": (_cut(0.0), ("model.safetensors", "truncated or corrupt")),
    "weights garbage": (lambda f: (f / "model.safetensors").write_bytes(os.urandom(4096)),
                        ("model.safetensors", "truncated or corrupt")),
    "weights missing": (lambda f: (f / "model.safetensors").unlink(), ("cannot load the model",)),
    "a tensor missing": (_rewrite_weights(_first_tensor_changed(lambda t: None)), ("lacks", "tensor")),
    "a tensor of another shape": (_rewrite_weights(_first_tensor_changed(lambda t: torch.zeros(3, 3))),
                                  ("other shapes than config.json",)),
    "hidden_size a string": (_config(hidden_size="64"), ("config.json", "hidden_size", "expected int")),
    "num_hidden_layers null": (_config(num_hidden_layers=None), ("config.json", "num_hidden_layers")),
    "max_position_embeddings a string": (_config(max_position_embeddings="512"),
                                         ("config.json", "max_position_embeddings")),
    "tie_word_embeddings a string": (_config(tie_word_embeddings="yes"), ("config.json", "tie_word_embeddings")),
    "architectures a string": (_config(architectures="X"), ("config.json", "architectures")),
    "antlm_architecture a number": (_config(antlm_architecture=5), ("config.json", "antlm_architecture")),
    "config a list": (lambda f: (f / "config.json").write_text("[1, 2]"), ("config.json", "not an object")),
    "config not UTF-8": (lambda f: (f / "config.json").write_bytes(b'{"a": "\xff"}'), ("config.json", "UTF-8")),
    "weights all NaN": (_unrecorded(_rewrite_weights(lambda w: {k: torch.full_like(v, float("nan"))
                                                                for k, v in w.items()})),
                        ("NaN log-probabilities", "score another checkpoint")),
    "weights all inf": (_unrecorded(_rewrite_weights(lambda w: {k: torch.full_like(v, float("inf"))
                                                                for k, v in w.items()})),
                        ("log-probabilities", "score another checkpoint")),
    # the record names the weights written at training: other weights under it are refused before scoring
    "weights changed after training": (_rewrite_weights(lambda w: {k: v * 1.01 for k, v in w.items()}),
                                       ("model.safetensors", "not the weights this checkpoint was saved with")),
}


@pytest.mark.parametrize("architecture", ["babyllama", "ltgbert"])
@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_a_damaged_checkpoint_is_one_line_and_no_output(checkpoints: dict[str, Path], real_data_dir: Path,
                                                        tmp_path: Path, architecture: str, damage: str) -> None:
    folder = tmp_path / "model"
    shutil.copytree(checkpoints[architecture], folder)
    apply, fragments = _DAMAGE[damage]
    apply(folder)
    output = tmp_path / "out"
    result = CliRunner().invoke(app, ["eval", "--model", str(folder), "--tasks", "blimp", "--limit", "1",
                                      "--data-dir", str(real_data_dir), "--output", str(output)])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert str(folder) in lines[0]  # the checkpoint is named
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert not output.exists() or not any(output.iterdir())  # no scores of a broken model


def test_the_undamaged_checkpoints_score(checkpoints: dict[str, Path], real_data_dir: Path, tmp_path: Path) -> None:
    for architecture, folder in checkpoints.items():
        result = CliRunner().invoke(app, ["eval", "--model", str(folder), "--tasks", "blimp", "--limit", "1",
                                          "--data-dir", str(real_data_dir), "--output", str(tmp_path / architecture)])
        assert result.exit_code == 0, (architecture, result.output, result.exception)


def test_eval_with_an_unknown_device_is_one_line(checkpoints: dict[str, Path], real_data_dir: Path,
                                                 tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "--model", str(checkpoints["babyllama"]), "--tasks", "blimp",
                                      "--data-dir", str(real_data_dir), "--output", str(tmp_path / "out"),
                                      "--device", "bogus"])
    assert result.exit_code == 2
    assert "bogus" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
