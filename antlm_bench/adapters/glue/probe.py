"""Frozen-feature probing, what a GLUE task runs instead of fine-tuning under ``probe: true`` (``--probe``): pooled
features of the frozen backbone and a scikit-learn logistic regression (its C chosen on the dev slice).

Fast on a CPU; labelled ``probe`` wherever it is reported.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch
from torch import nn

from antlm_bench.adapters.glue.data import Splits
from antlm_bench.adapters.glue.encoding import Encoded, PairEncoder, collate, pad_token_id, sorted_batches
from antlm_bench.adapters.glue.finetune import (
    FinetuneSettings,
    MemberOutcome,
    autocast,
    check_labels,
    classification_metrics,
)
from antlm_bench.adapters.glue.model import Backbone, SequenceClassifier, max_positions
from antlm_bench.errors import UserError

PROBE_C_GRID = (0.01, 0.1, 1.0, 10.0)


@torch.inference_mode()
def pooled_features(
    model: SequenceClassifier, encoded: Encoded, pad_id: int, batch_size: int, settings: FinetuneSettings
) -> np.ndarray:
    """Pooled features [n, hidden] of the frozen backbone, in the examples' order."""
    device = torch.device(settings.device)
    model.eval()
    out: np.ndarray | None = None
    for indices in sorted_batches(encoded.lengths, batch_size, settings.eval_batch_tokens):
        batch = collate(encoded, indices, pad_id).to(device)
        with autocast(settings, device):
            features = model.features(batch).float().cpu().numpy()
        if out is None:
            out = np.zeros((len(encoded.input_ids), features.shape[1]), dtype=np.float32)
        out[indices] = features
    assert out is not None
    return out


def probe(
    model: nn.Module,
    tokenizer: Any,
    splits: Splits,
    num_labels: int,
    settings: FinetuneSettings,
    seed: int,
    where: str = "GLUE",
) -> MemberOutcome:
    """Frozen pooled features (mean by default) and a logistic regression whose C is picked on the dev slice;
    ``where`` names the task member in messages."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    device = torch.device(settings.device)
    pooling = "mean" if settings.pooling == "auto" else settings.pooling
    limit = min(settings.max_length, max_positions(model) or settings.max_length)
    encoder = PairEncoder(tokenizer, limit)
    pad_id = pad_token_id(tokenizer)
    started = time.perf_counter()
    classifier = SequenceClassifier(Backbone(model, settings.attention), num_labels, 0.0, pooling).to(device)
    train, dev = encoder.encode(splits.train), encoder.encode(splits.dev)
    check_labels(train.labels, num_labels, "training split")
    if np.unique(train.labels).size < 2:  # a logistic regression needs two classes to tell apart
        raise UserError(f"{where}: the probe's training split ({len(splits.train)} examples) holds one class only "
                        f"(label {int(train.labels[0]) if train.labels.size else '-'}); raise --max-train-examples "
                        "or fine-tune instead of probing")
    x_train = pooled_features(classifier, train, pad_id, settings.eval_batch_size, settings)
    x_dev = pooled_features(classifier, dev, pad_id, settings.eval_batch_size, settings)
    scaler = StandardScaler().fit(x_train)
    x_train, x_dev = scaler.transform(x_train), scaler.transform(x_dev)
    best = (-math.inf, None, 0.0)
    history = []
    for c in PROBE_C_GRID:
        fitted = LogisticRegression(C=c, max_iter=2000, random_state=seed).fit(x_train, train.labels)
        metric = classification_metrics(dev.labels, fitted.predict(x_dev))[settings.selection_metric]
        history.append(metric)
        if metric > best[0]:
            best = (metric, fitted, c)
    train_seconds = time.perf_counter() - started
    fitted, c = best[1], best[2]
    assert fitted is not None

    report = list(splits.report.unseal())
    encoded = encoder.encode(report)
    check_labels(encoded.labels, num_labels, "reported split")
    x_report = scaler.transform(pooled_features(classifier, encoded, pad_id, settings.eval_batch_size, settings))
    probabilities = np.zeros((len(report), num_labels), dtype=np.float64)
    probabilities[:, fitted.classes_] = fitted.predict_proba(x_report)
    return MemberOutcome(
        labels=encoded.labels, predictions=probabilities.argmax(1), probabilities=probabilities,
        report_examples=report, best_epoch=0, dev_history=history, n_train=len(splits.train),
        n_dev=len(splits.dev), selected_on=splits.selected_on, train_seconds=train_seconds,
        train_examples_per_second=len(splits.train) / max(train_seconds, 1e-9), method="probe",
        notes=[*splits.notes, encoder.describe(),
               f"probe: frozen {pooling}-pooled features, logistic regression C={c} chosen on the dev slice"],
    )
