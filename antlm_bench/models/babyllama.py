"""BabyLlama: the Llama decoder (RMSNorm, rotary positions, SwiGLU) with an attention mode per forward call.

The math and the parameter names are those of ``transformers.LlamaForCausalLM`` (model.embed_tokens,
model.layers.N.self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, input_layernorm, post_attention_layernorm,
model.norm, lm_head), and the config is a plain ``LlamaConfig`` saved with model_type "llama". So a checkpoint
written by this class loads with ``LlamaForCausalLM.from_pretrained`` and gives the same causal logits; what this
class adds is the bidirectional mode (for MLM phases), hidden states without the head, and a loss computed from
the head at the labelled positions only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import CausalLMOutput, SequenceClassifierOutput

from antlm_bench.models.backend import Backend
from antlm_bench.models.loss import classification_loss, lm_loss
from antlm_bench.models.masks import boolean_mask, check_mode
from antlm_bench.recipes import Preset

ARCHITECTURE = "babyllama"


def at_least_float32(dtype: torch.dtype) -> torch.dtype:
    """The dtype to reduce in: float32 for half and bfloat16 (as Llama does), the tensor's own when it is wider
    (a model run in ``.double()`` stays double throughout; ``.float()`` would round it to float32)."""
    return torch.promote_types(dtype, torch.float32)


class RMSNorm(nn.Module):
    """x / rms(x) * weight, computed in at least float32 like Llama."""

    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(at_least_float32(dtype))
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class RotaryEmbedding(nn.Module):
    """cos/sin of the rotary angles position * theta^(-2i/d), the two halves of a head laid out as in Llama."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # not in the checkpoint, as in Llama

    def forward(self, length: int, device: torch.device, dtype: torch.dtype,
                position_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """[T, d] for positions 0..T-1, or [B, 1, T, d] for explicit ``position_ids`` [B, T]."""
        if position_ids is None:
            positions = torch.arange(length, device=device, dtype=torch.float)
        else:
            positions = position_ids.float()[:, None]  # [B, 1, T]: one set of angles for every head
        angles = positions[..., None] * self.inv_freq.to(device)  # [..., T, d/2]
        angles = torch.cat((angles, angles), dim=-1)  # [..., T, d]
        return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + rotate_half(x) * sin


def sdpa_attention(q, k, v, mask, is_causal: bool, dropout: float, scale: float) -> torch.Tensor:
    if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        # PyTorch's CPU attention kernels run bf16 slower than float32 (forward + backward at the small preset's
        # shapes: 96 ms against 39), so under CPU autocast the attention itself stays float32
        with torch.autocast("cpu", enabled=False):
            return sdpa_attention(q.float(), k.float(), v.float(), mask, is_causal, dropout, scale)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal, dropout_p=dropout, scale=scale,
        enable_gqa=q.shape[1] != k.shape[1],
    )


def eager_attention(q, k, v, mask, is_causal: bool, dropout: float, scale: float) -> torch.Tensor:
    """The same as sdpa_attention written out; the reference the tests compare against."""
    if q.shape[1] != k.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    scores = (q @ k.transpose(-1, -2)) * scale
    length = q.shape[-2]
    if is_causal:
        mask = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = F.dropout(scores.softmax(-1, dtype=at_least_float32(scores.dtype)).to(q.dtype), p=dropout)
    return probs @ v


ATTENTION_FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {"sdpa": sdpa_attention, "eager": eager_attention}
KeyValues = tuple[torch.Tensor, torch.Tensor]  # one layer's keys and values, [B, kv_heads, T, head_dim]


class Attention(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.n_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.scale = self.head_dim**-0.5
        self.dropout = config.attention_dropout
        self.kernel = ATTENTION_FUNCTIONS[getattr(config, "antlm_attention", "sdpa")]
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, self.n_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, self.n_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, config.hidden_size, bias=bias)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor | None,
                is_causal: bool, past: KeyValues | None = None, keep: list[KeyValues] | None = None) -> torch.Tensor:
        """``past``: keys and values of earlier tokens, attended before this call's own; ``keep``: a list this
        call's keys and values (rotary applied) are appended to."""
        batch, length, _ = x.shape
        q = self.q_proj(x).view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if keep is not None:
            keep.append((k, v))
        if past is not None:
            k, v = torch.cat((past[0], k), dim=2), torch.cat((past[1], v), dim=2)
        dropout = self.dropout if self.training else 0.0
        out = self.kernel(q, k, v, mask, is_causal, dropout, self.scale)  # [B, H, T, d]
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config)

    def forward(self, x, cos, sin, mask, is_causal: bool, past: KeyValues | None = None,
                keep: list[KeyValues] | None = None) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, is_causal, past, keep)
        return x + self.mlp(self.post_attention_layernorm(x))


class BabyLlamaPreTrainedModel(PreTrainedModel):
    config_class = LlamaConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = False
    _no_split_modules = ["DecoderLayer"]
    _supports_sdpa = True

    def _init_weights(self, module: nn.Module) -> None:
        # Llama's initialisation: N(0, initializer_range) for matrices, zero biases, unit norms
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, RMSNorm):
            init.ones_(module.weight)
        elif isinstance(module, RotaryEmbedding):
            head_dim = self.config.head_dim
            theta = self.config.rope_parameters["rope_theta"]
            init.copy_(module.inv_freq, 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim)))


class BabyLlamaModel(BabyLlamaPreTrainedModel):
    """Embeddings, decoder layers and the final norm: hidden states, no head."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        if config.rope_parameters.get("rope_type", "default") != "default":
            raise ValueError("BabyLlama implements the default rotary embedding only")
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(config.head_dim, config.rope_parameters["rope_theta"])
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed_tokens = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                attention_mode: str = "causal", position_ids: torch.Tensor | None = None,
                past_key_values: list[KeyValues] | None = None,
                keep_key_values: list[KeyValues] | None = None) -> torch.Tensor:
        """``attention_mask``: [B, T] (1 = token, 0 = padding), or a [B, 1, T, T] boolean mask (True = may attend)
        used as given, with ``position_ids`` [B, T]: packed or prefix-tree rows.

        ``past_key_values`` (one (keys, values) pair per layer, [B, kv_heads, P, d] with rotary applied, as
        ``keep_key_values`` collects them from an earlier call) are keys the tokens attend before their own; the
        mask is then [B, 1, T, P + T] and ``position_ids`` are needed."""
        length = input_ids.shape[1]
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(length, x.device, x.dtype, position_ids)
        if past_key_values is not None and (attention_mask is None or attention_mask.dim() != 4
                                            or position_ids is None):
            raise ValueError("past_key_values need a [B, 1, T, P + T] attention mask and position_ids")
        if attention_mask is not None and attention_mask.dim() == 4:
            check_mode(attention_mode)
            mask, is_causal = attention_mask.bool(), False
        else:
            mask = boolean_mask(attention_mask, attention_mode, length, x.device)
            is_causal = mask is None and attention_mode == "causal"
        for index, layer in enumerate(self.layers):
            past = None if past_key_values is None else past_key_values[index]
            x = layer(x, cos, sin, mask, is_causal, past, keep_key_values)
        return self.norm(x)


class BabyLlamaForCausalLM(BabyLlamaPreTrainedModel):
    """The language model: ``hidden_states`` + ``lm_logits``, and ``forward`` for the transformers way."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.model = BabyLlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embed_tokens = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> None:
        super().save_pretrained(save_directory, *args, **kwargs)
        # name transformers' own class, so that tools which read `architectures` (not only model_type) load Llama
        path = Path(save_directory) / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        config["architectures"] = ["LlamaForCausalLM"]
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                      attention_mode: str = "causal", position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """[B, T, H] after the final norm (masks and positions as in :meth:`BabyLlamaModel.forward`)."""
        return self.model(input_ids, attention_mask, attention_mode, position_ids)

    def prefix_hidden_states(self, prefix_ids: torch.Tensor, input_ids: torch.Tensor, position_ids: torch.Tensor,
                             attention_mask: torch.Tensor, prefix_rows: torch.Tensor | None = None
                             ) -> tuple[torch.Tensor, torch.Tensor]:
        """Causal hidden states of rows that continue a prefix: the prefixes [N, P] run first (causal, padded on
        the right), then ``input_ids`` [B, T] at ``position_ids`` attend the keys and values of their prefix
        (``prefix_rows`` [B]: which one; row b's own by default) and their own, as the boolean
        ``attention_mask`` [B, T, P + T] allows. Returns both hidden states, [N, P, H] and [B, T, H].

        A prefix shared by several continuations goes through the body once, and no attention is spent on pairs
        that one prefix-tree row would block (one continuation against another)."""
        kept: list[KeyValues] = []
        prefix = self.model(prefix_ids, None, "causal", keep_key_values=kept)
        if prefix_rows is not None:
            kept = [(k[prefix_rows], v[prefix_rows]) for k, v in kept]
        rest = self.model(input_ids, attention_mask[:, None], "causal", position_ids, past_key_values=kept)
        return prefix, rest

    def lm_features(self, hidden: torch.Tensor) -> torch.Tensor:
        """The LM head's input: the hidden states themselves (the final norm is part of ``hidden_states``)."""
        return hidden

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                attention_mode: str = "causal", labels: torch.Tensor | None = None,
                label_shift: int | None = None, return_logits: bool = True, **_: object) -> CausalLMOutput:
        """Logits over the vocabulary; with ``labels`` (-100 = ignore) also the mean cross-entropy.

        The labels are shifted inside (position i predicts labels[i+1]) in causal mode, read at the same position in
        bidirectional mode; ``label_shift`` overrides that (MNTP: bidirectional with shift 1). With
        ``return_logits=False`` only the labelled positions go through the head.
        """
        check_mode(attention_mode)
        hidden = self.hidden_states(input_ids, attention_mask, attention_mode)
        loss = None
        logits = self.lm_head(hidden) if return_logits else None
        if labels is not None:
            shift = label_shift if label_shift is not None else int(attention_mode == "causal")
            loss = lm_loss(self, hidden, labels, shift, logits)
        return CausalLMOutput(loss=loss, logits=logits)


class BabyLlamaForSequenceClassification(BabyLlamaPreTrainedModel):
    """A linear ``score`` on the last non-padding token (as transformers' LlamaForSequenceClassification).

    Loads from a BabyLlama LM checkpoint: ``model.*`` is kept, ``lm_head`` dropped, ``score`` freshly initialised.
    """

    _keys_to_ignore_on_load_unexpected = [r"lm_head\."]

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = BabyLlamaModel(config)
        self.score = nn.Linear(config.hidden_size, config.num_labels, bias=False)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, attention_mode: str = "causal",
                **_: object) -> SequenceClassifierOutput:
        hidden = self.model(input_ids, attention_mask, attention_mode)
        if attention_mask is None:
            last = torch.full((input_ids.shape[0],), input_ids.shape[1] - 1, device=input_ids.device)
        else:
            # the rightmost real token, whichever side the padding is on
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)
            last = (attention_mask.bool() * positions).argmax(-1)
        pooled = hidden[torch.arange(input_ids.shape[0], device=input_ids.device), last]
        logits = self.score(pooled)
        loss = None if labels is None else classification_loss(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


def make_config(*, vocab_size: int, hidden_size: int, n_layers: int, n_heads: int, intermediate_size: int,
                max_position_embeddings: int, tie_word_embeddings: bool, dropout: float,
                bos_token_id: int | None, eos_token_id: int | None, pad_token_id: int | None,
                mask_token_id: int | None) -> LlamaConfig:
    """A LlamaConfig that plain transformers understands, plus the keys antlm-bench reads."""
    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=n_layers, num_attention_heads=n_heads, num_key_value_heads=n_heads,
        max_position_embeddings=max_position_embeddings, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=tie_word_embeddings, attention_dropout=dropout, initializer_range=0.02,
        bos_token_id=bos_token_id, eos_token_id=eos_token_id, pad_token_id=pad_token_id,
        mask_token_id=mask_token_id, antlm_architecture=ARCHITECTURE, architectures=["LlamaForCausalLM"],
    )


class BabyLlamaBackend(Backend):
    """How a recipe preset becomes a BabyLlama (the registry entry `architecture: babyllama` names)."""

    lm_class = BabyLlamaForCausalLM
    classifier_class = BabyLlamaForSequenceClassification
    is_masked_lm = False  # plain transformers sees a causal LM

    @staticmethod
    def make_config(preset: Preset, special_ids: dict[str, int | None]) -> LlamaConfig:
        return make_config(
            vocab_size=preset.vocab_size, hidden_size=preset.hidden_size, n_layers=preset.n_layers,
            n_heads=preset.n_heads, intermediate_size=preset.intermediate_size,
            max_position_embeddings=preset.max_position_embeddings,
            tie_word_embeddings=preset.tie_word_embeddings, dropout=preset.dropout, **special_ids,
        )


__all__ = [
    "ARCHITECTURE", "BabyLlamaBackend", "BabyLlamaForCausalLM", "BabyLlamaForSequenceClassification", "BabyLlamaModel", "make_config",
]
