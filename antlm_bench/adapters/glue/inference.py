"""Inference passes of a classifier: logits or pooled features for every example, in the examples' order."""

from __future__ import annotations

import numpy as np
import torch

from antlm_bench.adapters.glue.encoding import Encoded, collate, sorted_batches
from antlm_bench.adapters.glue.model import SequenceClassifier
from antlm_bench.adapters.glue.settings import FinetuneSettings


def _autocast(settings: FinetuneSettings, device: torch.device):
    # bf16 only where the hardware has it; on a CPU it is ~100x slower, so never there
    if device.type == "cuda" and settings.dtype in ("bfloat16", "bf16"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast(device.type, enabled=False)


@torch.inference_mode()
def predict_logits(
    model: SequenceClassifier,
    encoded: Encoded,
    pad_id: int,
    batch_size: int,
    settings: FinetuneSettings,
    padding_side: str = "right",
) -> np.ndarray:
    """Logits [n, num_labels] in the examples' order."""
    if padding_side != "right" and not model.backbone.takes_positions:
        # without position ids a left-padded sequence would start at position > 0
        raise ValueError("left padding needs a backbone that takes position_ids")
    device = torch.device(settings.device)
    model.eval()
    out: np.ndarray | None = None
    for indices in sorted_batches(encoded.lengths, batch_size, settings.eval_batch_tokens):
        batch = collate(encoded, indices, pad_id, padding_side).to(device)
        with _autocast(settings, device):
            logits = model(batch).float().cpu().numpy()
        if out is None:
            out = np.zeros((len(encoded.input_ids), logits.shape[1]), dtype=np.float32)
        out[indices] = logits
    assert out is not None
    return out


@torch.inference_mode()
def pooled_features(
    model: SequenceClassifier, encoded: Encoded, pad_id: int, batch_size: int, settings: FinetuneSettings
) -> np.ndarray:
    device = torch.device(settings.device)
    model.eval()
    out: np.ndarray | None = None
    for indices in sorted_batches(encoded.lengths, batch_size, settings.eval_batch_tokens):
        batch = collate(encoded, indices, pad_id).to(device)
        with _autocast(settings, device):
            features = model.features(batch).float().cpu().numpy()
        if out is None:
            out = np.zeros((len(encoded.input_ids), features.shape[1]), dtype=np.float32)
        out[indices] = features
    assert out is not None
    return out


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)
