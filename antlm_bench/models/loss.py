"""Losses both backends share: the LM loss at the labelled positions (-100 = ignored), the classification loss."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


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
    return F.cross_entropy(logits.flatten(0, -2).float(), labels.flatten(), ignore_index=-100,
                           reduction="sum") / count


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Regression (one output: MSE) or classification (cross-entropy), in float32, as transformers' heads do."""
    if logits.shape[-1] == 1:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(logits.float(), labels)
