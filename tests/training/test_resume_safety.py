"""Conservative --resume: a broken ``last`` never costs a finished checkpoint, a tampered one is refused with one
line, a usable older resume point is taken instead (bit for bit), and checkpoint files follow the umask."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from trainer_support import cli_args, tiny_config
from typer.testing import CliRunner

from antlm_bench.cli import app
from antlm_bench.config import TrainConfig
from antlm_bench.training.reporting import read_metrics
from antlm_bench.training.trainer import train


def _tree(folder: Path) -> dict[str, str]:
    """Every file's content hash and every link's target: what "nothing changed" means."""
    out = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_file():
            out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _cli(config: TrainConfig):
    return CliRunner().invoke(app, cli_args(config))


def _assert_one_line(result, code: int, *fragments: str) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    # progress lines (corpus read, tokenizer reused) may come first; the error is one line, and the last
    lines = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and result.stderr.rstrip().endswith(lines[0]), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> TrainConfig:
    tmp = tmp_path_factory.mktemp("finished")
    config = tiny_config(tmp, tmp / "run", schedule="0.5_CLM", deterministic=True)
    train(config)
    return config


def _copy(finished: TrainConfig, tmp_path: Path) -> TrainConfig:
    target = tmp_path / "run"
    shutil.copytree(finished.output, target, symlinks=True)
    return finished.model_copy(update={"output": target, "resume": True})


def test_a_dangling_last_refuses_and_keeps_the_finished_checkpoint(finished: TrainConfig, tmp_path: Path) -> None:
    config = _copy(finished, tmp_path)
    shutil.rmtree(config.output / ".resume")  # `last` now points nowhere
    before = _tree(config.output)
    result = _cli(config)
    _assert_one_line(result, 2, "last", "does not exist", "checkpoints/phase-0-CLM", "nothing was deleted",
                     "--overwrite")
    assert _tree(config.output) == before  # today: "starting from the beginning", the checkpoint deleted


@pytest.mark.parametrize(("where", "step", "fragment"), [
    ("trainer_state", 999, "field step is 999 but"),  # the records disagree
    ("both", 999, "outside this schedule's steps 1..2"),  # they agree, past the schedule's end
    ("both", 1, "in a folder named step-000000002"),  # they agree, but not with the folder
])
def test_a_tampered_step_is_refused(finished: TrainConfig, tmp_path: Path, where: str, step: int,
                                    fragment: str) -> None:
    config = _copy(finished, tmp_path)
    last = config.output / "last"
    state = torch.load(last / "trainer_state.pt", weights_only=True)
    state["step"] = step
    torch.save(state, last / "trainer_state.pt")
    if where == "both":
        record = json.loads((last / "antlm_state.json").read_text())
        record["step"] = step
        (last / "antlm_state.json").write_text(json.dumps(record))
    before = _tree(config.output)
    _assert_one_line(_cli(config), 2, "trainer_state.pt", fragment)  # today: exit 0, "model in" a missing folder
    assert _tree(config.output) == before


@pytest.mark.parametrize("damage", ["truncated weights", "no trainer state", "corrupt trainer state",
                                    "corrupt record"])
def test_a_damaged_last_without_another_resume_point_is_refused(finished: TrainConfig, tmp_path: Path,
                                                                 damage: str) -> None:
    config = _copy(finished, tmp_path)
    last = config.output / "last"
    if damage == "truncated weights":
        weights = last / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        named = "model.safetensors"
    elif damage == "no trainer state":
        (last / "trainer_state.pt").unlink()
        named = "trainer_state.pt"
    elif damage == "corrupt trainer state":
        (last / "trainer_state.pt").write_bytes(b"\x80\x04not a pickle")
        named = "trainer_state.pt"
    else:
        (last / "antlm_state.json").write_text("{ not json")
        named = "antlm_state.json"
    before = _tree(config.output)
    _assert_one_line(_cli(config), 2, named, "nothing was deleted")
    assert _tree(config.output) == before


def test_a_broken_last_falls_back_to_an_older_resume_point_bit_for_bit(tmp_path: Path) -> None:
    common = dict(schedule="1_CLM", deterministic=True)
    reference = tiny_config(tmp_path, tmp_path / "reference", **common)
    train(reference)
    run = tiny_config(tmp_path, tmp_path / "run", **common, max_steps=2)
    train(run)
    older = tmp_path / "step-2"
    shutil.copytree(tmp_path / "run" / ".resume" / "step-000000002", older)
    resumed = run.model_copy(update={"resume": True, "max_steps": None})
    train(resumed)  # to the end: `last` is step 4, the step-2 folder is gone
    shutil.copytree(older, tmp_path / "run" / ".resume" / "step-000000002")  # as a kill before the cleanup leaves it
    weights = tmp_path / "run" / "last" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])

    import io

    from rich.console import Console

    said = io.StringIO()
    again = train(resumed, console=Console(file=said, width=100_000))
    messages = said.getvalue().splitlines()
    assert again.steps == 4 and len(again.losses) == 2  # steps 3 and 4 again, from step 2
    assert any("model.safetensors: truncated or corrupt" in m and "resuming from" in m and "step-000000002" in m
               for m in messages), messages
    a = load_file(tmp_path / "reference" / "checkpoints" / "phase-0-CLM" / "model.safetensors")
    b = load_file(tmp_path / "run" / "checkpoints" / "phase-0-CLM" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [m["step"] for m in read_metrics(tmp_path / "run")] == [1, 2, 3, 4]


def test_a_run_without_any_checkpoint_starts_again(finished: TrainConfig, tmp_path: Path) -> None:
    config = _copy(finished, tmp_path)
    shutil.rmtree(config.output / ".resume")
    shutil.rmtree(config.output / "checkpoints")  # killed before its first checkpoint: nothing worth keeping
    result = _cli(config)
    assert result.exit_code == 0, result.output
    assert "starting from the beginning" in result.stderr
    assert (config.output / "checkpoints" / "phase-0-CLM" / "model.safetensors").is_file()


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_checkpoint_files_and_folders_follow_the_umask(tmp_path: Path, umask: int) -> None:
    before = os.umask(umask)
    try:
        train(tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM"))
    finally:
        os.umask(before)
    run = tmp_path / "run"
    folders = [run / "checkpoints" / "phase-0-CLM", (run / "last").resolve()]
    for folder in folders:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask, folder
        modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()}
        assert "model.safetensors" in modes  # today 0600 while the rest is 0644
        assert set(modes.values()) == {0o666 & ~umask}, modes
    assert stat.S_IMODE((run / "run.json").stat().st_mode) == 0o666 & ~umask
