"""Attention masks for the two attention modes, shared by both backends.

The phase of training decides the mode per forward call: ``causal`` (each position sees itself and the past) or
``bidirectional`` (every position sees every non-padding position). Both backends hand the result to
``torch.nn.functional.scaled_dot_product_attention``.
"""

from __future__ import annotations

from typing import Literal

import torch

AttentionMode = Literal["causal", "bidirectional"]
ATTENTION_MODES: tuple[str, ...] = ("causal", "bidirectional")


def check_mode(attention_mode: str) -> None:
    if attention_mode not in ATTENTION_MODES:
        raise ValueError(f"attention_mode must be 'causal' or 'bidirectional', got {attention_mode!r}")


def boolean_mask(
    attention_mask: torch.Tensor | None, attention_mode: str, length: int, device: torch.device
) -> torch.Tensor | None:
    """A [B or 1, 1, T, T] boolean mask (True = may attend), or None when nothing needs masking.

    None means: no padding and bidirectional, or no padding and causal (then the caller uses ``is_causal``).
    """
    check_mode(attention_mode)
    has_padding = attention_mask is not None and not bool(attention_mask.bool().all())
    if not has_padding:
        return None
    keys = attention_mask.bool()[:, None, None, :]  # [B, 1, 1, T]
    if attention_mode == "causal":
        keys = keys & torch.ones(length, length, dtype=torch.bool, device=device).tril()
    # a query whose every key is padding (a left-padded position under the causal mask) would give a row of
    # NaN; letting it see itself keeps the numbers finite and changes nothing at the real positions
    return keys | torch.eye(length, dtype=torch.bool, device=device)


def full_mask(
    attention_mask: torch.Tensor | None, attention_mode: str, length: int, device: torch.device
) -> torch.Tensor | None:
    """As :func:`boolean_mask`, but also materialises the plain causal mask (for kernels given a bias)."""
    mask = boolean_mask(attention_mask, attention_mode, length, device)
    if mask is None and attention_mode == "causal":
        mask = torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]
    return mask
