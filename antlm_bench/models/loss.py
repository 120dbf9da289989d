"""Losses both backends share: the LM loss at the labelled positions (-100 = ignored), the classification loss.

The LM loss of a training step never builds the [N, V] logits whole: ``LinearCrossEntropySum`` runs the output
projection and the cross-entropy over blocks of rows and computes the gradients there and then, while each block
is still in cache. The whole logits are only built when a caller asks for them (``forward(return_logits=True)``);
the loss then reads them through ``CrossEntropySum``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

IGNORE = -100
# bytes of float32 logits per block of rows: small enough, on CPU, to stay in cache and to come from malloc's heap
# rather than fresh pages (glibc maps anything above 32 MiB anew on every call: page faults, ~5% of a small
# model's step); on CUDA large enough to keep the matmuls big
_BLOCK_BYTES = {"cpu": 8 << 20, "cuda": 512 << 20}


def block_rows(vocab_size: int, device: torch.device) -> int:
    """Rows of logits per block of :class:`LinearCrossEntropySum` on ``device``."""
    return max(16, _BLOCK_BYTES.get(device.type, 512 << 20) // (4 * vocab_size))


def _softmax_minus_onehot_(logits: torch.Tensor, targets: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """Per-row loss (log-sum-exp - logit of the target; 0 where not ``kept``); turns ``logits`` [n, V] float32, in
    place, into d loss / d logits = softmax - one-hot (0 in rows not kept)."""
    rows = torch.arange(len(targets), device=targets.device)
    picked = logits[rows, targets]
    top = logits.amax(dim=-1, keepdim=True)
    probs = logits.sub_(top).exp_()  # one exp: both the normaliser and the gradient come from it
    total = probs.sum(dim=-1, keepdim=True)
    losses = torch.where(kept, total.squeeze(1).log() + top.squeeze(1) - picked, 0.0)
    probs.mul_(kept[:, None] / total)
    probs[rows, targets] -= kept.to(probs.dtype)
    return losses


class LinearCrossEntropySum(torch.autograd.Function):
    """Summed cross-entropy of ``features @ weight.T + bias`` [N, V] at ``targets`` [N] (-100: ignored).

    The same numbers as ``F.cross_entropy(F.linear(features, weight, bias), targets, reduction="sum")``, but the
    logits exist only a block of rows at a time, and the gradients (features, weight, bias) are finished in the
    forward pass, because the loss is the end of the graph: backward only scales them by the incoming gradient.
    Memory: no [N, V] tensor survives the forward pass (at the paper preset on a GPU, 0.5 GB per micro-batch).
    Under CUDA autocast the matmuls run in the autocast dtype, the softmax in float32.
    """

    @staticmethod
    def forward(ctx, features: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                targets: torch.Tensor, needs: tuple[bool, bool, bool]) -> torch.Tensor:
        device = features.device
        dtype = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else features.dtype
        with torch.autocast(device.type, enabled=False):
            w = weight.to(dtype)
            b = None if bias is None else bias.to(dtype)
            grad_features = torch.empty_like(features) if needs[0] else None
            grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=device) if needs[1] else None
            grad_bias = torch.zeros(weight.shape[0], dtype=torch.float32, device=device) if needs[2] else None
            loss = torch.zeros((), dtype=torch.float32, device=device)
            step = block_rows(weight.shape[0], device)
            for start in range(0, features.shape[0], step):
                x = features[start : start + step].to(dtype)
                y = targets[start : start + step]
                kept = y != IGNORE
                logits = F.linear(x, w, b).float()
                loss += _softmax_minus_onehot_(logits, y.clamp(min=0), kept).sum()
                gradient = logits.to(dtype)
                if grad_features is not None:
                    grad_features[start : start + step] = gradient @ w
                if grad_weight is not None:
                    if dtype == torch.float32:
                        grad_weight.addmm_(gradient.t(), x)
                    else:
                        grad_weight += (gradient.t() @ x).float()
                if grad_bias is not None:
                    grad_bias += logits.sum(dim=0)
        ctx.save_for_backward(grad_features, grad_weight, grad_bias)
        ctx.weight_dtype = weight.dtype
        return loss

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad_features, grad_weight, grad_bias = ctx.saved_tensors
        # out of place: the saved gradients stay as they are should backward run again (retain_graph)
        return (
            None if grad_features is None else grad_features * grad.to(grad_features.dtype),
            None if grad_weight is None else (grad_weight * grad).to(ctx.weight_dtype),
            None if grad_bias is None else (grad_bias * grad).to(ctx.weight_dtype),
            None,
            None,
        )


def linear_cross_entropy_sum(features: torch.Tensor, decoder: nn.Linear, targets: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy (float32) of ``decoder(features)`` [N, V] at ``targets`` [N], block by block."""
    grad = torch.is_grad_enabled()
    bias = decoder.bias
    needs = (grad and features.requires_grad, grad and decoder.weight.requires_grad,
             grad and bias is not None and bias.requires_grad)
    return LinearCrossEntropySum.apply(features, decoder.weight, bias, targets, needs)


class CrossEntropySum(torch.autograd.Function):
    """Summed cross-entropy of logits [N, V] at labels [N] (-100: ignored): ``F.cross_entropy(reduction="sum")``.

    For logits that a caller keeps (``return_logits=True``). Same numbers, lighter backward: the saved
    log-softmax becomes the gradient (softmax - one-hot) in place, where PyTorch's backward allocates two more
    [N, V] tensors. The saved log-softmax is used up: backward runs once (no ``retain_graph``).
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logprobs = torch.log_softmax(logits, dim=-1)
        kept = labels != IGNORE
        targets = labels.clamp(min=0)
        picked = logprobs.gather(1, targets[:, None]).squeeze(1)
        ctx.save_for_backward(logprobs, targets, kept)
        return -torch.where(kept, picked, 0.0).sum()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        logprobs, targets, kept = ctx.saved_tensors
        gradient = logprobs.exp_()  # softmax
        rows = torch.arange(len(targets), device=targets.device)
        gradient[rows, targets] -= 1.0
        return gradient.mul_((grad * kept.to(gradient.dtype))[:, None]), None


def lm_loss_sum(model: nn.Module, hidden: torch.Tensor, labels: torch.Tensor, shift: int,
                logits: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(summed cross-entropy in float32, number of labelled positions) of an LM's head on ``hidden`` [B, T, D].

    ``shift`` = 1: position i predicts labels[i + 1] (causal LM, MNTP); 0: position i predicts labels[i] (MLM).
    With ``logits`` already computed for every position they are used as they are; without, the head runs only
    at the labelled positions (for MLM that is 15% of the work), its output projection fused with the loss.
    ``model`` offers ``lm_features(hidden)`` (the head up to its output projection) and
    ``get_output_embeddings()`` (that projection), so that ``lm_logits`` = projection(features).
    """
    if logits is not None:
        if shift:  # shift the labels, not the logits: no copy of the [B, T, V] tensor
            labels = F.pad(labels[:, shift:], (0, shift), value=IGNORE)
        labels = labels.flatten()
        return CrossEntropySum.apply(logits.flatten(0, -2).float(), labels), (labels != IGNORE).sum()
    if shift:
        hidden, labels = hidden[:, :-shift], labels[:, shift:]
    hidden, labels = hidden.flatten(0, 1), labels.flatten()
    kept = labels != IGNORE
    count = kept.sum()  # a tensor: no host sync on GPUs
    if not bool(kept.all()):
        chosen = kept.nonzero().squeeze(1)
        # index_select (backward: index_add) rather than a boolean mask (backward: a serial index_put on CPU)
        hidden, labels = hidden.index_select(0, chosen), labels.index_select(0, chosen)
    return linear_cross_entropy_sum(model.lm_features(hidden), model.get_output_embeddings(), labels), count


def lm_loss(model: nn.Module, hidden: torch.Tensor, labels: torch.Tensor, shift: int,
            logits: torch.Tensor | None = None) -> torch.Tensor:
    """Mean cross-entropy (float32) over the labelled positions (see :func:`lm_loss_sum`)."""
    total, count = lm_loss_sum(model, hidden, labels, shift, logits)
    return total / count.clamp(min=1)


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Regression (one output: MSE) or classification (cross-entropy), in float32, as transformers' heads do."""
    if logits.shape[-1] == 1:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(logits.float(), labels)
