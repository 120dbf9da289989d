"""The GLUE protocol: how a member is fine-tuned and which split picks its best epoch, decided once per task run.

- ``default``: the best epoch is chosen on a held-out slice of the *training* split (``dev_fraction``), the reported
  split stays sealed until then; encoders pool the first token, decoders the last real token (``pooling: auto``).
  Honest model selection, at the cost of the slice's training examples.
- ``babylm-official``: what the BabyLM 2025 pipeline's ``eval_finetuning.sh`` runs
  (``evaluation_pipeline/finetune``): every training example is trained on, and the best epoch is the one that
  scores best on the reported validation split itself (``--valid_data`` and ``--predict_data`` are the same file);
  the classifier reads the first position for every model (``classifier_model.py`` without ``--take_final``);
  attention is the model's own (``AutoModel`` with a padding mask and without ``--causal``: causal for a decoder,
  bidirectional for an encoder), so a decoder's first position sees the first token only; batches are plain
  shuffles. The reported number is the best of the epochs on that split: optimistic, comparable with BabyLM
  submissions and not with the default protocol's, hence its own ``scoring`` value.

Differences that remain under ``babylm-official`` (too small to move numbers beyond seed noise, or not reproducible
here): the official loader drops the last incomplete training batch and its warm-up starts at 0 instead of 1/warm-up
steps; a tokenizer without a pair template gets ``a <sep> b`` here, plain ``a b`` there; the input is cut to the
model's position limit where the official script would fail; BoolQ and MultiRC train on part of their valid file
(the data ships no training file for them, the official pipeline has one); precision follows the rule training follows (``--glue-precision``, ``models.precision``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from antlm_bench.adapters.glue.data import Example, SealedSplit, Splits, hash_order, make_splits
from antlm_bench.adapters.glue.finetune import FinetuneSettings
from antlm_bench.errors import UserError


@dataclass(frozen=True)
class GlueProtocol:
    """One way of fine-tuning and selecting; ``scoring`` is what its rows record, so that the board and ``check``
    never put two protocols side by side."""

    name: str
    scoring: str
    select_on_reported: bool  # the best epoch by the reported split itself (else a slice of the training split)
    pooling: str | None  # the pooling every model gets; None: the settings' own (auto: by the model's kind)
    attention: str | None  # likewise for the attention
    length_grouped: bool | None  # likewise for length-grouped batches
    allows_probe: bool
    summary: str  # one clause for the run's notes

    def settings(self, settings: FinetuneSettings, member: str) -> FinetuneSettings:
        """``settings`` under this protocol; a setting that contradicts it is one line naming both."""
        if settings.probe and not self.allows_probe:
            raise UserError(f"glue/{member}: probe=true is not part of the {self.name} protocol (it fine-tunes); "
                            "drop --probe or use --glue-protocol default")
        forced = {"pooling": self.pooling, "attention": self.attention}
        for key, value in forced.items():
            given = getattr(settings, key)
            if value is not None and given not in ("auto", value):
                raise UserError(f"glue/{member}: {key}={given} contradicts the {self.name} protocol ({key}="
                                f"{value}); drop the option or use --glue-protocol default")
        chosen = {k: v for k, v in {**forced, "length_grouped": self.length_grouped}.items() if v is not None}
        return replace(settings, **chosen, scoring=self.scoring)

    def splits(self, train: Sequence[Example], report: Sequence[Example], settings: FinetuneSettings,
               name: str) -> Splits:
        """The training examples, the examples that pick the best epoch, and the sealed reported split."""
        if not self.select_on_reported:
            splits = make_splits(train, report, settings.dev_fraction, settings.max_train_examples, name)
            splits.notes.append(f"glue protocol {self.name}")
            return splits
        notes = [f"glue protocol {self.name}: best epoch chosen on the reported split itself, as the BabyLM 2025 "
                 "pipeline does (optimistic; not comparable with the default protocol)",
                 f"pooling={self.pooling} position, the model's own attention"]
        rest = list(train)
        if settings.max_train_examples is not None and settings.max_train_examples < len(rest):
            rest = hash_order(rest, salt=f"{name}/subsample")[: settings.max_train_examples]
            notes.append(f"max_train_examples={settings.max_train_examples}")
        return Splits(train=rest, dev=list(report), report=SealedSplit(report), notes=notes,
                      selected_on="reported")


DEFAULT = GlueProtocol(name="default", scoring="finetune", select_on_reported=False, pooling=None, attention=None,
                       length_grouped=None, allows_probe=True,
                       summary="best epoch on a slice of the training split; pooling and attention by the model's kind")
BABYLM_OFFICIAL = GlueProtocol(name="babylm-official", scoring="finetune-official", select_on_reported=True,
                               pooling="first", attention="auto", length_grouped=False, allows_probe=False,
                               summary="as the BabyLM 2025 pipeline: best epoch on the reported split, first-position "
                                       "pooling and the model's own attention for every model; scoring "
                                       "finetune-official")
PROTOCOLS = {p.name: p for p in (DEFAULT, BABYLM_OFFICIAL)}


def glue_protocol(name: str | None) -> GlueProtocol:
    """The protocol called ``name`` (None: the default); an unknown name is one line listing the known ones."""
    if name is None:
        return DEFAULT
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise UserError(f"unknown GLUE protocol {name!r}; expected one of {', '.join(PROTOCOLS)}") from None
