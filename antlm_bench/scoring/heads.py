"""The LM head of a plain Hugging Face model, found and checked: the module that owns the output embedding (or an
entry of ``_SPLIT_HEADS`` for heads spread over several children), the logit transforms a config declares, and
the check that ``head(hidden(ids))`` equals the model's own logits, also where they are large."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from antlm_bench.scoring.model import ScoringModel

# heads made of several children of the top model: (the child that first sees the hidden states, composition)
_SPLIT_HEADS: dict[str, tuple[str, Callable[[nn.Module, torch.Tensor], torch.Tensor]]] = {
    "DistilBertForMaskedLM": (
        "vocab_transform", lambda m, h: m.vocab_projector(m.vocab_layer_norm(m.activation(m.vocab_transform(h))))),
    "ModernBertForMaskedLM": ("head", lambda m, h: m.decoder(m.head(h))),
    "ElectraForMaskedLM": ("generator_predictions", lambda m, h: m.generator_lm_head(m.generator_predictions(h))),
}


def find_head(model: nn.Module) -> tuple[Callable[[torch.Tensor], torch.Tensor], nn.Module] | None:
    """(head function, the module that first receives the hidden states), if the model's head is found."""
    for cls in type(model).__mro__:
        if cls.__name__ in _SPLIT_HEADS:
            entry, recipe = _SPLIT_HEADS[cls.__name__]
            return functools.partial(recipe, model), getattr(model, entry)
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if output is None:
        return None
    base = model.base_model
    owners = []
    for _, child in model.named_children():
        if child is base:
            continue
        if child is output or any(module is output for module in child.modules()):
            owners.append(child)
    return (owners[0], owners[0]) if len(owners) == 1 else None


def with_config_transforms(model: nn.Module, head: Callable[[torch.Tensor], torch.Tensor]
                            ) -> Callable[[torch.Tensor], torch.Tensor]:
    """What some models do to the head's logits in their forward, as their config declares it (checked after)."""
    config = model.config
    cap = getattr(config, "final_logit_softcapping", None)  # Gemma 2 / 3
    scale = getattr(config, "logit_scale", None)  # Cohere
    divisor = getattr(config, "logits_scaling", None)  # Granite
    if not (cap or isinstance(scale, (int, float)) and scale != 1 or isinstance(divisor, (int, float)) and divisor != 1):
        return head

    def transformed(hidden: torch.Tensor) -> torch.Tensor:
        logits = head(hidden)
        if isinstance(scale, (int, float)) and scale != 1:
            logits = logits * scale
        if isinstance(divisor, (int, float)) and divisor != 1:
            logits = logits / divisor
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits

    return transformed


def logits_close(ours: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype) -> bool:
    if ours.shape != reference.shape:
        return False
    tolerance = 1e-4 if dtype == torch.float32 else 2e-2
    return float((ours - reference).abs().max()) <= tolerance * max(1.0, float(reference.abs().max()))


def head_self_check(sm: ScoringModel, entry: nn.Module) -> bool:
    """The model's own forward equals ``head(hidden(ids))``, also where its logits are large.

    First on a short random input: the body's output reaches the head unchanged. Then with the head's input
    swapped (a hook) for large random hidden states: nothing after the head changes the logits. Logit
    soft-capping (Gemma 2) or scaling is invisible on a freshly initialised model's small logits, not there.
    """
    module = sm.module
    dtype = next(module.parameters()).dtype
    generator = torch.Generator().manual_seed(0)
    vocab = module.get_output_embeddings().weight.shape[0]
    ids = torch.randint(0, vocab, (2, 7), generator=generator).to(sm.device)
    probe: dict[str, torch.Tensor] = {}

    def swap(_module: nn.Module, args: tuple) -> tuple | None:
        if "busy" in probe:  # our own head call below passes through this hook too
            return None
        probe["busy"] = args[0]
        noise = torch.randn(args[0].shape, generator=generator).to(args[0].device, args[0].dtype)
        spread = sm.head(noise).float().std().clamp_min(1e-6)  # scaled so the logits spread over about +-100
        probe["hidden"] = noise * (50.0 / spread).to(noise.dtype)
        return (probe["hidden"], *args[1:])

    try:
        with torch.inference_mode():
            if not logits_close(sm.head(sm.hidden(ids, None, sm.modes[0])).float(),
                                module(input_ids=ids).logits.float(), dtype):
                return False
            handle = entry.register_forward_pre_hook(swap)
            try:
                reference = module(input_ids=ids).logits.float()
            finally:
                handle.remove()
            if "hidden" not in probe:
                return False
            return logits_close(sm.head(probe["hidden"]).float(), reference, dtype)
    except Exception:  # noqa: BLE001  (any failure means: do not trust the split)
        return False

