"""Recipe gpt-bert: LTG-BERT under a per-sample mixture of causal LM and MNTP at 1:15 (Charpentier & Samuel 2024)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from trainer_support import tiny_config

from antlm_bench.data.corpus import prepare_training_data
from antlm_bench.models import build_model
from antlm_bench.recipes import load_recipe
from antlm_bench.runs.schedule import parse_schedule
from antlm_bench.training.objectives import BatchBuilder, LossModule, MixedBatch, sequence_loss_sum
from antlm_bench.training.step import Dist, StepRunner, make_optimizer
from antlm_bench.training.trainer import train


def test_gpt_bert_recipe_is_ltgbert_under_per_sample_mix():
    recipe = load_recipe("gpt-bert")
    assert recipe.architecture == "ltgbert"
    (phase,) = parse_schedule(recipe.default_schedule).phases
    assert phase.objective == "MIX" and phase.weights == {"CLM": 1.0, "MNTP": 15.0} and phase.epochs == 72
    assert recipe.masking.rate == 0.15


def test_gpt_bert_trains_at_tiny_under_a_mixed_schedule(tmp_path):
    config = tiny_config(tmp_path, tmp_path / "run", model="gpt-bert", schedule="0.2_CLM+0.2_MIX(CLM:1,MNTP:15)+0.1_CLM")
    result = train(config)
    assert result.steps > 0 and all(torch.isfinite(torch.tensor(result.losses)))
    folder = result.final_checkpoint
    assert json.loads((folder / "config.json").read_text())["auto_map"]["AutoModelForCausalLM"]
    assert (folder / "modeling_ltgbert.py").is_file()


@pytest.fixture(scope="module")
def real_mix_batch(real_data_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The gpt-bert recipe at tiny, its model (eval mode: no dropout, so a gradient is a fixed function of the
    weights) and one real global batch of MIX(CLM:1,MNTP:15) from the BabyLM pretraining sample."""
    recipe = load_recipe("gpt-bert")
    # no clipping: the step's gradient is then exactly the loss's, and the shares read off it are the weights
    recipe = recipe.model_copy(update={"optimizer": recipe.optimizer.model_copy(update={"grad_clip": None})})
    tokenizer, corpus = prepare_training_data(real_data_dir / "pretrain_sample", recipe.resolve("tiny"),
                                              tmp_path_factory.mktemp("cache"), progress=False)
    torch.manual_seed(0)
    model = build_model(recipe.resolve("tiny"), tokenizer).eval()
    builder = BatchBuilder(recipe.masking, tokenizer.mask_token_id, len(tokenizer), tokenizer.all_special_ids, seed=3)
    rows = np.sort(np.random.default_rng(0).permutation(len(corpus.input_ids))[:recipe.presets["tiny"].global_batch_size])
    batch = builder.build_mix({"CLM": 1.0, "MNTP": 15.0}, corpus.input_ids[rows], corpus.word_starts[rows], step=0)
    return recipe, model, batch


def _flat_gradient(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.flatten().double() for p in model.parameters() if p.grad is not None])


def gradient_shares(recipe: Any, model: torch.nn.Module, batch: MixedBatch, mix_loss: str,
                    micro_batch: int) -> tuple[dict[str, float], torch.Tensor, float, dict[str, float]]:
    """Each objective's share of the gradient that ``StepRunner.gradients`` accumulates: that gradient regressed
    (least squares) on the gradients of each objective's own mean token loss, computed here apart; share = its
    coefficient / the sum of the coefficients. Also the step's gradient, the loss it reports and each objective's
    mean token loss."""
    device = torch.device("cpu")
    runner = StepRunner(model, LossModule(model), make_optimizer(model, recipe, device), Dist("cpu"), device,
                        contextlib.nullcontext(), recipe.model_copy(update={"mix_loss": mix_loss}),
                        len(batch), micro_batch)
    model.zero_grad(set_to_none=True)
    step_loss = runner.gradients(batch).loss
    step_gradient = _flat_gradient(model)
    own, means = [], {}
    for part in batch.parts:
        model.zero_grad(set_to_none=True)
        loss = sequence_loss_sum(model, torch.from_numpy(part.input_ids), torch.from_numpy(part.labels), part.shift,
                                 part.attention_mode) / part.n_targets
        loss.backward()
        means[part.objective] = float(loss.detach())
        own.append(_flat_gradient(model))
    model.zero_grad(set_to_none=True)
    basis = torch.stack(own, dim=1)
    coefficients = torch.linalg.lstsq(basis, step_gradient[:, None]).solution.squeeze(1)
    residual = torch.linalg.vector_norm(step_gradient - basis @ coefficients) / torch.linalg.vector_norm(step_gradient)
    assert residual < 1e-4, f"the step's gradient is not a mix of the objectives' own gradients ({residual:.2e})"
    total = float(coefficients.sum())
    shares = {part.objective: float(c) / total for part, c in zip(batch.parts, coefficients)}
    return shares, step_gradient, step_loss, means


def test_mix_loss_row_share_gives_each_objective_its_share_of_rows(real_mix_batch) -> None:
    """GPT-BERT's default weighting (no --token_weighted_loss): under MIX(CLM:1,MNTP:15) the 2 CLM rows of 32 carry
    6.25% of the gradient, not the ~30% a mean over every labelled token gives them (a CLM row labels every
    position, an MNTP row ~15%). Measured on the gradient the training step accumulates, in micro-batches."""
    recipe, model, batch = real_mix_batch
    assert recipe.mix_loss == "row_share"  # the recipe's default
    clm, mntp = batch.parts
    assert (clm.objective, len(clm), mntp.objective, len(mntp)) == ("CLM", 2, "MNTP", 30)
    shares, whole, loss, means = gradient_shares(recipe, model, batch, "row_share", micro_batch=32)
    token_shares, _, token_loss, _ = gradient_shares(recipe, model, batch, "token", micro_batch=32)
    token_predicted = clm.n_targets / batch.n_targets
    print(f"\nMIX(CLM:1,MNTP:15), one real batch of 32 rows ({clm.n_targets} CLM and {mntp.n_targets} MNTP labelled "
          f"tokens): CLM share of the gradient {100 * shares['CLM']:.2f}% under row_share, "
          f"{100 * token_shares['CLM']:.2f}% under token")
    assert abs(100 * shares["CLM"] - 6.25) < 0.5
    assert abs(100 * token_shares["CLM"] - 100 * token_predicted) < 0.5 and token_shares["CLM"] > 0.2
    # the loss the step reports (metrics.jsonl) is the one it differentiates
    assert loss == pytest.approx(2 / 32 * means["CLM"] + 30 / 32 * means["MNTP"], rel=1e-5)
    assert token_loss == pytest.approx(token_predicted * means["CLM"] + (1 - token_predicted) * means["MNTP"],
                                       rel=1e-5)
    # the micro-batch size does not move the gradient (each part's counts are the global batch's)
    _, split, _, _ = gradient_shares(recipe, model, batch, "row_share", micro_batch=5)
    torch.testing.assert_close(split, whole, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("world", [2, 3])
def test_mix_loss_row_share_sums_to_the_same_gradient_over_processes(real_mix_batch, world: int) -> None:
    """Each process scales its rows' losses by counts over the GLOBAL batch: the processes' gradients, averaged as
    DDP averages them, and their losses, summed as the all-reduce sums them, are the one-process step's. (The
    processes run here one after the other, each told its rank; the real torchrun path: test_trainer_ddp.)"""
    recipe, model, batch = real_mix_batch
    device = torch.device("cpu")
    _, whole, whole_loss, _ = gradient_shares(recipe, model, batch, "row_share", micro_batch=32)
    gradients, losses = [], []
    for rank in range(world):
        dist = Dist("cpu")
        dist.rank, dist.world = rank, world  # not enabled: no all-reduce, no no_sync; the sums are taken here
        runner = StepRunner(model, LossModule(model), make_optimizer(model, recipe, device), dist, device,
                            contextlib.nullcontext(), recipe, len(batch), micro_batch=4)
        model.zero_grad(set_to_none=True)
        losses.append(runner.gradients(batch).loss)
        gradients.append(_flat_gradient(model))
    model.zero_grad(set_to_none=True)
    torch.testing.assert_close(torch.stack(gradients).mean(0), whole, rtol=1e-4, atol=1e-7)
    assert sum(losses) == pytest.approx(whole_loss, rel=1e-5)
