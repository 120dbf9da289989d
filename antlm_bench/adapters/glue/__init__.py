"""GLUE: fine-tuning (and frozen-feature probing) of any language model on sentence(-pair) classification, and
the ``GlueTask`` adapter that runs it on the members of ``tasks/glue.yaml``. It owns the examples and their
deterministic splits (``data``), tokenization and batching (``encoding``), the classifier (``model``), the run's
settings and outcome (``settings``), inference passes (``inference``), the training loop with model selection on a
held-out slice of the training split (``loop``), the probe (``probing``), and on the task side the spec's shape
(``spec``), reading a member's files (``members``), result rows and notes (``report``), terminal progress
(``progress``) and the adapter itself (``task``). It may import ``adapters.base``, ``models``, ``scoring``,
``data``, ``results.tables`` and ``results.stats`` (the row schema and intervals), ``errors``, ``registry`` and
``tasks``; never ``cli``, ``pipeline``, ``training`` or the leaderboard. Its old import path
``antlm_bench.finetune`` is an alias of this package, so every name below stays importable from both.
"""

from __future__ import annotations

from antlm_bench.adapters.glue.data import (
    Example,
    SealedSplit,
    Splits,
    hash_order,
    hash_unit,
    make_splits,
    split_by_key,
)
from antlm_bench.adapters.glue.encoding import (
    Batch,
    Encoded,
    PairEncoder,
    _truncate_longest_first,
    collate,
    length_grouped_batches,
    pad_token_id,
    shuffled_batches,
    sorted_batches,
)
from antlm_bench.adapters.glue.inference import pooled_features, predict_logits
from antlm_bench.adapters.glue.loop import cosine_with_warmup, finetune
from antlm_bench.adapters.glue.members import MemberData
from antlm_bench.adapters.glue.model import (
    ENCODER_MODEL_TYPES,
    Backbone,
    ClassifierHead,
    SequenceClassifier,
    fresh_copy,
    max_positions,
    model_kind,
    pool,
)
from antlm_bench.adapters.glue.probing import PROBE_C_GRID, probe
from antlm_bench.adapters.glue.settings import EpochLog, FinetuneSettings, MemberOutcome, classification_metrics
from antlm_bench.adapters.glue.spec import OPTION_KEYS, DataSpec, Hyper, MemberSpec, SplitValid
from antlm_bench.adapters.glue.task import GlueTask

__all__ = [
    "ENCODER_MODEL_TYPES", "OPTION_KEYS", "PROBE_C_GRID", "Backbone", "Batch", "ClassifierHead", "DataSpec",
    "Encoded", "EpochLog", "Example", "FinetuneSettings", "GlueTask", "Hyper", "MemberData", "MemberOutcome",
    "MemberSpec", "PairEncoder", "SealedSplit", "SequenceClassifier", "SplitValid", "Splits",
    "_truncate_longest_first", "classification_metrics", "collate", "cosine_with_warmup", "finetune", "fresh_copy",
    "hash_order", "hash_unit", "length_grouped_batches", "make_splits", "max_positions", "model_kind",
    "pad_token_id", "pool", "pooled_features", "predict_logits", "probe", "shuffled_batches", "sorted_batches",
    "split_by_key",
]
