"""The phase trainer in one process: plan, checkpoints, folder rules, accumulation, the NaN guard, --eval-every."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file
from trainer_support import tiny_config

from antlm_bench.checkpoint_state import auto_scoring_method, read_state
from antlm_bench.errors import UserError
from antlm_bench.recipes import load_recipe
from antlm_bench.schedule import parse_schedule
from antlm_bench.trainer import TrainingDiverged, epoch_order, plan_phases, read_metrics, train


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

    state = read_state(run / "checkpoints" / "phase-1-MIX")
    for key in ("schedule", "phases", "phase_index", "phase_objective", "epoch", "step", "tokens_seen", "recipe",
                "preset", "architecture", "seed", "data_hash", "tokenizer_hash", "package_version"):
        assert key in state, key
    assert state["phase_index"] == 1 and state["phase_objective"] == "MIX(CLM:1,MLM:3)"
    assert state["step"] == spe + max(1, round(0.5 * spe))
    assert auto_scoring_method(state, False)[0] == "pll"  # MIX: the heaviest weight, MLM
    assert auto_scoring_method(read_state(run / "checkpoints" / "phase-2-MNTP"), False)[0] == "mntp"
    assert auto_scoring_method(read_state(run / "checkpoints" / "phase-0-CLM"), False)[0] == "clm"

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
    assert (run / "last").is_symlink() and read_state(run / "last")["step"] == result.steps


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

    from antlm_bench.trainer import Trainer

    trainer = Trainer(config, callbacks=[poison])
    trainer_model = {"model": trainer.model}
    with pytest.raises(TrainingDiverged, match=r"loss nan at step 4 .*last good checkpoint .*step 2"):
        trainer.run()
    last = tmp_path / "run" / "last"
    assert read_state(last)["step"] == 2
    weights = load_file(last / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in weights.values())
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "diverged"
    assert [m["step"] for m in read_metrics(tmp_path / "run")] == [1, 2, 3]
    assert TrainingDiverged.exit_code != 0 and issubclass(TrainingDiverged, UserError)


def test_eval_every_phase_appends_scores_with_the_phase_method(tmp_path: Path, real_data_dir: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM+0.25_MLM", eval_every="phase",
                         eval_tasks="blimp", eval_limit=1, data_dir=real_data_dir)
    train(config)
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
    from antlm_bench.trainer import Trainer

    shares = []
    for rank in range(world):
        trainer = object.__new__(Trainer)
        trainer.dist = type("D", (), {"world": world, "rank": rank})()
        trainer.global_batch, trainer.micro_batch = 32, micro
        chunks = trainer._micro_batches(rows)
        assert all(len(c) <= micro for c in chunks)
        assert len({len(trainer._micro_batches(rows)) for _ in range(2)}) == 1
        assert len(chunks) == max(1, math.ceil(math.ceil(32 / world) / micro))  # the same count on every process
        assert all(len(a) <= len(b) for a, b in zip(chunks, chunks[1:]))  # empty ones first, the last one not
        shares.append(np.concatenate(chunks))
    together = np.concatenate(shares)
    assert sorted(together) == list(range(rows))  # every row once, on exactly one process


def test_eval_every_epoch_scores_epoch_ends_and_a_fractional_phase_end(tmp_path: Path, real_data_dir: Path) -> None:
    config = tiny_config(tmp_path, tmp_path / "run", schedule="1_CLM+0.5_MNTP", eval_every="epoch",
                         eval_tasks="blimp", eval_limit=1, data_dir=real_data_dir)
    train(config)
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert names == ["epoch-1", "phase-0-CLM", "phase-1-MNTP"]
    scores = pq.read_table(tmp_path / "run" / "scores.parquet").to_pylist()
    methods = {(r["checkpoint"], r["scoring"]) for r in scores}
    # epoch 1 ends with the CLM phase (scored once, as the epoch); the MNTP phase ends mid-epoch: scored too
    assert methods == {("checkpoints/epoch-1", "clm"), ("checkpoints/phase-1-MNTP", "mntp")}


def test_report_to_a_missing_package_is_a_user_error(tmp_path: Path) -> None:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        with pytest.raises(UserError, match="tensorboard"):
            train(tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM", report_to=["tensorboard"]))
    else:
        train(tiny_config(tmp_path, tmp_path / "run", schedule="0.25_CLM", report_to=["tensorboard"]))
        assert any((tmp_path / "run" / "tensorboard").iterdir())
