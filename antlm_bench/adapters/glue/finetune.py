"""Fine-tuning a classifier on a GLUE member: its settings and outcome, the training loop with model selection,
and inference.

One loop for every checkpoint, ours (BabyLlama, LTG-BERT) and plain Hugging Face causal or masked LMs:

    examples -> token ids (the tokenizer's pair template, or "a <sep> b") -> length-grouped, dynamically padded
    batches -> backbone last hidden states -> pool (encoders: first token, decoders: last non-padding token,
    both found from the attention mask, so the padding side cannot matter) -> classifier head -> cross-entropy

Defaults follow the BabyLM 2025 pipeline (``eval_finetuning.sh`` and ``evaluation_pipeline/finetune``): AdamW,
lr 3e-5, weight decay 0.01, cosine schedule with 6% warm-up down to 10% of the peak, head dropout 0.1. Which
examples pick the best epoch is the caller's (``Splits.dev``, made by the ``protocol``): by default a held-out slice
of the *training* split, while that pipeline keeps the epoch that scores best on the split it then reports. The
reported split stays sealed until selection is over either way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from antlm_bench.adapters.glue.data import Example, Splits
from antlm_bench.adapters.glue.encoding import (
    Encoded,
    PairEncoder,
    collate,
    length_grouped_batches,
    pad_token_id,
    shuffled_batches,
    sorted_batches,
)
from antlm_bench.adapters.glue.model import Backbone, SequenceClassifier, max_positions
from antlm_bench.errors import UserError
from antlm_bench.models.precision import Precision


@dataclass
class FinetuneSettings:
    """Hyper-parameters of one fine-tuning run (the BabyLM 2025 defaults)."""

    lr: float = 3e-5
    batch_size: int = 32
    eval_batch_size: int = 64
    eval_batch_tokens: int | None = 4096  # padded tokens per inference batch (rows x longest row)
    max_length: int = 512
    epochs: int = 10
    weight_decay: float = 0.01
    warmup: float = 0.06  # fraction of all steps
    min_lr_factor: float = 0.1  # the cosine ends at this fraction of lr
    dropout: float = 0.1  # classifier head
    grad_clip: float = 0.0  # 0: off (as the BabyLM pipeline)
    dev_fraction: float = 0.1  # held-out slice of the training split used to pick the best epoch
    max_train_examples: int | None = None
    pooling: str = "auto"  # auto | first | last | mean
    attention: str = "auto"  # auto | causal | bidirectional (our models only)
    length_grouped: bool = True
    probe: bool = False  # the task runs the frozen-feature probe instead (probe.probe)
    selection_metric: str = "accuracy"  # accuracy | f1
    scoring: str = "finetune"  # what the rows record for this run: the protocol's name for fine-tuning
    device: str = "cpu"
    # bf16: autocast with float32 master weights (resolved once per task run: models.precision)
    precision: Precision = field(default_factory=lambda: Precision("fp32", "default"))


def classification_metrics(labels: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
    """accuracy, and binary F1 (positive class 1) when the task has two labels -- scikit-learn's definitions."""
    from sklearn.metrics import accuracy_score, f1_score

    metrics = {"accuracy": float(accuracy_score(labels, predictions))}
    if set(np.unique(labels)) <= {0, 1}:
        metrics["f1"] = float(f1_score(labels, predictions, pos_label=1, zero_division=0.0))
    return metrics


@dataclass
class EpochLog:
    epoch: int
    epochs: int
    train_loss: float
    dev_metric: float
    best_epoch: int
    best_metric: float
    seconds: float
    eta_seconds: float


@dataclass
class MemberOutcome:
    """What one fine-tuning (or probe) run produced on the reported split."""

    labels: np.ndarray
    predictions: np.ndarray
    probabilities: np.ndarray  # [n, num_labels]
    report_examples: list[Example]
    best_epoch: int  # 1-based; 0 for a probe
    dev_history: list[float]
    n_train: int
    n_dev: int
    selected_on: str  # the split that picked the best epoch, or the probe's C (Splits.selected_on)
    train_seconds: float
    train_examples_per_second: float
    method: str  # the scoring rows record: finetune (finetune-official under babylm-official) | probe
    notes: list[str] = field(default_factory=list)


def check_labels(labels: np.ndarray, num_labels: int, where: str) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= num_labels):
        raise UserError(f"{where}: label {int(labels.max())} outside 0..{num_labels - 1}")


# ----------------------------------------------------------------------------------------------------------------
# inference


def autocast(settings: FinetuneSettings, device: torch.device):
    """bf16 autocast when the task run resolved bf16, else autocast off (float32 even under a caller's autocast)."""
    if settings.precision.name == "bf16":
        return settings.precision.autocast(device)
    return torch.autocast(device.type, enabled=False)


@torch.inference_mode()
def predict_logits(
    model: SequenceClassifier,
    encoded: Encoded,
    pad_id: int,
    batch_size: int,
    settings: FinetuneSettings,
    padding_side: str = "right",
) -> np.ndarray:
    """Logits [n, num_labels] in the examples' order."""
    if padding_side != "right" and not model.backbone.takes_positions:
        # without position ids a left-padded sequence would start at position > 0
        raise ValueError("left padding needs a backbone that takes position_ids")
    device = torch.device(settings.device)
    model.eval()
    out: np.ndarray | None = None
    for indices in sorted_batches(encoded.lengths, batch_size, settings.eval_batch_tokens):
        batch = collate(encoded, indices, pad_id, padding_side).to(device)
        with autocast(settings, device):
            logits = model(batch).float().cpu().numpy()
        if out is None:
            out = np.zeros((len(encoded.input_ids), logits.shape[1]), dtype=np.float32)
        out[indices] = logits
    assert out is not None
    return out


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


# ----------------------------------------------------------------------------------------------------------------
# the training loop


def cosine_with_warmup(step: int, total: int, warmup: int, min_factor: float) -> float:
    """Learning-rate factor: linear warm-up to 1, then cosine down to ``min_factor`` at ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_factor + (1 - min_factor) * 0.5 * (1 + math.cos(math.pi * progress))


def finetune(
    model: nn.Module,
    tokenizer: Any,
    splits: Splits,
    num_labels: int,
    settings: FinetuneSettings,
    seed: int,
    on_epoch: Callable[[EpochLog], None] | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> MemberOutcome:
    """Fine-tune ``model`` (modified in place; pass a copy) and predict the reported split with the best epoch.

    The best epoch is the one with the highest ``settings.selection_metric`` on ``splits.dev``; the reported
    split stays sealed until that choice is made. ``settings.probe`` is not read here: the caller that wants a
    probe calls :func:`antlm_bench.adapters.glue.probe.probe`. ``on_step(examples_done, examples_total)`` after every
    optimizer step, ``on_epoch(log)`` after every epoch's selection step.
    """
    device = torch.device(settings.device)
    torch.manual_seed(seed)  # the head's initial weights and dropout
    rng = np.random.default_rng(seed)  # batch order
    limit = min(settings.max_length, max_positions(model) or settings.max_length)
    encoder = PairEncoder(tokenizer, limit)
    pad_id = pad_token_id(tokenizer)
    train = encoder.encode(splits.train)
    dev = encoder.encode(splits.dev)
    check_labels(train.labels, num_labels, "training split")

    classifier = SequenceClassifier(Backbone(model, settings.attention), num_labels, settings.dropout,
                                    settings.pooling).to(device)
    optimizer = _adamw([p for p in classifier.parameters() if p.requires_grad], settings, device)
    steps_per_epoch = math.ceil(len(splits.train) / settings.batch_size)
    total_steps = steps_per_epoch * settings.epochs
    warmup = int(settings.warmup * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: cosine_with_warmup(step, total_steps, warmup, settings.min_lr_factor)
    )

    best_metric, best_epoch, best_state = -math.inf, 0, None
    history: list[float] = []
    started = time.perf_counter()
    step = seen = 0
    for epoch in range(1, settings.epochs + 1):
        epoch_start = time.perf_counter()
        classifier.train()
        if settings.length_grouped:
            batches = length_grouped_batches(train.lengths, settings.batch_size, rng)
        else:
            batches = shuffled_batches(len(splits.train), settings.batch_size, rng)
        loss_sum = torch.zeros((), device=device)  # summed on the device: no host sync per step
        for indices in batches:
            batch = collate(train, indices, pad_id).to(device)
            with autocast(settings, device):
                logits = classifier(batch)
            loss = F.cross_entropy(logits.float(), batch.labels)
            loss.backward()
            if settings.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(classifier.parameters(), settings.grad_clip)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            loss_sum += loss.detach() * len(indices)
            step += 1
            seen += len(indices)
            if on_step is not None:
                on_step(seen, len(splits.train) * settings.epochs)
        train_loss = float(loss_sum) / max(len(splits.train), 1)
        if not math.isfinite(train_loss):
            raise UserError(f"fine-tuning loss became {train_loss} in epoch {epoch}; lower the learning rate (lr)")
        dev_logits = predict_logits(classifier, dev, pad_id, settings.eval_batch_size, settings)
        metric = classification_metrics(dev.labels, dev_logits.argmax(1))[settings.selection_metric]
        history.append(metric)
        if metric > best_metric:  # ties keep the earlier epoch
            best_metric, best_epoch = metric, epoch
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in classifier.state_dict().items()}
        if on_epoch is not None:
            elapsed = time.perf_counter() - started
            on_epoch(EpochLog(epoch, settings.epochs, train_loss, metric, best_epoch,
                              best_metric, time.perf_counter() - epoch_start,
                              elapsed / epoch * (settings.epochs - epoch)))
    train_seconds = time.perf_counter() - started
    if best_state is not None:
        classifier.load_state_dict(best_state)

    report = list(splits.report.unseal())  # selection is over: now, and only now, the reported split is read
    encoded = encoder.encode(report)
    check_labels(encoded.labels, num_labels, "reported split")
    logits = predict_logits(classifier, encoded, pad_id, settings.eval_batch_size, settings)
    return MemberOutcome(
        labels=encoded.labels, predictions=logits.argmax(1), probabilities=_softmax(logits),
        report_examples=report, best_epoch=best_epoch, dev_history=history, n_train=len(splits.train),
        n_dev=len(splits.dev), selected_on=splits.selected_on, train_seconds=train_seconds,
        train_examples_per_second=len(splits.train) * settings.epochs / max(train_seconds, 1e-9),
        method=settings.scoring, notes=[*splits.notes, encoder.describe(), f"pooling={classifier.pooling}",
               f"attention={classifier.backbone.attention}"],
    )


def _adamw(parameters: list[nn.Parameter], settings: FinetuneSettings, device: torch.device) -> torch.optim.Optimizer:
    """AdamW, the fused kernel where torch has one for the device (one kernel for all tensors, not one each)."""
    kwargs = {"lr": settings.lr, "weight_decay": settings.weight_decay, "betas": (0.9, 0.999), "eps": 1e-8}
    if device.type in ("cpu", "cuda"):
        try:
            return torch.optim.AdamW(parameters, fused=True, **kwargs)
        except (RuntimeError, TypeError, ValueError):
            pass
    return torch.optim.AdamW(parameters, **kwargs)
