"""Model backends: a recipe preset -> a model, checkpoints -> a model, and parameter counts.

Each backend lives in one file (``babyllama.py``, ``ltgbert.py``, ``hf.py``) as a subclass of
:class:`~antlm_bench.models.backend.Backend` (``backend.py``: every member a backend has, with its default), named in
``antlm_bench.registry.BACKENDS`` under the name that recipes give as ``architecture:`` and imported on first
lookup; other packages add backends through the entry-point group ``antlm_bench.backends`` (docs/backends.md).
Every dispatch goes through that registry and calls the backend's methods:

- ``make_config(preset, special_ids)``: the model config of a recipe preset (it records ``antlm_architecture``);
- ``build(config)``, ``load_lm(path, **kwargs)``, ``load_classifier(path, **kwargs)``: by default from
  ``lm_class`` and ``classifier_class``; a backend whose class depends on the config overrides them (``hf``);
- ``masked_lm(config)``: whether the model is an encoder, by default the class attribute ``is_masked_lm``;
- ``remote_code(config) -> (files, auto_map) | None``: the modeling code a checkpoint carries so that
  transformers loads it with ``trust_remote_code=True`` and without antlm-bench (``checkpoint.py`` writes it).

Beside the backends: ``masks`` (the attention masks of both attention modes), ``loss`` (the head fused with the
cross-entropy), ``precision`` (float32 or bf16 autocast, decided once for training, scoring and GLUE), ``threads``
(how many CPU threads torch gets for a model) and ``remote_code`` (the modeling files a checkpoint carries).

Importing this package also registers LTG-BERT with transformers' Auto classes.

Both LM classes offer ``hidden_states(input_ids, attention_mask, attention_mode, position_ids)``,
``lm_logits(hidden)`` (= ``get_output_embeddings()(lm_features(hidden))``: ``lm_features`` is the head up to its
vocabulary projection, which the training loss fuses with the cross-entropy, ``models/loss.py``) and
``forward(input_ids, attention_mask, attention_mode, labels, label_shift, return_logits)``. ``attention_mask`` is
[B, T] padding, or a [B, 1, T, T] boolean mask used as given together with ``position_ids`` (packed or
prefix-tree rows, as clm scoring builds them).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from antlm_bench.data.readers import read_json
from antlm_bench.errors import UserError, one_line
from antlm_bench.models.babyllama import BabyLlamaForCausalLM, BabyLlamaForSequenceClassification
from antlm_bench.models.backend import backend_named, backend_of
from antlm_bench.models.ltgbert import (
    LtgBertConfig,
    LtgBertForCausalLM,
    LtgBertForMaskedLM,
    LtgBertForSequenceClassification,
)
from antlm_bench.recipes import ResolvedPreset


def masked_by_config(config: Any) -> bool | None:
    """Whether a model of this config (a config object or config.json's dict) is an encoder, as its backend says;
    None when no registered backend made it (a plain Hugging Face model: the caller reads its class names)."""
    chosen = backend_of(config)
    return None if chosen is None else bool(chosen.masked_lm(config))


def special_token_ids(tokenizer: PreTrainedTokenizerBase | None) -> dict[str, int | None]:
    if tokenizer is None:
        return {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None, "mask_token_id": None}
    return {
        "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id, "mask_token_id": tokenizer.mask_token_id,
    }


def build_model(preset: ResolvedPreset, tokenizer: PreTrainedTokenizerBase | None = None) -> PreTrainedModel:
    """A freshly initialised LM for a recipe at ``preset`` (seed torch first for reproducible weights).

    The embedding has the preset's vocabulary size; the tokenizer must not be larger (a BPE trained on a small
    corpus may be smaller: the unused rows are never targets).
    """
    sizes, recipe = preset.spec, preset.recipe
    if tokenizer is not None and len(tokenizer) > sizes.vocab_size:
        raise UserError(
            f"{preset.where}: tokenizer has {len(tokenizer)} tokens but vocab_size is "
            f"{sizes.vocab_size}; retrain the tokenizer at that size or raise presets.{preset.name}.vocab_size"
        )
    chosen = backend_named(recipe.architecture, f"recipe {recipe.name}: architecture")
    return chosen.build(chosen.make_config(sizes, special_token_ids(tokenizer)))


def count_parameters(preset: ResolvedPreset) -> int:
    """Trainable parameters of the preset's model (tied weights once), built on the meta device: no memory used."""
    with torch.device("meta"):
        model = build_model(preset, None)
    return sum(p.numel() for p in model.parameters())


# what building a model from a user's folder raises for a bad file: a wrong-typed config field (TypeError, or
# huggingface_hub's strict-dataclass error), an impossible size (ValueError, ZeroDivisionError), a truncated or
# corrupt weights file (SafetensorError, OSError), tensors of another shape (RuntimeError)
_LOAD_ERRORS: tuple[type[BaseException], ...] = (
    OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, ZeroDivisionError, RuntimeError,
    pickle.UnpicklingError, EOFError,
)
try:
    from huggingface_hub.errors import StrictDataclassError

    _LOAD_ERRORS += (StrictDataclassError,)
except ImportError:  # older huggingface_hub: no strict config dataclasses, nothing more to catch
    pass
try:
    from safetensors import SafetensorError

    _LOAD_ERRORS += (SafetensorError,)
except ImportError:
    pass


# config fields that count something a model has at least one of
_SIZES = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size",
          "max_position_embeddings", "num_key_value_heads")


def check_finite_weights(model: torch.nn.Module, path: Path) -> None:
    """Refuse a model whose parameters hold NaN or inf before anything is scored with it (every score of it
    would be NaN, or a plausible-looking number)."""
    for name, parameter in model.named_parameters():
        finite = torch.isfinite(parameter.detach())
        if not bool(finite.all()):
            bad = parameter.detach()[~finite]
            what = "NaN" if bool(torch.isnan(bad).any()) else "infinite"
            raise UserError(f"{path}: weights {name} hold {what} values ({bad.numel()} of {parameter.numel()}), "
                            "which give NaN log-probabilities; score another checkpoint (or re-train this one)")


def _read_config(path: Path) -> dict[str, Any]:
    config_file = path / "config.json"
    if not config_file.is_file():
        raise UserError(f"{path}: no config.json; pass a Hugging Face model folder (an antlm-bench checkpoint)")
    config = read_json(config_file, "corrupt config", "re-save the checkpoint", follow_links=True)
    if not isinstance(config, dict):
        raise UserError(f"{config_file}: corrupt config (a JSON {type(config).__name__}, not an object); "
                        "re-save the checkpoint")
    for key in ("antlm_architecture", "model_type"):
        if key in config and not isinstance(config[key], str):
            raise UserError(f"{config_file}: field {key} must be a string, got {config[key]!r}; re-save the checkpoint")
    for key in _SIZES:  # -1 layers would build a model of no layers, and score it
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise UserError(f"{config_file}: field {key} is {value}; a model needs at least 1; fix the field or "
                            "re-save the checkpoint")
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if (isinstance(hidden, int) and isinstance(heads, int) and not isinstance(hidden, bool)
            and not isinstance(heads, bool) and heads > 0 and hidden % heads):
        raise UserError(f"{config_file}: hidden_size {hidden} is not divisible by num_attention_heads {heads}; "
                        "fix the fields or re-save the checkpoint")
    if "architectures" in config and not (isinstance(config["architectures"], list)
                                          and all(isinstance(name, str) for name in config["architectures"])):
        raise UserError(f"{config_file}: field architectures must be a list of class names, got "
                        f"{config['architectures']!r}; re-save the checkpoint")
    return config


def load_config(path: str | Path) -> Any:
    """The folder's model config as transformers reads it; a ``UserError`` naming config.json and the field when
    a value has the wrong type or size (transformers checks field types strictly)."""
    path = Path(path)
    _read_config(path)
    try:
        return AutoConfig.from_pretrained(str(path))
    except _LOAD_ERRORS as err:
        raise UserError(f"{path / 'config.json'}: unusable config ({one_line(err, 240)}); fix the field or re-save the "
                        "checkpoint") from None


def is_masked_lm(path: str | Path) -> bool:
    """Whether the checkpoint is an encoder (scored with PLL by default) rather than a decoder."""
    config = _read_config(Path(path))
    masked = masked_by_config(config)
    if masked is not None:
        return masked
    return any(name.endswith("ForMaskedLM") for name in config.get("architectures") or [])


def load_model(path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
               task: str = "lm", num_labels: int | None = None) -> PreTrainedModel:
    """Load a checkpoint in eval mode: our class for antlm-bench checkpoints, a transformers Auto class otherwise.

    ``task="classification"`` builds the backend's sequence-classification class on the checkpoint's encoder
    (``num_labels`` outputs, a fresh head).
    """
    path = Path(path)
    config = _read_config(path)
    load_config(path)  # a bad field is named here, before any weights are read
    chosen = backend_of(config)
    lm = {"dtype": dtype, "output_loading_info": True}  # an LM with a weight missing is not the checkpoint
    try:
        if chosen is not None:
            if task == "classification":
                model = chosen.load_classifier(path, dtype=dtype, num_labels=num_labels or 2)
            else:
                model, info = chosen.load_lm(path, **lm)
        elif task == "classification":
            from transformers import AutoModelForSequenceClassification

            model = AutoModelForSequenceClassification.from_pretrained(path, dtype=dtype, num_labels=num_labels or 2)
        elif is_masked_lm(path):
            model, info = AutoModelForMaskedLM.from_pretrained(path, **lm)
        else:
            model, info = AutoModelForCausalLM.from_pretrained(path, **lm)
    except _LOAD_ERRORS as err:
        if isinstance(err, (pickle.UnpicklingError, EOFError)) or "Weights only load failed" in str(err):
            raise UserError(f"{path}: the weights file is a pickle that is not plain tensors, or a damaged one "
                            f"({type(err).__name__}); only safetensors and weights-only .bin files are loaded: "
                            "re-save the checkpoint as model.safetensors") from None
        if type(err).__name__ == "SafetensorError":
            weights = ", ".join(sorted(p.name for p in path.glob("*.safetensors"))) or "the weights"
            raise UserError(f"{path}/{weights}: truncated or corrupt ({one_line(err, 240)}); re-save or re-download "
                            "the checkpoint") from None
        if "ignore_mismatched_sizes" in str(err):  # transformers' own line points at a report we do not print
            raise UserError(f"{path}: the weights have other shapes than config.json describes; re-save the "
                            "checkpoint") from None
        raise UserError(f"{path}: cannot load the model ({one_line(err, 240, typed=True)}); is the "
                        "checkpoint complete?") from None
    if task != "classification":
        # transformers fills a missing weight with fresh random values and only logs it: scores of such a model
        # would be scores of no checkpoint
        missing = list(info.get("missing_keys") or []) + [str(k) for k in info.get("mismatched_keys") or []]
        if missing:
            raise UserError(f"{path}: the weights file lacks {len(missing)} tensor(s) the model needs (e.g. "
                            f"{', '.join(sorted(missing)[:3])}); re-save the checkpoint")
    check_finite_weights(model, path)
    return model.to(device).eval()

__all__ = [
    "AutoConfig", "BabyLlamaForCausalLM", "BabyLlamaForSequenceClassification", "LtgBertConfig",
    "LtgBertForCausalLM", "LtgBertForMaskedLM", "LtgBertForSequenceClassification", "build_model",
    "check_finite_weights", "count_parameters", "masked_by_config", "is_masked_lm", "load_config", "load_model", "special_token_ids",
]
