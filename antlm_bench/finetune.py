"""Fine-tuning (and frozen-feature probing) of any language model on sentence(-pair) classification.

One loop for every checkpoint: ours (BabyLlama, LTG-BERT) and plain Hugging Face causal or masked LMs.

    examples -> token ids (the tokenizer's pair template, or "a <sep> b") -> length-grouped, dynamically padded
    batches -> backbone last hidden states -> pool (encoders: first token, decoders: last non-padding token,
    both found from the attention mask, so the padding side cannot matter) -> classifier head -> cross-entropy

Defaults follow the BabyLM 2025 pipeline (``eval_finetuning.sh`` and ``evaluation_pipeline/finetune``): AdamW,
lr 3e-5, weight decay 0.01, cosine schedule with 6% warm-up down to 10% of the peak, head dropout 0.1.
One thing differs on purpose: that pipeline keeps the epoch that scores best on the split it then reports.
Here the best epoch is chosen on a held-out slice of the *training* split, and the reported split is sealed
(:class:`SealedSplit`) until selection is over.

``probe`` mode skips fine-tuning: frozen pooled features and a scikit-learn logistic regression (its C chosen
on the same dev slice). It is fast on a CPU and is labelled ``probe`` wherever it is reported.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from antlm_bench.errors import UserError

# model types whose plain Hugging Face checkpoints are encoders (pool the first token, bidirectional attention)
ENCODER_MODEL_TYPES = {
    "bert", "roberta", "deberta", "deberta-v2", "electra", "distilbert", "albert", "camembert", "xlm-roberta",
    "modernbert", "ltgbert", "mpnet", "megatron-bert", "xlm", "flaubert", "ernie",
}


# ----------------------------------------------------------------------------------------------------------------
# settings and data


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


@dataclass
class Example:
    id: str
    text_a: str
    text_b: str | None
    label: int
    group: str = ""  # split / leakage unit (MultiRC: the paragraph); defaults to the id


class SealedSplit(Sequence):
    """The reported split. Reading it before :meth:`unseal` is a bug: it would let the reported numbers steer
    model selection. The fine-tuning loop unseals it only after the best epoch is fixed."""

    def __init__(self, examples: Sequence[Example]) -> None:
        self._examples = examples
        self._sealed = True

    def unseal(self) -> SealedSplit:
        self._sealed = False
        return self

    def _check(self) -> None:
        if self._sealed:
            raise RuntimeError("the reported split was read before model selection finished")

    def __len__(self) -> int:
        self._check()
        return len(self._examples)

    def __getitem__(self, index):  # type: ignore[override]
        self._check()
        return self._examples[index]

    def __iter__(self) -> Iterator[Example]:
        self._check()
        return iter(self._examples)


# ----------------------------------------------------------------------------------------------------------------
# deterministic splits


def hash_unit(key: str, salt: str) -> float:
    """A number in [0, 1) fixed by ``salt`` and ``key`` alone: same split on every machine, in every order."""
    digest = hashlib.sha256(f"{salt}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_by_key(
    examples: Sequence[Example], fraction: float, salt: str
) -> tuple[list[Example], list[Example]]:
    """(rest, held) where ``held`` has the examples whose group hashes below ``fraction``.

    Examples of one group (MultiRC: one paragraph) always land on the same side.
    """
    rest, held = [], []
    for example in examples:
        (held if hash_unit(example.group or example.id, salt) < fraction else rest).append(example)
    return rest, held


def hash_order(examples: Sequence[Example], salt: str) -> list[Example]:
    """The examples in a fixed pseudo-random order (for seed-independent subsampling)."""
    return sorted(examples, key=lambda e: (hash_unit(e.id, salt), e.id))


@dataclass
class Splits:
    train: list[Example]
    dev: list[Example]  # for model selection only; carved from the training split
    report: SealedSplit
    notes: list[str] = field(default_factory=list)


def make_splits(
    train: Sequence[Example],
    report: Sequence[Example],
    dev_fraction: float,
    max_train_examples: int | None,
    name: str,
) -> Splits:
    """Carve the selection slice from the training split; cap the training examples for small budgets."""
    if not 0 < dev_fraction < 1:
        raise UserError(f"dev_fraction must be in (0, 1), got {dev_fraction}")
    rest, dev = split_by_key(train, dev_fraction, salt=f"{name}/dev")
    if not rest or not dev:
        raise UserError(
            f"{name}: {len(train)} training examples are too few to hold out a dev slice "
            f"(dev_fraction {dev_fraction}); give more training data"
        )
    notes = [f"best epoch chosen on a {dev_fraction:.0%} slice of the training split"]
    if max_train_examples is not None and max_train_examples < len(rest):
        if max_train_examples < 1:
            raise UserError(f"max_train_examples must be >= 1, got {max_train_examples}")
        rest = hash_order(rest, salt=f"{name}/subsample")[:max_train_examples]
        # keep the train:dev ratio, so that a small budget does not spend most of its time on selection
        n_dev = max(1, math.ceil(max_train_examples * dev_fraction / (1 - dev_fraction)))
        dev = hash_order(dev, salt=f"{name}/subsample")[:n_dev]
        notes.append(f"max_train_examples={max_train_examples}")
    return Splits(train=list(rest), dev=list(dev), report=SealedSplit(report), notes=notes)


# ----------------------------------------------------------------------------------------------------------------
# tokenization


@dataclass
class Encoded:
    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    labels: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(ids) for ids in self.input_ids), dtype=np.int64, count=len(self.input_ids))


def _truncate_longest_first(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Cut the ends so that both fit in ``budget`` tokens, as the tokenizers' ``longest_first`` does: the shorter
    sequence (the first on a tie) keeps up to half the budget, the longer one gets the rest."""
    budget = max(budget, 0)
    la, lb = len(a), len(b)
    if la + lb <= budget:
        return a, b
    if la <= lb:
        la = min(la, budget // 2)
        lb = min(lb, budget - la)
    else:
        lb = min(lb, budget // 2)
        la = min(la, budget - lb)
    return a[:la], b[:lb]


class PairEncoder:
    """Turns (text_a, text_b) into token ids the way the tokenizer expects.

    A tokenizer with a pair template (BERT's ``[CLS] a [SEP] b [SEP]``, Llama's ``<s> a <s> b``) encodes the
    pair itself. One without (GPT-2 style BPE: no special tokens at all) gets ``<prefix> a <sep> b <suffix>``,
    where prefix/suffix are what the tokenizer adds around one sentence and ``<sep>`` is its SEP token, else its
    EOS token: the model sees a boundary it knows from pre-training.
    """

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.has_pair_template = tokenizer.num_special_tokens_to_add(pair=True) > tokenizer.num_special_tokens_to_add(
            pair=False
        )
        probe_with = tokenizer("hello", add_special_tokens=True)["input_ids"]
        probe_without = tokenizer("hello", add_special_tokens=False)["input_ids"]
        start = _find_sublist(probe_with, probe_without)
        self.prefix = probe_with[:start] if start >= 0 else []
        self.suffix = probe_with[start + len(probe_without):] if start >= 0 else []
        sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        self.sep = [] if sep is None else [int(sep)]

    def describe(self) -> str:
        if self.has_pair_template:
            return "pairs joined by the tokenizer's pair template"
        sep = self.tokenizer.convert_ids_to_tokens(self.sep[0]) if self.sep else "nothing"
        return f"pairs joined as 'a {sep} b'"

    def encode(self, examples: Sequence[Example]) -> Encoded:
        labels = np.fromiter((e.label for e in examples), dtype=np.int64, count=len(examples))
        texts_a = [e.text_a for e in examples]
        pairs = [e.text_b is not None for e in examples]
        if not any(pairs):
            out = self.tokenizer(texts_a, truncation=True, max_length=self.max_length)
            return Encoded(out["input_ids"], out.get("token_type_ids"), labels)
        if not all(pairs):
            raise ValueError("mixed single sentences and pairs in one split")
        texts_b = [e.text_b for e in examples]
        if self.has_pair_template:
            out = self.tokenizer(texts_a, texts_b, truncation="longest_first", max_length=self.max_length)
            return Encoded(out["input_ids"], out.get("token_type_ids"), labels)
        ids_a = self.tokenizer(texts_a, add_special_tokens=False)["input_ids"]
        ids_b = self.tokenizer(texts_b, add_special_tokens=False)["input_ids"]
        budget = self.max_length - len(self.prefix) - len(self.suffix) - len(self.sep)
        joined = []
        for a, b in zip(ids_a, ids_b):
            a, b = _truncate_longest_first(a, b, budget)
            joined.append(self.prefix + a + self.sep + b + self.suffix)
        return Encoded(joined, None, labels)


def _find_sublist(haystack: list[int], needle: list[int]) -> int:
    for start in range(len(haystack) - len(needle) + 1):
        if haystack[start: start + len(needle)] == needle:
            return start
    return -1


# ----------------------------------------------------------------------------------------------------------------
# batching


def length_grouped_batches(
    lengths: np.ndarray, batch_size: int, rng: np.random.Generator, mega: int = 50
) -> list[np.ndarray]:
    """Shuffled batches of similar length: shuffle, sort within chunks of ``mega`` batches, shuffle the batches.

    Padding then costs little, and the order still changes every epoch.
    """
    order = rng.permutation(len(lengths))
    batches: list[np.ndarray] = []
    chunk = batch_size * mega
    for start in range(0, len(order), chunk):
        part = order[start: start + chunk]
        part = part[np.argsort(-lengths[part], kind="stable")]
        batches.extend(part[i: i + batch_size] for i in range(0, len(part), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def shuffled_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(n)
    return [order[i: i + batch_size] for i in range(0, n, batch_size)]


def sorted_batches(lengths: np.ndarray, batch_size: int, max_tokens: int | None = None) -> list[np.ndarray]:
    """Inference batches, longest first (a too-big batch fails at once, not at the end), each at most
    ``batch_size`` rows and, when given, ``max_tokens`` padded tokens: long inputs go in small batches, short ones
    in full batches, and little compute goes to padding."""
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        width = int(lengths[order[start]])  # the longest row of this batch comes first
        rows = batch_size if max_tokens is None else max(1, min(batch_size, max_tokens // max(width, 1)))
        batches.append(order[start: start + rows])
        start += rows
    return batches


@dataclass
class Batch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    token_type_ids: torch.Tensor | None
    labels: torch.Tensor

    def to(self, device: torch.device | str) -> Batch:
        move = (lambda t: None if t is None else t.to(device, non_blocking=True))
        return Batch(*(move(t) for t in (self.input_ids, self.attention_mask, self.position_ids,
                                         self.token_type_ids, self.labels)))


def collate(encoded: Encoded, indices: Sequence[int], pad_id: int, padding_side: str = "right") -> Batch:
    """Pad the chosen examples to the longest of them. Position ids count real tokens only, so a left-padded
    sequence gets the same positions as a right-padded one."""
    rows = [encoded.input_ids[i] for i in indices]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    types = torch.zeros((len(rows), width), dtype=torch.long) if encoded.token_type_ids is not None else None
    for row, i in enumerate(indices):
        seq = encoded.input_ids[i]
        span = slice(0, len(seq)) if padding_side == "right" else slice(width - len(seq), width)
        ids[row, span] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, span] = 1
        if types is not None:
            types[row, span] = torch.as_tensor(encoded.token_type_ids[i], dtype=torch.long)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    labels = torch.as_tensor(encoded.labels[np.asarray(indices)], dtype=torch.long)
    return Batch(ids, mask, positions, types, labels)


# ----------------------------------------------------------------------------------------------------------------
# model: backbone -> pooling -> head


def model_kind(model: nn.Module) -> str:
    """'encoder' or 'decoder': decides the default attention and pooling."""
    from antlm_bench.models import masked_by_config  # the backend registry, plug-ins included

    masked = masked_by_config(model.config)
    if masked is not None:
        return "encoder" if masked else "decoder"
    names = [type(model).__name__, *(getattr(model.config, "architectures", None) or [])]
    for name in names:
        if "MaskedLM" in name:
            return "encoder"
        if "CausalLM" in name:
            return "decoder"
    return "encoder" if getattr(model.config, "model_type", "") in ENCODER_MODEL_TYPES else "decoder"


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """[B, T, H] -> [B, H]. 'first' / 'last' pick the first / last *real* token from the mask, wherever the
    padding is; 'mean' averages the real tokens."""
    if how == "mean":
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)
    if how == "first":
        index = mask.argmax(dim=1)
    elif how == "last":
        index = mask.shape[1] - 1 - mask.flip(1).argmax(dim=1)
    else:
        raise ValueError(f"unknown pooling {how!r}")
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), index]


class Backbone(nn.Module):
    """Last hidden states [B, T, H] of any supported LM, whatever its head."""

    def __init__(self, model: nn.Module, attention: str = "auto") -> None:
        super().__init__()
        self.kind = model_kind(model)
        self.ours = hasattr(model, "hidden_states") and hasattr(model.config, "antlm_architecture")
        if attention == "auto":
            attention = "bidirectional" if self.kind == "encoder" else "causal"
        if attention not in ("causal", "bidirectional"):
            raise UserError(f"attention must be auto, causal or bidirectional, got {attention!r}")
        self.attention = attention
        if self.ours:
            self.net = model  # hidden_states() runs the body only; the unused LM head gets no gradient
            self.accepts = set(inspect.signature(model.hidden_states).parameters)
        else:
            expected = "bidirectional" if self.kind == "encoder" else "causal"
            if attention != expected:
                raise UserError(
                    f"attention={attention}: a plain Hugging Face {self.kind} has fixed {expected} attention; "
                    "use attention=auto"
                )
            self.net = model.base_model  # drop the LM head: less memory, and it gets no gradient anyway
            self.accepts = set(inspect.signature(self.net.forward).parameters)
        self.hidden_size = int(model.config.hidden_size)

    @property
    def takes_positions(self) -> bool:
        return "position_ids" in self.accepts

    def forward(self, batch: Batch) -> torch.Tensor:
        kwargs: dict[str, Any] = {}
        if "position_ids" in self.accepts:
            kwargs["position_ids"] = batch.position_ids
        if batch.token_type_ids is not None and "token_type_ids" in self.accepts:
            kwargs["token_type_ids"] = batch.token_type_ids
        if self.ours:
            return self.net.hidden_states(
                batch.input_ids, attention_mask=batch.attention_mask, attention_mode=self.attention, **kwargs
            )
        if "use_cache" in self.accepts:
            kwargs["use_cache"] = False
        out = self.net(input_ids=batch.input_ids, attention_mask=batch.attention_mask, **kwargs)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


class ClassifierHead(nn.Module):
    """norm -> dense -> GELU -> norm -> dropout -> linear, as the BabyLM 2025 pipeline's head.

    The first norm (without learned scale) makes the head indifferent to the scale of the backbone's states:
    not every backbone ends with a final norm.
    """

    def __init__(self, hidden_size: int, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.norm_in = nn.LayerNorm(hidden_size, eps=1e-5, elementwise_affine=False)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.norm_out = nn.LayerNorm(hidden_size, eps=1e-5, elementwise_affine=False)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_size, num_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.dense(self.norm_in(pooled)))
        return self.out(self.dropout(self.norm_out(x)))


class SequenceClassifier(nn.Module):
    def __init__(self, backbone: Backbone, num_labels: int, dropout: float, pooling: str = "auto") -> None:
        super().__init__()
        self.backbone = backbone
        self.pooling = pooling if pooling != "auto" else ("first" if backbone.kind == "encoder" else "last")
        self.head = ClassifierHead(backbone.hidden_size, num_labels, dropout)

    def features(self, batch: Batch) -> torch.Tensor:
        return pool(self.backbone(batch), batch.attention_mask, self.pooling)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.head(self.features(batch).float())


# ----------------------------------------------------------------------------------------------------------------
# metrics


def classification_metrics(labels: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
    """accuracy, and binary F1 (positive class 1) when the task has two labels -- scikit-learn's definitions."""
    from sklearn.metrics import accuracy_score, f1_score

    metrics = {"accuracy": float(accuracy_score(labels, predictions))}
    if set(np.unique(labels)) <= {0, 1}:
        metrics["f1"] = float(f1_score(labels, predictions, pos_label=1, zero_division=0.0))
    return metrics


# ----------------------------------------------------------------------------------------------------------------
# the loop


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


def _autocast(settings: FinetuneSettings, device: torch.device):
    # bf16 only where the hardware has it; on a CPU it is ~100x slower, so never there
    if device.type == "cuda" and settings.dtype in ("bfloat16", "bf16"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast(device.type, enabled=False)


def cosine_with_warmup(step: int, total: int, warmup: int, min_factor: float) -> float:
    """Learning-rate factor: linear warm-up to 1, then cosine down to ``min_factor`` at ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_factor + (1 - min_factor) * 0.5 * (1 + math.cos(math.pi * progress))


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
        with _autocast(settings, device):
            logits = model(batch).float().cpu().numpy()
        if out is None:
            out = np.zeros((len(encoded.input_ids), logits.shape[1]), dtype=np.float32)
        out[indices] = logits
    assert out is not None
    return out


@torch.inference_mode()
def pooled_features(
    model: SequenceClassifier, encoded: Encoded, pad_id: int, batch_size: int, settings: FinetuneSettings
) -> np.ndarray:
    device = torch.device(settings.device)
    model.eval()
    out: np.ndarray | None = None
    for indices in sorted_batches(encoded.lengths, batch_size, settings.eval_batch_tokens):
        batch = collate(encoded, indices, pad_id).to(device)
        with _autocast(settings, device):
            features = model.features(batch).float().cpu().numpy()
        if out is None:
            out = np.zeros((len(encoded.input_ids), features.shape[1]), dtype=np.float32)
        out[indices] = features
    assert out is not None
    return out


def pad_token_id(tokenizer: Any) -> int:
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id):
        if candidate is not None:
            return int(candidate)
    return 0  # any id: padded positions are masked out and never pooled


def max_positions(model: nn.Module) -> int | None:
    value = getattr(model.config, "max_position_embeddings", None)
    return int(value) if value else None


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


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
    split stays sealed until that choice is made. ``on_step(examples_done, examples_total)`` after every
    optimizer step, ``on_epoch(log)`` after every epoch's selection step.
    """
    if settings.probe:
        return probe(model, tokenizer, splits, num_labels, settings, seed)
    device = torch.device(settings.device)
    torch.manual_seed(seed)  # the head's initial weights and dropout
    rng = np.random.default_rng(seed)  # batch order
    limit = min(settings.max_length, max_positions(model) or settings.max_length)
    encoder = PairEncoder(tokenizer, limit)
    pad_id = pad_token_id(tokenizer)
    train = encoder.encode(splits.train)
    dev = encoder.encode(splits.dev)
    _check_labels(train.labels, num_labels, "training split")

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
            with _autocast(settings, device):
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
    _check_labels(encoded.labels, num_labels, "reported split")
    logits = predict_logits(classifier, encoded, pad_id, settings.eval_batch_size, settings)
    return MemberOutcome(
        labels=encoded.labels, predictions=logits.argmax(1), probabilities=_softmax(logits),
        report_examples=report, best_epoch=best_epoch, dev_history=history, n_train=len(splits.train),
        n_dev=len(splits.dev), train_seconds=train_seconds,
        train_examples_per_second=len(splits.train) * settings.epochs / max(train_seconds, 1e-9),
        method="finetune", notes=[*splits.notes, encoder.describe(), f"pooling={classifier.pooling}"],
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


def _check_labels(labels: np.ndarray, num_labels: int, where: str) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= num_labels):
        raise UserError(f"{where}: label {int(labels.max())} outside 0..{num_labels - 1}")


# ----------------------------------------------------------------------------------------------------------------
# probe: frozen features + logistic regression

PROBE_C_GRID = (0.01, 0.1, 1.0, 10.0)


def probe(
    model: nn.Module,
    tokenizer: Any,
    splits: Splits,
    num_labels: int,
    settings: FinetuneSettings,
    seed: int,
) -> MemberOutcome:
    """Frozen pooled features (mean by default) and a logistic regression whose C is picked on the dev slice."""
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
    _check_labels(train.labels, num_labels, "training split")
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
    _check_labels(encoded.labels, num_labels, "reported split")
    x_report = scaler.transform(pooled_features(classifier, encoded, pad_id, settings.eval_batch_size, settings))
    probabilities = np.zeros((len(report), num_labels), dtype=np.float64)
    probabilities[:, fitted.classes_] = fitted.predict_proba(x_report)
    return MemberOutcome(
        labels=encoded.labels, predictions=probabilities.argmax(1), probabilities=probabilities,
        report_examples=report, best_epoch=0, dev_history=history, n_train=len(splits.train),
        n_dev=len(splits.dev), train_seconds=train_seconds,
        train_examples_per_second=len(splits.train) / max(train_seconds, 1e-9), method="probe",
        notes=[*splits.notes, encoder.describe(),
               f"probe: frozen {pooling}-pooled features, logistic regression C={c} chosen on the dev slice"],
    )


def fresh_copy(model: nn.Module) -> nn.Module:
    """Every run starts from the pre-trained weights."""
    return copy.deepcopy(model)
