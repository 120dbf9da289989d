"""Shared by the tests that feed a damaged model folder to a command: weights a loader must refuse."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def damage_weights(folder: Path, how: str) -> None:
    """Damage ``folder/model.safetensors``: ``truncated`` (cut in half), ``nan`` (every value NaN) or
    ``half-written`` (half of the tensors missing)."""
    weights = folder / "model.safetensors"
    if how == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        return
    tensors = load_file(weights)
    if how == "nan":
        tensors = {name: torch.full_like(tensor, float("nan")) for name, tensor in tensors.items()}
    elif how == "half-written":
        tensors = dict(list(tensors.items())[: len(tensors) // 2])
    else:
        raise ValueError(how)
    save_file(tensors, weights, metadata={"format": "pt"})
