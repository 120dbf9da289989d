"""LTG-BERT (Samuel et al. 2023) with an attention mode per forward call.

As published: a word embedding with a LayerNorm; NormFormer-style LayerNorms (before attention, after its output
projection, and around the GEGLU in the feed-forward); DeBERTa-style disentangled attention whose scores are
content-content + content-to-position + position-to-content, over relative positions in log buckets (bucket 32,
max 512), all scaled by 1/sqrt(3 * head_size); and a masked-LM head (LayerNorm, dense, GELU, LayerNorm, decoder
tied to the word embedding). Parameter names follow the published modeling_ltgbert.py, so its checkpoints load.

The positional terms depend on the query and key contents: a [B, H, T, T] bias that needs a gradient, which SDPA
takes only as a float mask (on CPU then through its slower math path). So the scores [H * B, T, T] are written
out (positional terms picked from per-bucket scores, plus q.k), the causal / padding mask filled in as -inf, then
softmax, dropout and the product with the values. Causal mode is the same network under a lower-triangular mask;
explicit ``position_ids`` and a 4-D mask give packed or prefix-tree rows (relative buckets from the positions).

This file's code above the cut travels with every checkpoint (models/remote_code.py) and also runs under
transformers 4.x, where an evaluation set-up pinned to 4.x loads an export (tests/cli/test_export_transformers4.py):
there configs are no dataclasses, so a config's field types go unchecked, and the initialisers are torch's own.
"""

from __future__ import annotations

import dataclasses
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    PreTrainedModel,
)

try:  # transformers 5: dataclass configs whose field types are checked, its own initialisers
    from huggingface_hub.dataclasses import strict
    from transformers import PreTrainedConfig
    from transformers import initialization as init

    TYPED_CONFIGS = True
except ImportError:  # transformers 4.x (an exported checkpoint's copy of this file; antlm-bench itself needs 5)
    from torch.nn import init  # type: ignore[no-redef]
    from transformers import PretrainedConfig as PreTrainedConfig  # type: ignore[attr-defined,no-redef]

    TYPED_CONFIGS = False
from transformers.modeling_outputs import CausalLMOutput, MaskedLMOutput, SequenceClassifierOutput

from antlm_bench.models.backend import Backend
from antlm_bench.models.loss import classification_loss, lm_loss
from antlm_bench.models.masks import check_mode, full_mask
from antlm_bench.recipes import Preset

ARCHITECTURE = "ltgbert"


def _checked_field_types(cls: type) -> type:
    """Under transformers 5, the config's field types checked as transformers checks its own (Llama's): a
    wrong-typed config.json fails on load. ``strict`` skips a field whose type is a string, as ``from __future__
    import annotations`` leaves them, so they are made objects first. Under 4.x (no dataclass configs) as is."""
    if not TYPED_CONFIGS:
        return cls
    own = cls.__dict__.get("__annotations__", {})  # only ours: some inherited ones name TYPE_CHECKING imports
    namespace = vars(sys.modules[cls.__module__])
    for item in dataclasses.fields(cls):
        if item.name in own and isinstance(item.type, str):
            item.type = eval(item.type, namespace)  # noqa: S307  (our own annotation strings, written above)
    return strict(cls)


@_checked_field_types
class LtgBertConfig(PreTrainedConfig):
    model_type = "ltgbert"

    vocab_size: int = 16384
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 2048
    max_position_embeddings: int = 512
    position_bucket_size: int = 32
    layer_norm_eps: float = 1e-7
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    classifier_dropout: float | None = None
    tie_word_embeddings: bool = True
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    mask_token_id: int | None = None
    antlm_architecture: str = ARCHITECTURE


def make_log_bucket_position(relative_pos: torch.Tensor, bucket_size: int, max_position: int) -> torch.Tensor:
    """Relative distance -> bucket: exact within +-bucket_size/2, logarithmic beyond, +-(bucket_size-1) at most."""
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    abs_pos = torch.where(
        (relative_pos < mid) & (relative_pos > -mid),
        torch.full_like(relative_pos, mid - 1),  # placeholder inside the exact zone: keeps log() finite
        relative_pos.abs().clamp(max=max_position - 1),
    )
    log_pos = torch.ceil(torch.log(abs_pos / mid) / math.log((max_position - 1) / mid) * (mid - 1)).int() + mid
    return torch.where(abs_pos <= mid, relative_pos, log_pos * sign).long()


def relative_position_indices(length: int, bucket_size: int, max_position: int, device=None,
                              position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """[T, T] row of the relative embedding (0 .. 2*bucket_size-2) for query i, key j (distance i - j).

    With ``position_ids`` [B, T] (packed or prefix-tree rows) the distances are those of the tokens' own
    positions, one [T, T] table per row: [B, T, T].
    """
    positions = torch.arange(length, dtype=torch.long, device=device) if position_ids is None else position_ids
    relative = positions[..., :, None] - positions[..., None, :]
    return bucket_size - 1 + make_log_bucket_position(relative, bucket_size, max_position)


def used_buckets(indices: torch.Tensor, n_buckets: int, multiple: int = 8) -> slice:
    """The rows of the relative embedding that ``indices`` point into, widened to a multiple of ``multiple``.

    T tokens reach only the buckets of distances up to T - 1 (45 of the 63 at T = 64, 51 at T = 128), so the
    positional scores need no others; a width that is a multiple of 8 keeps their bmm on BLAS's fast path (at the
    odd widths 45 / 51 / 63 it is ~1.3x slower on CPU). The extra rows are scored but never picked.
    """
    first, last = int(indices.min()), int(indices.max())
    width = min(math.ceil((last + 1 - first) / multiple) * multiple, n_buckets)
    start = min(first, n_buckets - width)
    return slice(start, start + width)


class PlainLayerNorm(nn.LayerNorm):
    """A LayerNorm without affine parameters (the published model's ``elementwise_affine=False`` ones).

    On CPU it normalises with a constant weight 1 and bias 0, the same numbers: PyTorch's CPU kernel given neither
    takes a path about twice as slow, forward and backward. No parameters, no buffers: the state dict is unchanged.
    """

    def __init__(self, size: int, eps: float) -> None:
        super().__init__(size, eps=eps, elementwise_affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu":
            return super().forward(x)
        ones = x.new_ones(self.normalized_shape)
        return F.layer_norm(x, self.normalized_shape, ones, torch.zeros_like(ones), self.eps)


class UniformMaskDropout(nn.Dropout):
    """``nn.Dropout`` whose mask, on CPU, comes from one uniform draw: keep where u >= p, scaled by 1 / (1 - p).

    The same distribution as ``F.dropout``; PyTorch's CPU dropout draws its mask with ``bernoulli_`` and then
    divides and multiplies in separate passes, about twice as slow forward and backward, and dropout is ~5% of a
    CPU training step here. On other devices (CUDA's dropout is one fused kernel) it is ``nn.Dropout`` itself.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or not 0.0 < self.p < 1.0 or x.device.type != "cpu":
            return super().forward(x)
        keep = torch.rand_like(x).ge_(self.p).mul_(1.0 / (1.0 - self.p))  # 0 or 1 / (1 - p), in place
        return x * keep


class Embedding(nn.Module):
    def __init__(self, config: LtgBertConfig) -> None:
        super().__init__()
        self.word_embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.word_layer_norm = PlainLayerNorm(config.hidden_size, config.layer_norm_eps)
        self.dropout = UniformMaskDropout(config.hidden_dropout_prob)
        self.relative_embedding = nn.Parameter(torch.empty(2 * config.position_bucket_size - 1, config.hidden_size))
        self.relative_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        words = self.dropout(self.word_layer_norm(self.word_embedding(input_ids)))
        return words, self.relative_layer_norm(self.relative_embedding)


class Attention(nn.Module):
    def __init__(self, config: LtgBertConfig) -> None:
        super().__init__()
        if config.hidden_size % config.num_attention_heads:
            raise ValueError(f"hidden_size {config.hidden_size} is not a multiple of {config.num_attention_heads}")
        self.n_heads = config.num_attention_heads
        self.head_size = config.hidden_size // config.num_attention_heads
        self.in_proj_qk = nn.Linear(config.hidden_size, 2 * config.hidden_size)
        self.in_proj_v = nn.Linear(config.hidden_size, config.hidden_size)
        self.out_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.pre_layer_norm = PlainLayerNorm(config.hidden_size, config.layer_norm_eps)
        self.post_layer_norm = nn.LayerNorm(config.hidden_size, config.layer_norm_eps)
        self.dropout = UniformMaskDropout(config.attention_probs_dropout_prob)
        self.scale = 1.0 / math.sqrt(3 * self.head_size)

    def forward(self, x: torch.Tensor, blocked: torch.Tensor | None, relative_embedding: torch.Tensor,
                indices: torch.Tensor) -> torch.Tensor:
        """``blocked``: True where query i may not see key j (causal / padding), or None.

        ``relative_embedding`` [R, D] holds the buckets that ``indices`` (0 .. R-1) point into: [T, T] shared by
        the batch, or [B, T, T], a table per row (explicit position ids).
        """
        batch, length, hidden = x.shape
        heads, size = self.n_heads, self.head_size
        x = self.pre_layer_norm(x)
        # heads first, [H, B, T, d]: one copy, after which every (head, batch) matrix and the whole query /
        # key block are plain views that bmm takes as they are
        qk = self.in_proj_qk(x).view(batch, length, 2 * heads, size).permute(2, 0, 1, 3).contiguous()
        query, key = qk.view(2, heads * batch, length, size).unbind(0)
        value = self.in_proj_v(x).view(batch, length, heads, size).permute(2, 0, 1, 3)
        value = value.reshape(heads * batch, length, size)

        # content-to-position (query . key_pos[r]) and position-to-content (key . query_pos[r]) against every
        # bucket r: one bmm, the 2H query and key heads against their [d, R] position blocks (scaled there, on the
        # small side). The published model splits the projected positions per head, [R, H, (q_pos, k_pos)],
        # rather than into a query half and a key half as it does for the content; kept, so checkpoints mean the
        # same.
        n_buckets = relative_embedding.shape[0]
        positions = self.in_proj_qk(self.dropout(relative_embedding)).view(n_buckets, heads, 2, size)
        positions = positions.flip(2).permute(2, 1, 3, 0) * self.scale  # [(k_pos, q_pos), H, d, R]
        positions = positions.reshape(2 * heads, size, n_buckets)
        by_bucket = torch.bmm(qk.view(2 * heads, batch * length, size), positions)  # [2H, B * T, R]
        c2p, p2c = by_bucket.view(2, heads * batch, length * n_buckets).unbind(0)  # rows of [T, R] per (h, b)
        # then pick the bucket of each (i, j): c2p at [i, bucket(i, j)], p2c at [j, bucket(i, j)], as an
        # index_select over each flattened [T * R] row (a plain copy forward, an index_add backward: cheaper
        # than gather / scatter_add along a dimension)
        rows = torch.arange(length, device=indices.device) * n_buckets
        c2p_index = (rows[:, None] + indices).flatten(-2)
        p2c_index = (rows[None, :] + indices).flatten(-2)

        def pick(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
            if index.dim() == 1:
                return table.index_select(1, index)
            # a table per row (position ids): gather along each (head, row)'s own index
            picked = table.view(heads, batch, -1).gather(2, index.expand(heads, -1, -1))
            return picked.view(heads * batch, -1)

        # scores written out rather than given to scaled_dot_product_attention: the positional bias is a
        # [B, H, T, T] tensor anyway, and with one (that needs a gradient) SDPA falls back to its math path on
        # CPU, which adds passes over it (the mask add, a -inf check per row). The in-place steps act on the
        # picked tensor itself, never on a view of it: autograd would otherwise clone the whole gradient in
        # backward (CopySlices); and neither index_select nor add_ keeps its output for the backward pass.
        bias = pick(c2p, c2p_index).add_(pick(p2c, p2c_index))  # [H * B, T * T]
        if blocked is not None:  # [B or 1, 1, T, T] -> [1 or H * B, T * T], the heads-first layout
            blocked = blocked.reshape(-1, length * length)
            bias.masked_fill_(blocked if len(blocked) == 1 else blocked.repeat(heads, 1), float("-inf"))
        scores = torch.baddbmm(bias.view(heads * batch, length, length), query, key.transpose(1, 2),
                               alpha=self.scale)
        # the softmax in float32 whatever the autocast dtype (as transformers' attention does); a no-op in float32
        probs = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32))
        probs = self.dropout(probs.to(value.dtype))
        context = torch.bmm(probs, value).view(heads, batch, length, size).permute(1, 2, 0, 3)
        context = context.reshape(batch, length, hidden)
        return self.dropout(self.post_layer_norm(self.out_proj(context)))


class GeGLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, gate = x.chunk(2, dim=-1)
        return x * F.gelu(gate, approximate="tanh")


class FeedForward(nn.Module):
    """LayerNorm -> Linear(D, 2I) -> GEGLU -> LayerNorm -> Linear(I, D) -> dropout."""

    def __init__(self, config: LtgBertConfig, layer_index: int) -> None:
        super().__init__()
        eps = config.layer_norm_eps
        self.intermediate_size = config.intermediate_size
        # the published Sequential (its parameter names, mlp.1 and mlp.4, and, run as is, its computation);
        # forward spells the same steps out
        self.mlp = nn.Sequential(
            PlainLayerNorm(config.hidden_size, eps),
            nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False),
            GeGLU(),
            PlainLayerNorm(config.intermediate_size, eps),
            nn.Linear(config.intermediate_size, config.hidden_size, bias=False),
            UniformMaskDropout(config.hidden_dropout_prob),
        )
        # deeper layers start smaller, as published: std * sqrt(1 / (2 (i + 1)))
        for linear in (self.mlp[1], self.mlp[4]):
            linear.init_scale = math.sqrt(1.0 / (2.0 * (layer_index + 1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm_in, up, _, norm_mid, down, dropout = self.mlp
        x = norm_in(x)
        # GEGLU on the two halves of `up`, each from its own matmul: contiguous halves are faster than
        # chunking one output (the same numbers)
        value = F.linear(x, up.weight[: self.intermediate_size])
        gate = F.linear(x, up.weight[self.intermediate_size :])
        return dropout(down(norm_mid(value * F.gelu(gate, approximate="tanh"))))


class EncoderLayer(nn.Module):
    def __init__(self, config: LtgBertConfig, layer_index: int) -> None:
        super().__init__()
        self.attention = Attention(config)
        self.mlp = FeedForward(config, layer_index)

    def forward(self, x, blocked, relative_embedding, indices) -> torch.Tensor:
        x = x + self.attention(x, blocked, relative_embedding, indices)
        return x + self.mlp(x)


class Encoder(nn.Module):
    def __init__(self, config: LtgBertConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config, i) for i in range(config.num_hidden_layers))


class Classifier(nn.Module):
    """LayerNorm, dense, GELU, LayerNorm, dropout, linear to ``n_outputs``: the LM head and the GLUE head."""

    def __init__(self, config: LtgBertConfig, n_outputs: int, dropout: float | None = None) -> None:
        super().__init__()
        eps = config.layer_norm_eps
        self.nonlinearity = nn.Sequential(
            PlainLayerNorm(config.hidden_size, eps),
            nn.Linear(config.hidden_size, config.hidden_size),
            nn.GELU(),
            PlainLayerNorm(config.hidden_size, eps),
            UniformMaskDropout(config.hidden_dropout_prob if dropout is None else dropout),
            nn.Linear(config.hidden_size, n_outputs),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinearity(x)


class LtgBertPreTrainedModel(PreTrainedModel):
    config_class = LtgBertConfig
    base_model_prefix = "ltgbert"
    supports_gradient_checkpointing = False
    _no_split_modules = ["EncoderLayer"]
    _supports_sdpa = True
    # the published checkpoints store the bucket table; we rebuild it
    _keys_to_ignore_on_load_unexpected = [r"position_indices"]

    def _init_weights(self, module: nn.Module) -> None:
        # truncated normal, std sqrt(2 / (5 D)), cut at 2 std; zero biases (Samuel et al. 2023)
        std = math.sqrt(2.0 / (5.0 * self.config.hidden_size))
        if isinstance(module, nn.Linear):
            scaled = std * getattr(module, "init_scale", 1.0)
            init.trunc_normal_(module.weight, mean=0.0, std=scaled, a=-2 * scaled, b=2 * scaled)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.trunc_normal_(module.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
        elif isinstance(module, Embedding):
            init.trunc_normal_(module.relative_embedding, mean=0.0, std=std, a=-2 * std, b=2 * std)
        elif isinstance(module, nn.LayerNorm) and module.weight is not None:
            init.ones_(module.weight)
            init.zeros_(module.bias)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
               attention_mode: str, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Embedding and encoder layers (every LTG-BERT class holds ``embedding`` and ``transformer``).

        ``attention_mask``: [B, T] (1 = token, 0 = padding), or a [B, 1, T, T] boolean mask (True = may attend)
        used as given, with ``position_ids`` [B, T]: packed or prefix-tree rows.
        """
        length = input_ids.shape[1]
        x, relative_embedding = self.embedding(input_ids)
        if attention_mask is not None and attention_mask.dim() == 4:
            check_mode(attention_mode)
            mask = attention_mask.bool()
        else:
            mask = full_mask(attention_mask, attention_mode, length, input_ids.device)
        blocked = None if mask is None else ~mask
        # the bucket table once per forward, built on the CPU (its range is read here) and shared by every layer
        indices = relative_position_indices(
            length, self.config.position_bucket_size, self.config.max_position_embeddings,
            position_ids=None if position_ids is None else position_ids.cpu(),
        )
        window = used_buckets(indices, relative_embedding.shape[0])
        relative_embedding = relative_embedding[window]
        indices = (indices - window.start).to(input_ids.device)
        for layer in self.transformer.layers:
            x = layer(x, blocked, relative_embedding, indices)
        return x


class LtgBertModel(LtgBertPreTrainedModel):
    """Embedding and encoder layers: the last layer's hidden states (LTG-BERT has no final norm; its head has)."""

    def __init__(self, config: LtgBertConfig) -> None:
        super().__init__(config)
        self.embedding = Embedding(config)
        self.transformer = Encoder(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embedding.word_embedding

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embedding.word_embedding = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                attention_mode: str = "bidirectional") -> torch.Tensor:
        return self.encode(input_ids, attention_mask, attention_mode)


class LtgBertForMaskedLM(LtgBertPreTrainedModel):
    """LTG-BERT with its LM head. ``attention_mode`` picks the mask; the default here is bidirectional."""

    _tied_weights_keys = {"classifier.nonlinearity.5.weight": "embedding.word_embedding.weight"}
    default_attention_mode = "bidirectional"

    def __init__(self, config: LtgBertConfig) -> None:
        super().__init__(config)
        self.embedding = Embedding(config)
        self.transformer = Encoder(config)
        self.classifier = Classifier(config, config.vocab_size)  # decoder weight tied to the word embedding
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embedding.word_embedding

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embedding.word_embedding = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.classifier.nonlinearity[5]

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.classifier.nonlinearity[5] = value

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                      attention_mode: str | None = None, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """[B, T, H]: the last layer's output (the head's own LayerNorm comes in ``lm_logits``); masks and
        positions as in :meth:`LtgBertPreTrainedModel.encode`."""
        return self.encode(input_ids, attention_mask, attention_mode or self.default_attention_mode, position_ids)

    def lm_features(self, hidden: torch.Tensor) -> torch.Tensor:
        """The head up to its decoder (LayerNorm, dense, GELU, LayerNorm, dropout): ``lm_logits`` without the
        vocabulary projection, which the training loss fuses with the cross-entropy."""
        return self.classifier.nonlinearity[:5](hidden)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.classifier(hidden)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                attention_mode: str | None = None, labels: torch.Tensor | None = None,
                label_shift: int | None = None, return_logits: bool = True, **_: object) -> MaskedLMOutput:
        """Logits; with ``labels`` the mean cross-entropy at the labelled positions.

        Causal mode shifts the labels (position i predicts labels[i+1]); bidirectional mode reads them at the same
        position; ``label_shift`` overrides that (MNTP).
        """
        attention_mode = attention_mode or self.default_attention_mode
        check_mode(attention_mode)
        hidden = self.hidden_states(input_ids, attention_mask, attention_mode)
        loss = None
        logits = self.classifier(hidden) if return_logits else None
        if labels is not None:
            shift = label_shift if label_shift is not None else int(attention_mode == "causal")
            loss = lm_loss(self, hidden, labels, shift, logits)
        output_class = CausalLMOutput if attention_mode == "causal" else MaskedLMOutput
        return output_class(loss=loss, logits=logits)


class LtgBertForCausalLM(LtgBertForMaskedLM):
    """The same weights, causal by default: what ``AutoModelForCausalLM`` gives for an LTG-BERT checkpoint."""

    default_attention_mode = "causal"


class LtgBertForSequenceClassification(LtgBertPreTrainedModel):
    """The published classifier head (LayerNorm, dense, GELU, LayerNorm, dropout, linear) on the first token.

    Loads from an LTG-BERT LM checkpoint: the encoder is kept, the LM head dropped, ``head`` freshly initialised.
    """

    _keys_to_ignore_on_load_unexpected = [r"position_indices", r"^classifier\."]

    def __init__(self, config: LtgBertConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.embedding = Embedding(config)
        self.transformer = Encoder(config)
        self.head = Classifier(config, config.num_labels, config.classifier_dropout)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, attention_mode: str = "bidirectional",
                **_: object) -> SequenceClassifierOutput:
        hidden = self.encode(input_ids, attention_mask, attention_mode)
        logits = self.head(hidden[:, 0])
        loss = None if labels is None else classification_loss(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


def make_config(*, vocab_size: int, hidden_size: int, n_layers: int, n_heads: int, intermediate_size: int,
                max_position_embeddings: int, position_bucket_size: int, tie_word_embeddings: bool, dropout: float,
                bos_token_id: int | None, eos_token_id: int | None, pad_token_id: int | None,
                mask_token_id: int | None) -> LtgBertConfig:
    return LtgBertConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=n_layers, num_attention_heads=n_heads,
        intermediate_size=intermediate_size, max_position_embeddings=max_position_embeddings,
        position_bucket_size=position_bucket_size, tie_word_embeddings=tie_word_embeddings,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, bos_token_id=bos_token_id,
        eos_token_id=eos_token_id, pad_token_id=pad_token_id, mask_token_id=mask_token_id,
        architectures=["LtgBertForMaskedLM"],
    )


# -- antlm-bench only below this line: not copied into checkpoints --
# (models/remote_code.py writes everything above, with loss.py and masks.py inlined, into each checkpoint as
# modeling_ltgbert.py; the marker line must stay exactly as it is)

REMOTE_MODULE = "modeling_ltgbert"
AUTO_MAP = {
    "AutoConfig": f"{REMOTE_MODULE}.LtgBertConfig",
    "AutoModel": f"{REMOTE_MODULE}.LtgBertModel",
    "AutoModelForMaskedLM": f"{REMOTE_MODULE}.LtgBertForMaskedLM",
    "AutoModelForCausalLM": f"{REMOTE_MODULE}.LtgBertForCausalLM",
    "AutoModelForSequenceClassification": f"{REMOTE_MODULE}.LtgBertForSequenceClassification",
}


class LtgBertBackend(Backend):
    """How a recipe preset becomes an LTG-BERT (the registry entry `architecture: ltgbert` names)."""

    lm_class = LtgBertForMaskedLM
    classifier_class = LtgBertForSequenceClassification
    is_masked_lm = True

    @staticmethod
    def make_config(preset: Preset, special_ids: dict[str, int | None]) -> LtgBertConfig:
        return make_config(
            vocab_size=preset.vocab_size, hidden_size=preset.hidden_size, n_layers=preset.n_layers,
            n_heads=preset.n_heads, intermediate_size=preset.intermediate_size,
            max_position_embeddings=preset.max_position_embeddings, position_bucket_size=preset.position_bucket_size,
            tie_word_embeddings=preset.tie_word_embeddings, dropout=preset.dropout, **special_ids,
        )

    @staticmethod
    def remote_code(config: LtgBertConfig) -> tuple[dict[str, str], dict[str, str]]:
        """This module (with the helpers it imports) as the checkpoint's modeling file, and its ``auto_map``."""
        import antlm_bench.models.loss as loss_module
        import antlm_bench.models.masks as masks_module
        from antlm_bench.models.remote_code import module_source

        code = module_source(sys.modules[__name__], [masks_module, loss_module])
        return {f"{REMOTE_MODULE}.py": code}, dict(AUTO_MAP)


# importing antlm_bench.models registers the classes with the Auto factories (exist_ok: re-imports are harmless)
AutoConfig.register(LtgBertConfig.model_type, LtgBertConfig, exist_ok=True)
AutoModelForMaskedLM.register(LtgBertConfig, LtgBertForMaskedLM, exist_ok=True)
AutoModelForCausalLM.register(LtgBertConfig, LtgBertForCausalLM, exist_ok=True)
AutoModelForSequenceClassification.register(LtgBertConfig, LtgBertForSequenceClassification, exist_ok=True)

__all__ = [
    "ARCHITECTURE", "LtgBertBackend", "LtgBertConfig", "LtgBertForCausalLM", "LtgBertForMaskedLM", "LtgBertForSequenceClassification",
    "LtgBertModel", "make_config", "make_log_bucket_position", "relative_position_indices",
]
