"""The fused output projection + cross-entropy against PyTorch's, over several blocks of rows."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from antlm_bench.models import loss as loss_module
from antlm_bench.models.loss import IGNORE, block_rows, linear_cross_entropy_sum

VOCAB, DIM, ROWS = 40, 12, 53  # 53 rows at 16 per block: three full blocks and a partial one


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setitem(loss_module._BLOCK_BYTES, "cpu", 16 * 4 * VOCAB)
    assert block_rows(VOCAB, torch.device("cpu")) == 16


def _problem(bias: bool, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(ROWS, DIM, generator=generator, requires_grad=True)
    decoder = torch.nn.Linear(DIM, VOCAB, bias=bias)
    with torch.no_grad():
        decoder.weight.copy_(torch.randn(VOCAB, DIM, generator=generator))
        if bias:
            decoder.bias.copy_(torch.randn(VOCAB, generator=generator))
    targets = torch.randint(0, VOCAB, (ROWS,), generator=generator)
    targets[::5] = IGNORE
    return features, decoder, targets


def _parameters(features, decoder):
    return [features, *decoder.parameters()]


@pytest.mark.parametrize("bias", [True, False])
def test_loss_and_gradients_equal_pytorch_cross_entropy(bias):
    features, decoder, targets = _problem(bias)
    ours = linear_cross_entropy_sum(features, decoder, targets)
    ours_grads = torch.autograd.grad(ours * 2.5, _parameters(features, decoder))
    expected = F.cross_entropy(decoder(features), targets, reduction="sum")
    expected_grads = torch.autograd.grad(expected * 2.5, _parameters(features, decoder))
    torch.testing.assert_close(ours, expected)
    for mine, theirs in zip(ours_grads, expected_grads, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)


def test_no_logits_sized_tensor_outlives_the_forward_pass():
    features, decoder, targets = _problem(bias=True)
    ours = linear_cross_entropy_sum(features, decoder, targets)
    saved = [t for t in ours.grad_fn.saved_tensors if t is not None]
    assert saved and max(t.numel() for t in saved) < ROWS * VOCAB


def test_backward_twice_and_frozen_or_gradient_free_inputs():
    features, decoder, targets = _problem(bias=True)
    ours = linear_cross_entropy_sum(features, decoder, targets)
    first = torch.autograd.grad(ours, features, retain_graph=True)[0]
    second = torch.autograd.grad(ours, features)[0]
    torch.testing.assert_close(first, second)

    decoder.weight.requires_grad_(False)
    frozen = linear_cross_entropy_sum(features, decoder, targets)
    assert frozen.grad_fn.saved_tensors[1] is None  # no weight gradient computed for a frozen weight
    frozen.backward()
    assert decoder.weight.grad is None and features.grad is not None

    with torch.no_grad():
        evaluated = linear_cross_entropy_sum(features, decoder, targets)
    torch.testing.assert_close(evaluated, F.cross_entropy(decoder(features), targets, reduction="sum"))


def test_all_rows_ignored_gives_zero_loss_and_zero_gradients():
    features, decoder, targets = _problem(bias=True)
    ours = linear_cross_entropy_sum(features, decoder, torch.full_like(targets, IGNORE))
    ours.backward()
    assert ours.item() == 0.0
    assert not features.grad.any() and not decoder.weight.grad.any() and not decoder.bias.grad.any()


def test_autocast_runs_the_matmuls_in_its_dtype_and_the_softmax_in_float32():
    features, decoder, targets = _problem(bias=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = linear_cross_entropy_sum(features, decoder, targets)
        expected = F.cross_entropy(decoder(features).float(), targets, reduction="sum")
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, expected, rtol=1e-3, atol=1e-2)
    grad_weight, = torch.autograd.grad(ours, decoder.weight)
    reference, = torch.autograd.grad(expected, decoder.weight)
    assert grad_weight.dtype == decoder.weight.dtype
    torch.testing.assert_close(grad_weight, reference, rtol=2e-2, atol=5e-2)
