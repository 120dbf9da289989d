"""Per-sample MIX (every batch split by the weights), the per-batch draw under its own name, and phase boundaries
from cumulative epochs (fractional phases add up exactly)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from trainer_support import tiny_config

from antlm_bench.recipes import Masking, load_recipe
from antlm_bench.runs.schedule import parse_schedule, phase_end_steps
from antlm_bench.training.objectives import BatchBuilder, MixedBatch, mix_rows
from antlm_bench.training.plan import plan_phases
from antlm_bench.training.reporting import read_metrics
from antlm_bench.training.trainer import train


@pytest.mark.parametrize("n_rows", [32, 30, 7, 1])
def test_mix_rows_split_every_batch_by_the_weights(n_rows: int) -> None:
    weights = {"CLM": 1.0, "MLM": 15.0}
    shares = []
    for step in range(400):
        parts = mix_rows(weights, n_rows, seed=3, step=step)
        rows = np.concatenate(list(parts.values()))
        assert sorted(rows) == list(range(n_rows))  # a partition of the batch
        expected = n_rows / 16
        assert np.floor(expected) <= len(parts["CLM"]) <= np.ceil(expected)  # every batch, not on average
        shares.append(len(parts["CLM"]))
        again = mix_rows(weights, n_rows, seed=3, step=step)  # a pure function of (seed, step): resume repeats it
        assert all(np.array_equal(parts[k], again[k]) for k in parts)
    # the expected share is exact; over 400 steps the noise of a 1-row batch is about 0.012
    assert abs(np.mean(shares) / n_rows - 1 / 16) < (0.01 if n_rows >= 7 else 0.04)
    if n_rows == 32:
        assert set(shares) == {2}  # 32 rows at 1:15: exactly 2 CLM rows in every step
    assert any(not np.array_equal(mix_rows(weights, n_rows, 4, 0)[k], mix_rows(weights, n_rows, 3, 0)[k])
               for k in weights) or n_rows == 1


def test_mix_batch_builds_each_part_as_its_own_objective() -> None:
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 300, size=(32, 16))
    builder = BatchBuilder(Masking(), 3, 300, (0, 1, 2, 3, 4), seed=1)
    batch = builder.build_mix({"CLM": 1.0, "MLM": 2.0, "MNTP": 1.0}, ids, None, step=5)
    assert isinstance(batch, MixedBatch) and len(batch) == 32
    kinds = {part.objective: part for part in batch.parts}
    assert set(kinds) == {"CLM", "MLM", "MNTP"}
    assert [len(kinds[k]) for k in ("CLM", "MLM", "MNTP")] == [8, 16, 8]
    assert kinds["CLM"].attention_mode == "causal" and kinds["MLM"].shift == 0 and kinds["MNTP"].shift == 1
    assert batch.n_targets == sum(p.n_targets for p in batch.parts)


def test_batchmix_is_the_per_batch_draw_under_its_own_name() -> None:
    phase = parse_schedule("2_batchmix( clm:1 , MLM:15)").phases[0]
    assert phase.objective == "BATCHMIX" and phase.label == "BATCHMIX(CLM:1,MLM:15)"
    assert phase.attention_mode == "per batch" and phase.dominant_objective == "MLM"
    assert parse_schedule("2_MIX(CLM:1,MLM:15)").phases[0].attention_mode == "per row"
    assert parse_schedule("1_CLM+0.5_BATCHMIX(MLM:1,MNTP:2)").canonical == "1_CLM+0.5_BATCHMIX(MLM:1,MNTP:2)"


@pytest.mark.parametrize("steps_per_epoch", [4, 7, 10, 13, 64])
def test_fractional_phases_add_up_exactly(steps_per_epoch: int) -> None:
    # exact whenever every phase spans at least one step (0.25 epoch >= 1 step): a shorter phase still takes one
    def total(text: str) -> int:
        return phase_end_steps(parse_schedule(text).phases, steps_per_epoch)[-1]

    assert total("0.5_CLM+0.5_MLM") == total("1_CLM") == steps_per_epoch
    assert total("3x(0.25_CLM+0.25_MLM)") == total("1.5_CLM")
    assert total("10x(0.1_MLM)") == total("1_MLM") or steps_per_epoch < 10
    assert total("4_CLM+16_MLM+4_CLM") == 24 * steps_per_epoch
    ends = phase_end_steps(parse_schedule("0.01_CLM+0.01_MLM+1_CLM").phases, steps_per_epoch)
    assert ends[0] >= 1 and ends[1] > ends[0]  # a phase too short for one step still gets one


def test_the_plan_starts_each_phase_where_the_last_ended() -> None:
    recipe = load_recipe("antlm-babyllama")
    plans = plan_phases(parse_schedule("3x(0.25_CLM+0.25_MLM)"), recipe, steps_per_epoch=13)
    assert plans[-1].end_step == round(1.5 * 13)  # 19.5 -> 20 (half up)
    assert all(a.end_step == b.start_step for a, b in zip(plans, plans[1:]))
    # the old per-phase rounding took 6 x round(3.25) = 18 steps here


def test_a_mix_run_trains_both_objectives_every_step_and_accumulates_exactly(tmp_path: Path) -> None:
    whole = train(tiny_config(tmp_path, tmp_path / "a", schedule="0.5_MIX(CLM:1,MLM:3)", micro_batch_size=32))
    parts = train(tiny_config(tmp_path, tmp_path / "b", schedule="0.5_MIX(CLM:1,MLM:3)", micro_batch_size=5))
    assert len(whole.losses) == len(parts.losses) >= 2
    assert np.allclose(whole.losses, parts.losses, rtol=1e-5, atol=1e-6)
    assert {m["objective"] for m in read_metrics(tmp_path / "a")} == {"MIX"}
    # a MIX line says how its loss weighs the objectives (the recipe's mix_loss, GPT-BERT's row_share by default)
    assert {m["mix_loss"] for m in read_metrics(tmp_path / "a")} == {"row_share"}
    drawn = train(tiny_config(tmp_path, tmp_path / "c", schedule="1_BATCHMIX(CLM:1,MLM:1)"))
    objectives = [m["objective"] for m in read_metrics(tmp_path / "c")]
    assert len(objectives) == drawn.steps and set(objectives) <= {"CLM", "MLM"}
    assert not any("mix_loss" in m for m in read_metrics(tmp_path / "c"))  # one objective a step: its mean
