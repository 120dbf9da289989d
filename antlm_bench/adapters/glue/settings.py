"""What one fine-tuning run takes and gives back: its settings, its outcome, and the metrics it is judged by.

Defaults follow the BabyLM 2025 pipeline (``eval_finetuning.sh`` and ``evaluation_pipeline/finetune``): AdamW,
lr 3e-5, weight decay 0.01, cosine schedule with 6% warm-up down to 10% of the peak, head dropout 0.1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from antlm_bench.adapters.glue.data import Example
from antlm_bench.errors import UserError


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
    probe: bool = False
    selection_metric: str = "accuracy"  # accuracy | f1
    device: str = "cpu"
    dtype: str = "float32"  # on CUDA, bfloat16 means autocast with float32 master weights


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
    train_seconds: float
    train_examples_per_second: float
    method: str  # finetune | probe
    notes: list[str] = field(default_factory=list)


def _check_labels(labels: np.ndarray, num_labels: int, where: str) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= num_labels):
        raise UserError(f"{where}: label {int(labels.max())} outside 0..{num_labels - 1}")
