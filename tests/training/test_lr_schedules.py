"""Learning-rate curves per schedule kind, and the LambdaLR wrapper that resumes mid-phase."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import get_cosine_schedule_with_warmup

from antlm_bench.recipes import LRSchedule, load_recipe
from antlm_bench.training.lr_schedules import build_phase_lr, cycle_boundaries, lr_factor, phase_scheduler


def _curve(spec: LRSchedule, n_steps: int, steps_per_epoch: float) -> list[float]:
    phase = build_phase_lr(spec, n_steps, steps_per_epoch)
    return [lr_factor(step, phase) for step in range(n_steps)]


def _restarts(curve: list[float]) -> list[int]:
    """Steps where the lr jumps back up after decaying (a local minimum just before)."""
    return [i for i in range(2, len(curve)) if curve[i] > curve[i - 1] < curve[i - 2]]


def test_cosine_matches_transformers_after_warmup() -> None:
    spec = LRSchedule(kind="cosine", warmup_ratio=0.1)
    n = 200
    curve = _curve(spec, n, 10)
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    peer = get_cosine_schedule_with_warmup(opt, num_warmup_steps=20, num_training_steps=n)
    reference = []
    for _ in range(n):
        reference.append(opt.param_groups[0]["lr"])
        opt.step()
        peer.step()
    assert curve[20:] == pytest.approx(reference[20:], abs=1e-12)
    # our warm-up moves already on the first step and peaks on the warm-up's last step
    assert curve[0] == pytest.approx(1 / 20) and curve[19] == pytest.approx(1.0)
    assert all(a < b for a, b in zip(curve[:19], curve[1:20]))
    assert all(a >= b for a, b in zip(curve[20:], curve[21:]))
    assert curve[-1] < 1e-3 and curve[-1] > 0


def test_restarts_every_four_epochs() -> None:
    spec = LRSchedule(kind="cosine_with_restarts", cycle_epochs=4, warmup_ratio=0.0)
    curve = _curve(spec, 16 * 10, steps_per_epoch=10)  # a 16-epoch MLM phase, 10 steps per epoch
    assert cycle_boundaries(spec, 160, 10) == (0, 40, 80, 120, 160)
    assert _restarts(curve) == [40, 80, 120]
    for k in range(4):  # every cycle has the same shape
        assert curve[40 * k : 40 * (k + 1)] == pytest.approx(curve[:40])
    assert curve[0] == 1.0 and curve[39] < 0.01


def test_restarts_every_four_epochs_with_a_shorter_last_cycle() -> None:
    spec = LRSchedule(kind="cosine_with_restarts", cycle_epochs=4, warmup_ratio=0.0)
    assert cycle_boundaries(spec, 100, 10) == (0, 40, 80, 100)
    curve = _curve(spec, 100, 10)
    assert curve[99] < 0.05  # the remainder is its own short cycle that still decays, not a truncated one


def test_four_cycles_over_the_phase() -> None:
    spec = LRSchedule(kind="cosine_with_restarts", cycles=4, warmup_ratio=0.016)
    n = 1000
    curve = _curve(spec, n, 17)
    assert cycle_boundaries(spec, n, 17) == (0, 250, 500, 750, 1000)
    warmup = math.ceil(0.016 * 250)
    assert _restarts(curve) == [250, 500, 750]
    for start in (0, 250, 500, 750):
        assert curve[start + warmup - 1] == pytest.approx(1.0)
        assert curve[start] == pytest.approx(1 / warmup)
    assert cycle_boundaries(spec, 3, 1) == (0, 1, 2, 3)  # never more cycles than steps


def test_linear_constant_and_floor() -> None:
    linear = _curve(LRSchedule(kind="linear", warmup_ratio=0.0, min_lr_ratio=0.1), 10, 1)
    assert linear[0] == 1.0 and linear == sorted(linear, reverse=True) and min(linear) > 0.1
    constant = _curve(LRSchedule(kind="constant", warmup_ratio=0.2), 10, 1)
    assert constant == [0.5, 1.0] + [1.0] * 8
    cosine = _curve(LRSchedule(kind="cosine", warmup_ratio=0.0, min_lr_ratio=0.2), 50, 1)
    assert min(cosine) >= 0.2 and cosine[-1] == pytest.approx(0.2, abs=0.01)


def test_lambda_lr_resumes_at_any_step() -> None:
    spec = LRSchedule(kind="cosine_with_restarts", cycle_epochs=1, warmup_ratio=0.1)
    phase = build_phase_lr(spec, 30, 10)
    params = [torch.nn.Parameter(torch.zeros(1))]
    opt = torch.optim.AdamW(params, lr=2e-3)
    full = phase_scheduler(opt, phase)
    lrs = []
    for _ in range(30):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        full.step()
    assert lrs == pytest.approx([2e-3 * lr_factor(s, phase) for s in range(30)])
    # a fresh optimizer (as after a restart) and a scheduler that starts at step 17
    opt2 = torch.optim.AdamW(params, lr=2e-3)
    opt2.load_state_dict(opt.state_dict())
    resumed = phase_scheduler(opt2, phase, start_step=17)
    got = []
    for _ in range(13):
        got.append(opt2.param_groups[0]["lr"])
        opt2.step()
        resumed.step()
    assert got == pytest.approx(lrs[17:], rel=0, abs=0)


def test_recipes_follow_the_paper() -> None:
    baby = load_recipe("antlm-babyllama")
    assert baby.lr_schedule("CLM").kind == "cosine"
    assert baby.lr_schedule("MLM").kind == "cosine_with_restarts" and baby.lr_schedule("MLM").cycle_epochs == 4
    ltg = load_recipe("antlm-ltgbert")
    for objective in ("CLM", "MLM", "MNTP"):
        assert ltg.lr_schedule(objective).kind == "cosine_with_restarts" and ltg.lr_schedule(objective).cycles == 4
    assert baby.lr_schedule("MLM").describe() == "cosine with restarts, every 4 epochs, warm-up 1%"
