"""Architecture ``hf``: a stock transformers causal or masked LM trained under the schedule grammar.

A recipe preset names a transformers ``model_type`` and its config fields (``hf_config``); the preset's generic
sizes fill the config's standard names (``num_hidden_layers``, ``hidden_size``, ...), which GPT-2's config maps onto
``n_layer``, ``n_embd``, ... itself. The model is the class that ``AutoModelForMaskedLM`` (when the model type has
one) or ``AutoModelForCausalLM`` builds from that config, given the interface the trainer and the scorer use:

- ``hidden_states(input_ids, attention_mask, attention_mode, position_ids)``: the body's last hidden states. In
  the class's own attention (causal for a decoder, bidirectional for an encoder) the model masks as it always
  does; in the other mode it gets a 4-D mask, bidirectional for MLM on a decoder, causal for CLM on an encoder.
  A 4-D mask and ``position_ids`` from the caller (packed or prefix-tree rows) are passed through.
- ``lm_features(hidden)`` / ``lm_logits(hidden)``: the head without / with its vocabulary projection, from a table
  of head layouts per model type (the training loss fuses the projection with the cross-entropy).

Whether a model type honours a 4-D mask and position ids is not assumed: :func:`check_masks` runs once per class
and compares packed rows under a block-diagonal mask with plain forwards of each sequence (as clm scoring's tree
rows are checked); a model that ignores the mask is refused with one line.

The class is a subclass of the stock class with the same name, so a checkpoint is the stock class's own folder
(``architectures: ["GPT2LMHeadModel"]``, the stock config plus ``antlm_architecture: "hf"``) and loads with
``GPT2LMHeadModel.from_pretrained`` or any Auto class.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import transformers
from torch import nn
from transformers import AutoConfig, PreTrainedConfig, PreTrainedModel
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

from antlm_bench.errors import UserError, one_line
from antlm_bench.models.backend import Backend
from antlm_bench.models.masks import check_mode, full_mask
from antlm_bench.recipes import Preset

ARCHITECTURE = "hf"

# the preset's generic sizes, by the names transformers' configs share (or map through attribute_map)
_GENERIC_SIZES = {
    "vocab_size": "vocab_size", "hidden_size": "hidden_size", "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads", "intermediate_size": "intermediate_size",
}
_CHECKED_SIZES = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
# the dropout fields of common model types: the preset's dropout goes into each the config has
_DROPOUTS = (
    "hidden_dropout_prob", "attention_probs_dropout_prob", "resid_pdrop", "embd_pdrop", "attn_pdrop",
    "attention_dropout", "embedding_dropout", "mlp_dropout", "hidden_dropout",
)

# the LM head up to its vocabulary projection (``get_output_embeddings()``), per model type; a head that is the
# projection alone (GPT-2, Llama, Qwen) needs no entry
_HEAD_FEATURES: dict[str, Callable[[Any, torch.Tensor], torch.Tensor]] = {
    "roberta": lambda m, h: m.lm_head.layer_norm(F.gelu(m.lm_head.dense(h))),
    "xlm-roberta": lambda m, h: m.lm_head.layer_norm(F.gelu(m.lm_head.dense(h))),
    "bert": lambda m, h: m.cls.predictions.transform(h),
    "modernbert": lambda m, h: m.head(h),
}
# model types whose position embeddings start after the padding index (``create_position_ids_from_input_ids``):
# position ids from a caller count from 0 and are moved there
_POSITION_OFFSET: dict[str, Callable[[Any], int]] = {
    "roberta": lambda c: c.pad_token_id + 1,
    "xlm-roberta": lambda c: c.pad_token_id + 1,
    "camembert": lambda c: c.pad_token_id + 1,
}


def _is_masked_class(cls: type) -> bool:
    return any(base.__name__.endswith("ForMaskedLM") for base in cls.__mro__)


class HfLanguageModel:
    """What antlm-bench adds to a stock transformers LM (mixed in before the stock class)."""

    config: PreTrainedConfig
    base_model: nn.Module

    @property
    def native_attention(self) -> str:
        """The attention the stock class has by itself."""
        return "bidirectional" if _is_masked_class(type(self)) else "causal"

    @property
    def default_attention_mode(self) -> str:
        return self.native_attention

    def _body_kwargs(self) -> dict[str, Any]:
        # no key/value cache (training and scoring read each batch once); asked once per class
        cls = type(self)
        if "_antlm_body_kwargs" not in cls.__dict__:
            accepts = inspect.signature(self.base_model.forward).parameters
            cls._antlm_body_kwargs = {"use_cache": False} if "use_cache" in accepts else {}
        return cls._antlm_body_kwargs

    def _model_mask(self, allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """A boolean [B, 1, T, T] mask (True = may attend) in the form the attention kernel takes: SDPA a boolean
        mask, the eager kernels an additive one."""
        if getattr(self.config, "_attn_implementation", "sdpa") == "sdpa":
            return allowed
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(
            ~allowed, torch.finfo(dtype).min)

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                      attention_mode: str | None = None, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """[B, T, H]: the body's last hidden states. ``attention_mask``: [B, T] padding, or a [B, 1, T, T] boolean
        mask (True = may attend) used as given with ``position_ids`` [B, T] counted from 0."""
        mode = attention_mode or self.native_attention
        check_mode(mode)
        batch, length = input_ids.shape
        dtype = self.get_input_embeddings().weight.dtype
        mask: torch.Tensor | None
        if attention_mask is not None and attention_mask.dim() == 4:
            mask = self._model_mask(attention_mask.bool().expand(batch, 1, length, length), dtype)
        elif mode == self.native_attention:
            mask = attention_mask  # the model's own masking: its fastest path
        else:
            allowed = full_mask(attention_mask, mode, length, input_ids.device)
            if allowed is None:  # bidirectional without padding, on a decoder: say so, or it stays causal
                allowed = torch.ones(1, 1, length, length, dtype=torch.bool, device=input_ids.device)
            mask = self._model_mask(allowed.expand(batch, 1, length, length), dtype)
        kwargs = dict(self._body_kwargs())
        if position_ids is not None:
            offset = _POSITION_OFFSET.get(self.config.model_type)
            kwargs["position_ids"] = position_ids + offset(self.config) if offset else position_ids
        out = self.base_model(input_ids=input_ids, attention_mask=mask, **kwargs)
        return out[0] if isinstance(out, tuple) else out.last_hidden_state

    def lm_features(self, hidden: torch.Tensor) -> torch.Tensor:
        """The LM head up to its vocabulary projection."""
        features = _HEAD_FEATURES.get(self.config.model_type)
        return hidden if features is None else features(self, hidden)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.get_output_embeddings()(self.lm_features(hidden))


_CLASSES: dict[type, type] = {}


def antlm_class(stock: type[PreTrainedModel]) -> type[PreTrainedModel]:
    """The stock class with :class:`HfLanguageModel` mixed in, under the stock name: ``save_pretrained`` records
    that name in ``architectures``, so the folder is the stock class's own."""
    if stock not in _CLASSES:
        _CLASSES[stock] = type(stock.__name__, (HfLanguageModel, stock), {
            "__module__": stock.__module__, "__qualname__": stock.__qualname__,
            "__doc__": f"{stock.__name__} with antlm-bench's per-phase attention (antlm_bench.models.hf)",
        })
    return _CLASSES[stock]


def stock_class(config: PreTrainedConfig) -> type[PreTrainedModel]:
    """The transformers class a config names (``architectures``), else the masked LM of its model type if it has
    one, else its causal LM."""
    for name in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, name, None)
        if isinstance(cls, type) and issubclass(cls, PreTrainedModel):
            return cls
    model_type = config.model_type
    name = MODEL_FOR_MASKED_LM_MAPPING_NAMES.get(model_type) or MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    if name is None:
        raise UserError(f"architecture hf: model_type {model_type!r} has neither a masked nor a causal LM class in "
                        "transformers; name one that has (gpt2, roberta, llama, ...)")
    return getattr(transformers, name)


# ------------------------------------------------------------------------------------------------------------
# the mask check: once per class


def _close(ours: torch.Tensor, reference: torch.Tensor) -> bool:
    scale = max(1.0, float(reference.abs().max()))
    return ours.shape == reference.shape and float((ours - reference).abs().max()) <= 1e-4 * scale


def _packed_mask(lengths: tuple[int, int], mode: str) -> torch.Tensor:
    """A [1, 1, T, T] block-diagonal mask: each sequence sees only itself (causally or not)."""
    total = sum(lengths)
    mask = torch.zeros(total, total, dtype=torch.bool)
    start = 0
    for n in lengths:
        block = torch.ones(n, n, dtype=torch.bool)
        mask[start : start + n, start : start + n] = block.tril() if mode == "causal" else block
        start += n
    return mask[None, None]


def _window(config: PreTrainedConfig) -> int:
    """The sliding-window width the config's attention uses somewhere (0: none)."""
    layer_types = getattr(config, "layer_types", None) or []
    if layer_types and all(kind == "full_attention" for kind in layer_types):
        return 0
    widths = [getattr(config, name, None) for name in ("sliding_window", "local_attention", "attention_window")]
    return max([width for width in widths if isinstance(width, int) and width > 0], default=0)


def mask_problem(model: HfLanguageModel) -> str | None:
    """Why ``model`` cannot switch attention per phase, or None when it can.

    Two sequences packed in one row under a block-diagonal 4-D mask, with position ids restarting at the second,
    must give each sequence's own hidden states: in the native mode against the stock forward without any mask,
    in the other mode against that mode on each sequence alone (and the other mode must differ from the native
    one). And the head split (``lm_logits(hidden_states(x))``) must give the stock forward's logits.
    """
    config = model.config
    vocab = int(config.vocab_size)
    generator = torch.Generator().manual_seed(0)
    low = 5 if vocab > 10 else 0  # keep clear of the usual special ids (padding shifts RoBERTa's positions)
    device = model.get_input_embeddings().weight.device
    # sequences longer than a sliding window, where the config has one: a 4-D mask that silently replaces the
    # window (ModernBERT's local layers, Mistral) must show up here
    n = 6 + _window(config)
    first = torch.randint(low, vocab, (1, n), generator=generator).to(device)
    second = torch.randint(low, vocab, (1, n - 1), generator=generator).to(device)
    packed = torch.cat([first, second], dim=1)
    positions = torch.cat([torch.arange(n), torch.arange(n - 1)])[None].to(device)
    native = model.native_attention
    other = "causal" if native == "bidirectional" else "bidirectional"
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = model(input_ids=first).logits.float()
            if not _close(model.lm_logits(model.hidden_states(first)).float(), logits):
                return "its LM head is not the layout antlm-bench knows for this model type"
            for mode in (native, other):
                alone = [model.hidden_states(ids, attention_mode=mode).float()[0] for ids in (first, second)]
                mask = _packed_mask((n, n - 1), mode).to(device)
                together = model.hidden_states(packed, mask, mode, positions).float()[0]
                if not (_close(together[:n], alone[0]) and _close(together[n:], alone[1])):
                    return f"a 4-D {mode} mask with position ids does not give each packed sequence its own states"
                if mode == other:
                    if _close(alone[0], model.hidden_states(first, attention_mode=native).float()[0]):
                        return f"{mode} attention gives the same states as {native}"
    except (RuntimeError, ValueError, TypeError, IndexError) as err:
        return f"it rejects a 4-D mask with position ids ({one_line(err, 160, typed=True)})"
    finally:
        model.train(was_training)
    return None


_CHECKED: dict[tuple[type, int], str | None] = {}


def check_masks(model: HfLanguageModel) -> None:
    """Refuse, with one line, a model class that does not honour a 4-D mask (checked once per class and
    sliding-window width)."""
    key = (type(model), _window(model.config))
    cls = key[0]
    if key not in _CHECKED:
        if next(model.parameters()).device.type == "meta":
            return  # nothing to compute on (parameter counts); the real build checks
        _CHECKED[key] = mask_problem(model)
    problem = _CHECKED[key]
    if problem is not None:
        raise UserError(f"architecture hf: {cls.__name__} (model_type {model.config.model_type}) cannot switch "
                        f"attention per phase: {problem}; pick another model_type")


# ------------------------------------------------------------------------------------------------------------
# the backend


def make_config(preset: Preset, special_ids: dict[str, int | None]) -> PreTrainedConfig:
    """The transformers config of ``preset.hf_config`` with the preset's sizes, dropout and special tokens."""
    fields = dict(preset.hf_config)
    model_type = fields.pop("model_type", None)
    if not isinstance(model_type, str):
        raise UserError("architecture hf: the preset's hf_config needs model_type (a transformers model type such "
                        "as gpt2 or roberta)")
    try:
        defaults = AutoConfig.for_model(model_type)
    except (ValueError, KeyError) as err:
        raise UserError(f"architecture hf: hf_config.model_type {model_type!r}: {one_line(err, 200)}") from None
    known = set(defaults.to_dict()) | set(getattr(defaults, "attribute_map", {}))
    values: dict[str, Any] = {}
    for ours, theirs in _GENERIC_SIZES.items():
        if theirs in known:
            values[theirs] = getattr(preset, ours)
    values.update({name: preset.dropout for name in _DROPOUTS if name in known})
    values["tie_word_embeddings"] = preset.tie_word_embeddings
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "mask_token_id"):
        value = special_ids.get(key)
        default = getattr(defaults, key, None)
        # no tokenizer (parameter counts): GPT-2's own 50256 would point outside a small vocabulary
        if value is not None or isinstance(default, int) and default >= preset.vocab_size:
            values[key] = value
    # the recipe's own fields win, also under their model-specific names (GPT-2's n_layer for num_hidden_layers)
    aliases = getattr(defaults, "attribute_map", {})
    for name in list(values):
        if aliases.get(name) in fields:
            del values[name]
    values.update(fields)
    try:
        config = AutoConfig.for_model(model_type, **values)
    except (ValueError, TypeError) as err:
        raise UserError(f"architecture hf: hf_config for {model_type}: {one_line(err, 200)}") from None
    for name in _CHECKED_SIZES:
        preset_name = next(k for k, v in _GENERIC_SIZES.items() if v == name)
        if getattr(config, name, None) != getattr(preset, preset_name):
            raise UserError(f"architecture hf: hf_config gives {name} = {getattr(config, name, None)} but the preset "
                            f"says {preset_name}: {getattr(preset, preset_name)}; make them agree")
    config.antlm_architecture = ARCHITECTURE
    config.architectures = [stock_class(config).__name__]
    return config


class HfBackend(Backend):
    """Any transformers causal or masked LM (the registry entry `architecture: hf` names)."""

    @staticmethod
    def make_config(preset: Preset, special_ids: dict[str, int | None]) -> PreTrainedConfig:
        return make_config(preset, special_ids)

    @staticmethod
    def masked_lm(config: Any) -> bool:
        names = config.get("architectures") if isinstance(config, dict) else getattr(config, "architectures", None)
        return any(str(name).endswith("ForMaskedLM") for name in names or [])

    @staticmethod
    def build(config: PreTrainedConfig) -> PreTrainedModel:
        model = antlm_class(stock_class(config))(config)
        check_masks(model)
        return model

    @staticmethod
    def load_lm(path: str | Path, **kwargs: Any) -> Any:
        config = AutoConfig.from_pretrained(str(path))
        loaded = antlm_class(stock_class(config)).from_pretrained(str(path), **kwargs)
        check_masks(loaded[0] if isinstance(loaded, tuple) else loaded)
        return loaded

    @staticmethod
    def load_classifier(path: str | Path, **kwargs: Any) -> PreTrainedModel:
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification.from_pretrained(str(path), **kwargs)


__all__ = ["ARCHITECTURE", "HfBackend", "HfLanguageModel", "antlm_class", "check_masks", "make_config",
           "mask_problem", "stock_class"]
