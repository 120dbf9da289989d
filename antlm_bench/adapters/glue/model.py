"""The classifier: backbone last hidden states -> pool -> head.

Encoders pool the first token, decoders the last non-padding token, both found from the attention mask, so the
padding side cannot matter. Works for our checkpoints (BabyLlama, LTG-BERT) and plain Hugging Face causal or
masked LMs.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from antlm_bench.adapters.glue.encoding import EncodedBatch
from antlm_bench.errors import UserError

# model types whose plain Hugging Face checkpoints are encoders (pool the first token, bidirectional attention)
ENCODER_MODEL_TYPES = {
    "bert", "roberta", "deberta", "deberta-v2", "electra", "distilbert", "albert", "camembert", "xlm-roberta",
    "modernbert", "ltgbert", "mpnet", "megatron-bert", "xlm", "flaubert", "ernie",
}


def model_kind(model: nn.Module) -> str:
    """'encoder' or 'decoder': decides the default attention and pooling."""
    from antlm_bench.models import masked_by_config  # the backend registry, plug-ins included

    masked = masked_by_config(model.config)
    if masked is not None:
        return "encoder" if masked else "decoder"
    names = [type(model).__name__, *(getattr(model.config, "architectures", None) or [])]
    for name in names:
        if "MaskedLM" in name:
            return "encoder"
        if "CausalLM" in name:
            return "decoder"
    return "encoder" if getattr(model.config, "model_type", "") in ENCODER_MODEL_TYPES else "decoder"


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """[B, T, H] -> [B, H]. 'first' / 'last' pick the first / last *real* token from the mask, wherever the
    padding is; 'mean' averages the real tokens."""
    if how == "mean":
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)
    if how == "first":
        index = mask.argmax(dim=1)
    elif how == "last":
        index = mask.shape[1] - 1 - mask.flip(1).argmax(dim=1)
    else:
        raise ValueError(f"unknown pooling {how!r}")
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), index]


class Backbone(nn.Module):
    """Last hidden states [B, T, H] of any supported LM, whatever its head."""

    def __init__(self, model: nn.Module, attention: str = "auto") -> None:
        super().__init__()
        self.kind = model_kind(model)
        self.ours = hasattr(model, "hidden_states") and hasattr(model.config, "antlm_architecture")
        if attention == "auto":
            attention = "bidirectional" if self.kind == "encoder" else "causal"
        if attention not in ("causal", "bidirectional"):
            raise UserError(f"attention must be auto, causal or bidirectional, got {attention!r}")
        self.attention = attention
        if self.ours:
            self.net = model  # hidden_states() runs the body only; the unused LM head gets no gradient
            self.accepts = set(inspect.signature(model.hidden_states).parameters)
        else:
            expected = "bidirectional" if self.kind == "encoder" else "causal"
            if attention != expected:
                raise UserError(
                    f"attention={attention}: a plain Hugging Face {self.kind} has fixed {expected} attention; "
                    "use attention=auto"
                )
            self.net = model.base_model  # drop the LM head: less memory, and it gets no gradient anyway
            self.accepts = set(inspect.signature(self.net.forward).parameters)
        self.hidden_size = int(model.config.hidden_size)

    @property
    def takes_positions(self) -> bool:
        return "position_ids" in self.accepts

    def forward(self, batch: EncodedBatch) -> torch.Tensor:
        kwargs: dict[str, Any] = {}
        if "position_ids" in self.accepts:
            kwargs["position_ids"] = batch.position_ids
        if batch.token_type_ids is not None and "token_type_ids" in self.accepts:
            kwargs["token_type_ids"] = batch.token_type_ids
        if self.ours:
            return self.net.hidden_states(
                batch.input_ids, attention_mask=batch.attention_mask, attention_mode=self.attention, **kwargs
            )
        if "use_cache" in self.accepts:
            kwargs["use_cache"] = False
        out = self.net(input_ids=batch.input_ids, attention_mask=batch.attention_mask, **kwargs)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


class ClassifierHead(nn.Module):
    """norm -> dense -> GELU -> norm -> dropout -> linear, as the BabyLM 2025 pipeline's head.

    The first norm (without learned scale) makes the head indifferent to the scale of the backbone's states:
    not every backbone ends with a final norm.
    """

    def __init__(self, hidden_size: int, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.norm_in = nn.LayerNorm(hidden_size, eps=1e-5, elementwise_affine=False)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.norm_out = nn.LayerNorm(hidden_size, eps=1e-5, elementwise_affine=False)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_size, num_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.dense(self.norm_in(pooled)))
        return self.out(self.dropout(self.norm_out(x)))


class SequenceClassifier(nn.Module):
    def __init__(self, backbone: Backbone, num_labels: int, dropout: float, pooling: str = "auto") -> None:
        super().__init__()
        self.backbone = backbone
        self.pooling = pooling if pooling != "auto" else ("first" if backbone.kind == "encoder" else "last")
        self.head = ClassifierHead(backbone.hidden_size, num_labels, dropout)

    def features(self, batch: EncodedBatch) -> torch.Tensor:
        return pool(self.backbone(batch), batch.attention_mask, self.pooling)

    def forward(self, batch: EncodedBatch) -> torch.Tensor:
        return self.head(self.features(batch).float())


def max_positions(model: nn.Module) -> int | None:
    value = getattr(model.config, "max_position_embeddings", None)
    return int(value) if value else None


def fresh_copy(model: nn.Module) -> nn.Module:
    """Every run starts from the pre-trained weights."""
    return copy.deepcopy(model)
