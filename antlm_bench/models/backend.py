"""What a model backend is: the abstract base class every backend derives from, and the backend of a config.

A recipe's ``architecture:`` names a backend in ``antlm_bench.registry.BACKENDS`` (the shipped ones there as
"module:Class" strings, imported on first lookup; plug-ins through the entry-point group ``antlm_bench.backends``;
docs/backends.md). A backend is used as a class, never instantiated: every member below is a class attribute or a
class-level method, declared here with its default, so that callers call it without asking whether it exists.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, cast

from transformers import PreTrainedConfig, PreTrainedModel

from antlm_bench.recipes import Preset
from antlm_bench.registry import BACKENDS


class Backend(ABC):
    """How a recipe preset becomes a model, and how a checkpoint of that model loads.

    A subclass sets ``lm_class`` and ``classifier_class``, or overrides the methods that use them (``build`` and
    ``load_lm``; ``load_classifier``) when the class depends on the config; it is refused when it does neither.
    """

    lm_class: ClassVar[type[PreTrainedModel] | None] = None  # the LM: build() and load_lm() use it
    classifier_class: ClassVar[type[PreTrainedModel] | None] = None  # sequence classification: load_classifier()
    is_masked_lm: ClassVar[bool] = False  # an encoder (PLL scoring by default, first-token pooling); masked_lm()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.lm_class is None and not (_overrides(cls, "build") and _overrides(cls, "load_lm")):
            raise TypeError(f"backend {cls.__qualname__}: set lm_class, or override both build and load_lm")
        if cls.classifier_class is None and not _overrides(cls, "load_classifier"):
            raise TypeError(f"backend {cls.__qualname__}: set classifier_class, or override load_classifier")

    @staticmethod
    @abstractmethod
    def make_config(preset: Preset, special_ids: dict[str, int | None]) -> PreTrainedConfig:
        """The model config of a recipe preset; it records ``antlm_architecture`` (the backend's registry name)."""

    @classmethod
    def build(cls, config: PreTrainedConfig) -> PreTrainedModel:
        """A freshly initialised LM of ``config``."""
        return cast(type[PreTrainedModel], cls.lm_class)(config)

    @classmethod
    def load_lm(cls, path: str | Path, **kwargs: Any) -> Any:
        """The LM saved in ``path`` (``kwargs`` go to ``from_pretrained``, which returns (model, loading info) when
        they ask for it)."""
        return cast(type[PreTrainedModel], cls.lm_class).from_pretrained(str(path), **kwargs)

    @classmethod
    def load_classifier(cls, path: str | Path, **kwargs: Any) -> PreTrainedModel:
        """The sequence-classification model on the encoder saved in ``path`` (a fresh head)."""
        return cast(type[PreTrainedModel], cls.classifier_class).from_pretrained(str(path), **kwargs)

    @classmethod
    def masked_lm(cls, config: Any) -> bool:
        """Whether a model of ``config`` (a config object or config.json's dict) is an encoder."""
        return cls.is_masked_lm

    @classmethod
    def remote_code(cls, config: Any) -> tuple[dict[str, str], dict[str, str]] | None:
        """``({file name: source}, auto_map)``: the modeling code a checkpoint carries so that transformers loads it
        with ``trust_remote_code=True`` and without antlm-bench (models/remote_code.py); None when transformers'
        own classes load it."""
        return None


def _overrides(cls: type[Backend], name: str) -> bool:
    """Whether ``cls`` or a base between it and Backend defines ``name``."""
    mro = cls.__mro__
    return any(name in vars(base) for base in mro[: mro.index(Backend)])


def backend_named(architecture: str, where: str) -> type[Backend]:
    """The backend registered as ``architecture`` (shipped or from a plug-in); ``where`` starts the line that
    refuses an unknown name."""
    return cast(type[Backend], BACKENDS.get(architecture, where))


def backend_of(config: Any) -> type[Backend] | None:
    """The registered backend that made a model of ``config`` (a config object or config.json's dict, by its
    ``antlm_architecture``); None for a model no registered backend made (a plain Hugging Face model)."""
    architecture = config.get("antlm_architecture") if isinstance(config, dict) else getattr(
        config, "antlm_architecture", None)
    if not isinstance(architecture, str) or architecture not in BACKENDS.names():
        return None
    return backend_named(architecture, "antlm_architecture")


__all__ = ["Backend", "backend_named", "backend_of"]
