"""Losses both backends share: the LM loss at the labelled positions (-100 = ignored), the classification loss."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


class CrossEntropySum(torch.autograd.Function):
    """Summed cross-entropy of logits [N, V] at labels [N] (-100: ignored): ``F.cross_entropy(reduction="sum")``.

    Same numbers, lighter backward: the saved log-softmax becomes the gradient (softmax - one-hot) in place,
    where PyTorch's backward allocates two more [N, V] tensors (the nll gradient, the log-softmax gradient). On
    CPU, where every fresh large tensor costs page faults, that is about a quarter of the head-and-loss time of a
    small-vocabulary model. The saved log-softmax is used up: backward runs once (no ``retain_graph``).
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logprobs = torch.log_softmax(logits, dim=-1)
        kept = labels != -100
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


def lm_loss(head: Callable[[torch.Tensor], torch.Tensor], hidden: torch.Tensor, labels: torch.Tensor, shift: int,
            logits: torch.Tensor | None = None) -> torch.Tensor:
    """Mean cross-entropy (float32) over the labelled positions.

    ``shift`` = 1: position i predicts labels[i + 1] (causal LM, MNTP); 0: position i predicts labels[i] (MLM).
    With ``logits`` already computed for every position they are used as they are; without, the head runs only
    at the labelled positions (for MLM that is 15% of the work).
    """
    if shift:
        # shift the labels, not the logits: no copy of the [B, T, V] tensor
        labels = F.pad(labels[:, shift:], (0, shift), value=-100)
    count = (labels != -100).sum().clamp(min=1)  # a tensor: no host sync on GPUs
    if logits is None:
        chosen = (labels != -100).flatten().nonzero().squeeze(1)
        # index_select (backward: index_add) rather than a boolean mask (backward: a serial index_put on CPU)
        logits = head(hidden.flatten(0, 1).index_select(0, chosen))
        labels = labels.flatten().index_select(0, chosen)
    return CrossEntropySum.apply(logits.flatten(0, -2).float(), labels.flatten()) / count


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Regression (one output: MSE) or classification (cross-entropy), in float32, as transformers' heads do."""
    if logits.shape[-1] == 1:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(logits.float(), labels)
