"""The phase trainer in one process: plan, checkpoints, folder rules, accumulation, the NaN guard, --eval-every."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file
from trainer_support import cli_args, tiny_config
from typer.testing import CliRunner

from antlm_bench.errors import UserError
from antlm_bench.pipeline import score_checkpoint
from antlm_bench.recipes import load_recipe
from antlm_bench.runs.record import read_record, scoring_method
from antlm_bench.runs.schedule import parse_schedule
from antlm_bench.training.plan import MAX_TOTAL_STEPS, epoch_order, plan_phases
from antlm_bench.training.reporting import read_metrics
from antlm_bench.training.trainer import TrainingDiverged, train


def test_plan_counts_steps_per_phase_and_restarts_lr() -> None:
    recipe = load_recipe("antlm-babyllama")
    plans = plan_phases(parse_schedule("4_CLM+16_MLM+0.5_MNTP+2_MIX(CLM:1,MLM:15)"), recipe, steps_per_epoch=10)
    assert [(p.start_step, p.n_steps) for p in plans] == [(0, 40), (40, 160), (200, 5), (205, 20)]
    assert plans[1].lr.boundaries == (0, 40, 80, 120, 160)  # MLM: a restart every 4 epochs
    assert plans[0].lr.boundaries == (0, 40) and plans[3].lr.spec.kind == "cosine_with_restarts"  # MIX: MLM's
    assert plans[2].n_steps == 5 and plans[2].lr.spec == recipe.lr_schedule("MLM")  # MNTP follows MLM


def test_epoch_order_is_a_permutation_per_seed_and_epoch() -> None:
    a = epoch_order(1, 0, 100)
    assert sorted(a) == list(range(100))
    assert np.array_equal(a, epoch_order(1, 0, 100))
    assert not np.array_equal(a, epoch_order(1, 1, 100)) and not np.array_equal(a, epoch_order(2, 0, 100))


def test_tiny_run_writes_checkpoints_records_and_metrics(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="1_CLM+0.5_MIX(CLM:1,MLM:3)+1_MNTP")
    result = train(config)
    run = tmp_path / "run"
    names = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert names == ["phase-0-CLM", "phase-1-MIX", "phase-2-MNTP"]
    assert result.final_checkpoint == run / "checkpoints" / "phase-2-MNTP"

    record = json.loads((run / "run.json").read_text())
    spe = record["steps_per_epoch"]
    assert record["status"] == "finished" and record["schedule"] == "1_CLM+0.5_MIX(CLM:1,MLM:3)+1_MNTP"
    assert record["total_steps"] == spe + max(1, round(0.5 * spe)) + spe == result.steps

    state = read_record(run / "checkpoints" / "phase-1-MIX")
    for key in ("schedule", "phases", "phase_index", "phase_objective", "epoch", "step", "tokens_seen", "recipe",
                "preset", "architecture", "seed", "data_hash", "tokenizer_hash", "package_version"):
        assert getattr(state, key) not in (None, "", ()), key
    assert state.weights_digest and state.config_fingerprint and state.schema_version == 3
    assert state.phase_index == 1 and state.phase_objective == "MIX(CLM:1,MLM:3)"
    assert state.step == spe + max(1, round(0.5 * spe))
    assert scoring_method(state, False)[0] == "pll"  # MIX: the heaviest weight, MLM
    assert scoring_method(read_record(run / "checkpoints" / "phase-2-MNTP"), False)[0] == "mntp"
    assert scoring_method(read_record(run / "checkpoints" / "phase-0-CLM"), False)[0] == "clm"

    # the BabyLlama checkpoint is a plain Llama folder for transformers
    from transformers import AutoTokenizer, LlamaForCausalLM

    llama = LlamaForCausalLM.from_pretrained(run / "checkpoints" / "phase-2-MNTP")
    tok = AutoTokenizer.from_pretrained(run / "checkpoints" / "phase-2-MNTP")
    assert llama(**tok("Ka lo mi .", return_tensors="pt")).logits.shape[-1] == llama.config.vocab_size

    metrics = read_metrics(run)
    assert [m["step"] for m in metrics] == list(range(1, result.steps + 1))
    assert {m["objective"] for m in metrics if m["phase_index"] == 0} == {"CLM"}
    assert {m["objective"] for m in metrics if m["phase_index"] == 2} == {"MNTP"}
    assert all(math.isfinite(m["loss"]) for m in metrics)
    # tokens: every step reads a global batch (the epoch's last one may be short)
    n_seq = record["n_sequences"]
    rows = [min(32, n_seq - (g % spe) * 32) for g in range(result.steps)]
    assert [m["tokens_seen"] for m in metrics] == list(np.cumsum(rows) * 64)
    # the lr of every step is the recipe's lr times its phase's schedule at the step's place in the phase
    recipe = load_recipe("antlm-babyllama")
    plans = plan_phases(parse_schedule(config.schedule), recipe, spe)
    expected = [recipe.optimizer.lr * p.lr.factor(s) for p in plans for s in range(p.n_steps)]
    assert [m["lr"] for m in metrics] == pytest.approx(expected, rel=1e-12)
    assert (run / "last").is_symlink() and read_record(run / "last").step == result.steps


def test_second_run_into_the_same_folder_refuses(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM")
    train(config)
    with pytest.raises(UserError, match="--resume .* or --overwrite"):
        train(config)
    before = load_file(tmp_path / "run" / "checkpoints" / "phase-0-CLM" / "model.safetensors")
    train(config.model_copy(update={"overwrite": True, "seed": 4}))  # a fresh start, other weights
    after = load_file(tmp_path / "run" / "checkpoints" / "phase-0-CLM" / "model.safetensors")
    assert not torch.equal(before["model.embed_tokens.weight"], after["model.embed_tokens.weight"])
    with pytest.raises(UserError, match="seed"):  # resuming with other settings is refused, not mixed
        train(config.model_copy(update={"resume": True, "seed": 5}))


def test_gradient_accumulation_gives_the_global_batch_step(tmp_path: Path) -> None:
    whole = train(tiny_config(tmp_path, tmp_path / "a", schedule="0.5_CLM+0.5_MLM", micro_batch_size=32))
    parts = train(tiny_config(tmp_path, tmp_path / "b", schedule="0.5_CLM+0.5_MLM", micro_batch_size=5))
    assert len(whole.losses) == len(parts.losses) >= 4
    assert np.allclose(whole.losses, parts.losses, rtol=1e-5, atol=1e-6)
    a = load_file(tmp_path / "a" / "checkpoints" / "phase-1-MLM" / "model.safetensors")
    b = load_file(tmp_path / "b" / "checkpoints" / "phase-1-MLM" / "model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="2_CLM", save_every_steps=2)

    def poison(info) -> None:  # after step 3, a weight becomes NaN: step 4's loss is NaN
        if info.step == 3:
            with torch.no_grad():
                next(iter(trainer_model["model"].parameters())).fill_(float("nan"))

    from antlm_bench.training.trainer import Trainer, TrainJob

    trainer = Trainer(TrainJob.of(config), callbacks=[poison])
    trainer_model = {"model": trainer.model}
    with pytest.raises(TrainingDiverged, match=r"loss nan at step 4 .*last good checkpoint .*step 2"):
        trainer.run()
    last = tmp_path / "run" / "last"
    assert read_record(last).step == 2
    weights = load_file(last / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in weights.values())
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "diverged"
    assert [m["step"] for m in read_metrics(tmp_path / "run")] == [1, 2, 3]
    assert TrainingDiverged.exit_code != 0 and issubclass(TrainingDiverged, UserError)


def test_eval_every_phase_appends_scores_with_the_phase_method(tmp_path: Path, real_data_dir: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM+0.25_MLM", eval_every="phase",
                         eval_tasks="blimp", eval_limit=1, data_dir=real_data_dir)
    train(config, scorer=score_checkpoint)
    scores = pq.read_table(tmp_path / "run" / "scores.parquet").to_pylist()
    by_checkpoint = {}
    for row in scores:
        by_checkpoint.setdefault(row["checkpoint"], set()).add(row["scoring"])
    assert by_checkpoint == {"checkpoints/phase-0-CLM": {"clm"}, "checkpoints/phase-1-MLM": {"pll"}}
    aggregate = [r for r in scores if r["subtask"] == "" and r["task"] == "blimp"]
    assert {r["phase_index"] for r in aggregate} == {0, 1}
    assert all(r["schedule"] == "0.25_CLM+0.25_MLM" and r["run_id"] == "run" for r in scores)
    index = [json.loads(line) for line in (tmp_path / "run" / "index.jsonl").read_text().splitlines()]
    assert [e["checkpoint"] for e in index] == ["checkpoints/phase-0-CLM", "checkpoints/phase-1-MLM"]


@pytest.mark.parametrize(("world", "micro", "rows"), [(1, 32, 32), (2, 5, 32), (3, 4, 30), (2, 8, 7), (4, 8, 3)])
def test_each_process_takes_its_share_in_micro_batches(world: int, micro: int, rows: int) -> None:
    from antlm_bench.training.step import StepRunner

    shares = []
    for rank in range(world):
        dist = type("D", (), {"world": world, "rank": rank})()
        runner = StepRunner(None, None, None, dist, torch.device("cpu"), None, None, global_batch=32,
                            micro_batch=micro)
        chunks = runner.micro_batches(rows)
        assert all(len(c) <= micro for c in chunks)
        assert len({len(runner.micro_batches(rows)) for _ in range(2)}) == 1
        assert len(chunks) == max(1, math.ceil(math.ceil(32 / world) / micro))  # the same count on every process
        assert all(len(a) <= len(b) for a, b in zip(chunks, chunks[1:]))  # empty ones first, the last one not
        shares.append(np.concatenate(chunks))
    together = np.concatenate(shares)
    assert sorted(together) == list(range(rows))  # every row once, on exactly one process


def test_eval_every_epoch_scores_epoch_ends_and_a_fractional_phase_end(tmp_path: Path, real_data_dir: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="1_CLM+0.5_MNTP", eval_every="epoch",
                         eval_tasks="blimp", eval_limit=1, data_dir=real_data_dir)
    train(config, scorer=score_checkpoint)
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert names == ["epoch-1", "phase-0-CLM", "phase-1-MNTP"]
    scores = pq.read_table(tmp_path / "run" / "scores.parquet").to_pylist()
    methods = {(r["checkpoint"], r["scoring"]) for r in scores}
    # epoch 1 ends with the CLM phase (scored once, as the epoch); the MNTP phase ends mid-epoch: scored too
    assert methods == {("checkpoints/epoch-1", "clm"), ("checkpoints/phase-1-MNTP", "mntp")}


SCORER = """
import sys
from antlm_bench.results.tables import CheckpointInfo, RunInfo, ScoreRow, score_table
from antlm_bench.runs.record import scoring_method
from antlm_bench.config import TrainConfig
from antlm_bench.training.trainer import train
seen = []
def scorer(request):
    method = scoring_method(request.record, False)[0]
    seen.append((request.folder.name, method, request.tasks, request.limit))
    return score_table(RunInfo(request.run_id), CheckpointInfo(request.name, request.record.phase_index),
                       [ScoreRow("blimp", "", "accuracy", 0.5, 2, method)])
train(TrainConfig.model_validate_json(sys.argv[1]), scorer=scorer)
assert not {"antlm_bench.evaluate", "antlm_bench.pipeline"} & set(sys.modules), "training imported evaluation"
print(seen)
"""


def test_eval_every_scores_with_the_scorer_passed_in_and_imports_no_evaluation(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM+0.25_MLM", eval_every="phase",
                         eval_tasks="blimp", eval_limit=1)
    done = subprocess.run([sys.executable, "-c", SCORER, config.model_dump_json()], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "[('phase-0-CLM', 'clm', 'blimp', 1), ('phase-1-MLM', 'pll', 'blimp', 1)]"
    rows = pq.read_table(tmp_path / "run" / "scores.parquet").to_pylist()
    assert {(r["checkpoint"], r["scoring"], r["value"]) for r in rows} == {
        ("checkpoints/phase-0-CLM", "clm", 0.5), ("checkpoints/phase-1-MLM", "pll", 0.5)}


def test_report_to_a_missing_package_is_a_user_error(tmp_path: Path) -> None:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        with pytest.raises(UserError, match="tensorboard"):
            train(tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM", report_to=["tensorboard"]))
    else:
        train(tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM", report_to=["tensorboard"]))
        assert any((tmp_path / "run" / "tensorboard").iterdir())


# -- bad input: one line, the right exit status, nothing written ------------------------------------------------


def _train_cli(config, *extra: str):
    from antlm_bench.cli import app

    return CliRunner().invoke(app, [*cli_args(config), *extra])


def _one_line(result, code: int, *fragments: str) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    # progress lines (corpus read, tokenizer reused) may come first; the error is one line
    lines = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def test_an_absurd_schedule_is_refused_before_any_step_is_planned(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="1000000000000_MLM")
    result = _train_cli(config)  # today: builds the MLM phase's restart list until MemoryError
    _one_line(result, 2, "1000000000000_MLM", f"{MAX_TOTAL_STEPS:,}")
    assert len(result.stderr.strip().splitlines()) == 1  # at once: before the corpus is read
    assert not (tmp_path / "run").exists()


def test_a_long_plan_lays_out_its_restarts_lazily() -> None:
    recipe = load_recipe("antlm-babyllama")  # MLM: cosine with a restart every 4 epochs
    epochs = MAX_TOTAL_STEPS // 1000
    (plan,) = plan_phases(parse_schedule(f"{epochs}_MLM"), recipe, steps_per_epoch=1000)
    assert plan.n_steps == MAX_TOTAL_STEPS and plan.lr.cycle_length == 4000
    assert plan.lr.factor(MAX_TOTAL_STEPS - 1) < plan.lr.factor(MAX_TOTAL_STEPS - 4000) == pytest.approx(1 / 40)
    with pytest.raises(UserError, match="the limit is"):
        plan_phases(parse_schedule(f"{epochs + 1}_MLM"), recipe, steps_per_epoch=1000)


def test_deeply_nested_groups_are_one_error_line_not_a_recursion_error(tmp_path: Path) -> None:
    schedule = "1x(" * 400 + "1_CLM" + ")" * 400
    result = _train_cli(tiny_config(tmp_path, tmp_path / "run", schedule=schedule))
    error = _one_line(result, 2, "at most 32 nested repeat groups", "character 99")  # the 33rd (
    assert len(error) < 300  # the schedule is shortened in the message; the caret line below shows it whole
    assert not (tmp_path / "run").exists()


def test_train_resolves_the_preset_once_and_its_parts_look_nothing_up(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown preset is one line (Recipe.resolve, the one place that refuses it), before the output folder
    exists; a known one is looked up once at the edge (TrainJob.of) and the trainer's parts (data, model,
    fingerprints, records, resume check) work from what was resolved: with every lookup failing afterwards, the
    trainer still builds."""
    import antlm_bench.training.trainer as trainer_module
    from antlm_bench.recipes import Recipe
    from antlm_bench.training.trainer import Trainer, TrainJob

    with pytest.raises(UserError, match=r"^recipe antlm-babyllama: unknown preset 'huge'; known: tiny, "):
        train(tiny_config(tmp_path, tmp_path / "huge", preset="huge"))
    assert not (tmp_path / "huge").exists()
    job = TrainJob.of(tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM", global_batch_size=8))

    def looked_up(*args: object, **kwargs: object) -> None:
        raise AssertionError("looked up again below the edge")

    monkeypatch.setattr(Recipe, "resolve", looked_up)
    monkeypatch.setattr(trainer_module, "load_recipe", looked_up)
    monkeypatch.setattr(trainer_module, "parse_schedule", looked_up)
    trainer = Trainer(job)
    assert trainer.facts.preset is job.preset and trainer.facts.identity is job.identity
    assert trainer.facts.global_batch == 8 and job.identity.folder_name == "antlm-babyllama-tiny-0.25_CLM-seed3"


@pytest.mark.parametrize("device", ["bogus", "cuda:x", "gpu"])
def test_an_unknown_device_is_one_line_and_no_folder(tmp_path: Path, device: str) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM")
    result = _train_cli(config, "--device", device)  # today: RuntimeError from torch.device
    _one_line(result, 2, f"--device {device}", "use auto, cpu, cuda")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("optimizer", "field"), [
    ("{lr: 1.0e39}", "optimizer.lr"),  # today: overflow inside AdamW, run.json left "running"
    ("{lr: .inf}", "optimizer.lr"),
    ("{lr: .nan}", "optimizer.lr"),
    ("{lr: 1.0e-3, betas: [1.5, 0.9]}", "optimizer.betas"),
    ("{lr: 1.0e-3, eps: -1}", "optimizer.eps"),
])
def test_a_recipe_with_an_impossible_optimizer_is_refused(tmp_path: Path, optimizer: str, field: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from antlm_bench import registry

    # --include-path adds to a process-wide list: this broken recipe must not reach the tests that come after
    monkeypatch.setattr(registry, "_include_paths", list(registry._include_paths))
    source = Path(__file__).resolve().parents[2] / "trainers" / "antlm-babyllama.yaml"
    text = source.read_text().replace("name: antlm-babyllama", "name: hot-llama")
    lines = [f"optimizer: {optimizer}" if line.startswith("optimizer:") else line for line in text.splitlines()]
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "hot.yaml").write_text("\n".join(lines) + "\n")
    config = tiny_config(tmp_path, tmp_path / "run", model="hot-llama", schedule="0.25_CLM")
    result = _train_cli(config, "--include-path", str(tmp_path / "recipes"))
    _one_line(result, 2, "hot.yaml", field)
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_run_that_fails_is_recorded_as_failed(tmp_path: Path) -> None:
    from antlm_bench.training.trainer import Trainer, TrainJob

    def fail(info) -> None:
        if info.step == 2:
            raise RuntimeError("value cannot be converted to type float without overflow")

    with pytest.raises(RuntimeError):
        Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "run", schedule="1_CLM")), callbacks=[fail]).run()
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["status"] == "failed"  # today: "running" for ever
    assert "overflow" in record["error"]


POISON = """
import sys, torch
from antlm_bench.training.trainer import Trainer
original = Trainer.__init__
def patched(self, *args, **kwargs):
    original(self, *args, **kwargs)
    def poison(info):
        if info.step == 3:
            with torch.no_grad():
                next(iter(self.model.parameters())).fill_(float("nan"))
    self.callbacks.append(poison)
Trainer.__init__ = patched
from antlm_bench.cli import main
sys.argv = ["antlm-bench", *sys.argv[1:]]
main()
"""


def test_a_diverged_run_exits_3_with_one_line_and_resumes_from_the_last_good_checkpoint(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="2_CLM", save_every_steps=2)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
    died = subprocess.run([sys.executable, "-c", POISON, *cli_args(config)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert died.returncode == 3, died.stderr[-2000:]
    errors = [line for line in died.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "Traceback" not in died.stderr
    assert "loss nan at step 4" in errors[0] and "step 2" in errors[0]
    assert read_record(tmp_path / "run" / "last").step == 2
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "diverged"
    resumed = _train_cli(config.model_copy(update={"resume": True}))
    assert resumed.exit_code == 0, resumed.output
    assert [m["step"] for m in read_metrics(tmp_path / "run")] == list(range(1, 9))


def test_a_full_disk_while_saving_is_one_line_and_keeps_the_resume_point(tmp_path: Path, monkeypatch) -> None:
    """safetensors reports ENOSPC as its own SafetensorError (not an OSError): still one line, exit 4, and the
    resume point written before stays whole, so --resume goes on from it."""
    from safetensors import SafetensorError

    import antlm_bench.training.checkpoint as checkpoint

    config = tiny_config(tmp_path, tmp_path / "run", schedule="2_CLM", save_every_steps=2)
    real = checkpoint._write_folder
    calls = {"n": 0}

    def full_disk(folder, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # the second save: the step-2 resume point is on disk by then
            raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "
                                  "\"No space left on device\" })")
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "_write_folder", full_disk)
    result = _train_cli(config)
    line = _one_line(result, 4, "the checkpoint could not be written", "No space left on device", "--resume")
    assert "step-000000004" in line
    assert read_record(tmp_path / "run" / "last").step == 2
    assert not list((tmp_path / "run" / ".resume").glob(".*tmp-*"))  # no half-written staging folder left
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "failed"
    monkeypatch.setattr(checkpoint, "_write_folder", real)
    resumed = _train_cli(config.model_copy(update={"resume": True}))
    assert resumed.exit_code == 0, resumed.output
    assert [m["step"] for m in read_metrics(tmp_path / "run")] == list(range(1, 9))


def test_a_damaged_metrics_file_is_repaired_on_resume(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="1_CLM", max_steps=2)
    train(config)
    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.write_bytes(metrics.read_bytes() + b"\xff\xfe{not json\n[1, 2]\n{\"step\": \"x\"}\n")
    train(config.model_copy(update={"resume": True, "max_steps": None}))
    steps = [m["step"] for m in read_metrics(tmp_path / "run")]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) > 2


def test_off_a_terminal_training_prints_plain_progress_lines(tmp_path: Path, monkeypatch) -> None:
    """A piped run (CI log) gets whole progress lines, not a live bar that shows nothing until the end."""
    import io

    from rich.console import Console

    import antlm_bench.progress

    monkeypatch.setattr(antlm_bench.progress, "PLAIN_EVERY_S", 0.0)  # every step, for the test
    out = io.StringIO()
    train(tiny_config(tmp_path, tmp_path / "run", schedule="1_CLM", progress=True),
          console=Console(file=out, force_terminal=False, width=200))
    lines = [line for line in out.getvalue().splitlines() if line.startswith("step ")]
    total = len(read_metrics(tmp_path / "run"))
    assert len(lines) == total and lines[-1].startswith(f"step {total}/{total} (phase 0/0 CLM)")
    assert "tok/s" in lines[0] and "left" in lines[0] and "\x1b[" not in out.getvalue()


def test_train_records_its_thread_choice_in_run_json(tmp_path: Path, monkeypatch) -> None:
    """train chooses threads as eval does (one below 10M parameters) and run.json says so, with the reason."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        result = _train_cli(tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM"))
        assert result.exit_code == 0, result.output
        config = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
        assert config["torch_threads"] == 1 and config["torch_threads_reason"].startswith("model size")
        assert "torch threads 1" in result.stderr
    finally:
        torch.set_num_threads(before)


def test_two_schedules_that_start_alike_are_two_networks(tmp_path: Path) -> None:
    """0.25_CLM and 0.5_CLM under one seed share their initial weights and first batch, but not their training:
    their fingerprints differ, so nothing takes them for the same network (check's items-only design)."""
    from antlm_bench.training.trainer import Trainer, TrainJob

    short = Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "a", schedule="0.25_CLM"))).facts
    long = Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "b", schedule="0.5_CLM"))).facts
    again = Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "c", schedule="0.25_CLM"))).facts
    assert short.training_fingerprint != long.training_fingerprint
    assert short.config_fingerprint != long.config_fingerprint
    assert (short.training_fingerprint, short.config_fingerprint) == (again.training_fingerprint,
                                                                        again.config_fingerprint)
    reseeded = Trainer(TrainJob.of(tiny_config(tmp_path, tmp_path / "d", schedule="0.25_CLM", seed=4))).facts
    assert reseeded.training_fingerprint != short.training_fingerprint
    assert reseeded.config_fingerprint == short.config_fingerprint
