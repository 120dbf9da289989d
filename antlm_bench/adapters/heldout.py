"""``heldout``: the model's loss on held-out pre-training text (the corpus's dev split), in nats per token.

A continuous measure of what pre-training optimises, on text the model never trained on: it moves with every
seed and schedule where minimal-pair accuracies sit at chance (more signal per seed; Signal and Noise, arXiv
2508.13144). Lower is better (``results.leaderboard.definition.METRICS["loss"]``).

- **Text**: the corpus folder's ``*.dev`` files (``data.folder``, default ``pretrain_sample``), read and cleaned
  as training reads its ``*.train`` files (``data.corpus.read_corpus``); each file is one subtask. A source's
  lines are tokenized as training packs them (``<s> line </s>``, concatenated: ``data.corpus.tokenize_lines``)
  (a tokenizer without EOS: ``[CLS] line [SEP]``) and cut into sequences of the model's trained length: the checkpoint record's ``seq_len``, else
  ``data.seq_len`` (128), never more than the model's positions; the remainder shorter than one sequence is
  dropped. The first ``data.max_sequences`` sequences of each source are scored (``--limit N``: the first N).
- **Method**: the one ``evaluate()`` resolved (``ctx.scoring``), never decided here again:
  ``clm`` -> causal loss, every token after the first predicted from the ones before it;
  ``pll`` / ``pll-word-l2r`` -> MLM loss at fixed masks; ``mntp`` -> the same masks, each masked token read at
  the position before it (the first position never masked).
- **Fixed masks**: BERT's corruption as the recipes' default ``masking`` (``token`` strategy, 15% of the
  non-special tokens, Binomial(eligible, 0.15) per sequence, of those 80% ``[MASK]``, 10% a random token, 10%
  kept), drawn by ``training.objectives.BatchBuilder`` from a generator keyed by (``MASK_SEED`` + the source's
  name, the sequence's index): every model and seed with the same tokenizer sees the same masks, and a
  sequence's masks do not depend on how many are scored.
- **Numbers**: an item is one sequence, its value the mean loss over its predicted tokens (nats per token, the
  items table's ``value``); a subtask is the mean over its sequences and the task the unweighted mean over the
  sources, each with a percentile bootstrap interval over sequences (``results.stats``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from antlm_bench.adapters.base import EvalContext, TaskAdapter, TaskResult
from antlm_bench.adapters.minimal_pairs import scoring_model_for
from antlm_bench.data import hash_files
from antlm_bench.data.corpus import read_corpus, tokenize_lines
from antlm_bench.errors import UserError
from antlm_bench.models.loss import IGNORE
from antlm_bench.recipes import Masking
from antlm_bench.results.stats import bootstrap_macro, bootstrap_mean
from antlm_bench.results.tables import ScoreRow
from antlm_bench.runs.record import read_record
from antlm_bench.scoring import ScoringModel, check_method
from antlm_bench.scoring.model import BIDIRECTIONAL, CAUSAL
from antlm_bench.training.objectives import BatchBuilder

METRIC = "loss"
DEFAULT_SEQ_LEN = 128
DEFAULT_MAX_SEQUENCES = 100  # per source: the shipped dev sample has 5 to 150 sequences of 128 tokens a source
MASK_SEED = 20_250_101
CORRUPTION = ("token masking, 15% of the non-special tokens (Binomial per sequence), 80% [MASK] / 10% random / "
              "10% kept, fixed seed")
# method -> (objective whose corruption and label alignment it reads, attention)
OBJECTIVE = {"clm": ("CLM", CAUSAL), "pll": ("MLM", BIDIRECTIONAL), "pll-word-l2r": ("MLM", BIDIRECTIONAL),
             "mntp": ("MNTP", BIDIRECTIONAL)}


@dataclass
class Sequences:
    """One source's scored sequences: token ids [N, L], and the original (uncorrupted) ones for the labels."""

    name: str
    input_ids: np.ndarray
    labels: np.ndarray  # the token each position is scored against, IGNORE where none
    shift: int  # position i's output predicts labels[i + shift]


class HeldoutData(BaseModel):
    """heldout's ``data:`` section, typed."""

    model_config = ConfigDict(extra="forbid", strict=True)

    folder: str = "pretrain_sample"
    split: str = "dev"
    seq_len: int = Field(DEFAULT_SEQ_LEN, ge=2)
    max_sequences: int = Field(DEFAULT_MAX_SEQUENCES, ge=1)


class HeldoutLossTask(TaskAdapter):
    """Loss on the corpus's held-out split, one subtask per source file."""

    metrics = (METRIC,)
    spec_sections = {"data": HeldoutData}
    needs_scoring_model = True

    @property
    def _folder_name(self) -> str:
        return str(self.spec.data.get("folder", "pretrain_sample"))

    def _folder(self, data_dir: Path) -> Path:
        folder = data_dir / self._folder_name
        if not folder.is_dir():
            raise UserError(f"{self.name}: corpus folder {folder} not found; pass --data-dir DIR (the folder holding "
                            f"{self._folder_name}/), set $ANTLM_BENCH_DATA, or run `antlm-bench data fetch`")
        return folder

    def check_data(self, data_dir: Path) -> None:
        from antlm_bench.data.corpus import find_corpus_files

        files = find_corpus_files(self._folder(data_dir), self._split)
        self.data_files = [str(f) for f in files]
        self.data_hash = hash_files(files)

    @property
    def _split(self) -> str:
        return str(self.spec.data.get("split", "dev"))

    def seq_len(self, ctx: EvalContext, sm: ScoringModel) -> tuple[int, str]:
        """(sequence length, where it came from): the checkpoint's trained length, else the spec's default; cut
        to the model's positions where it cannot extend them."""
        record = read_record(ctx.model_path) if ctx.model_path is not None else None
        if record is not None and record.seq_len:
            length, source = int(record.seq_len), "the checkpoint's trained seq_len"
        else:
            length, source = int(self.spec.data.get("seq_len", DEFAULT_SEQ_LEN)), "the task's default"
        if sm.max_length is not None and length > sm.max_length and not sm.extends_positions:
            length, source = sm.max_length, "the model's positions"
        if length < 2:
            raise UserError(f"{self.name}: sequence length {length} ({source}): must be at least 2")
        return length, source

    def sequences(self, ctx: EvalContext, tokenizer: Any, method: str, seq_len: int) -> list[Sequences]:
        """Each source's first sequences, corrupted and labelled for ``method`` (see the module docstring)."""
        if not getattr(tokenizer, "is_fast", False):
            raise UserError(f"{self.name}: needs a fast (Rust) tokenizer to read the corpus as training does; "
                            f"{type(tokenizer).__name__} is not one")
        with read_corpus(self._folder(ctx.data_dir), self._split) as corpus:  # a dev split: small, held in memory
            files, texts = corpus.files, {name: list(corpus.lines(name)) for name in corpus.sources}
        self.data_files = [str(f) for f in files]
        self.data_hash = hash_files(files)
        cap = int(self.spec.data.get("max_sequences", DEFAULT_MAX_SEQUENCES))
        cap = cap if ctx.limit is None else min(cap, ctx.limit)
        objective, _ = OBJECTIVE[method]
        out = []
        packer = line_packer(tokenizer)
        for name, lines in texts.items():
            ids, _ = tokenize_lines(lines, packer)
            n = min(len(ids) // seq_len, cap)
            if n == 0:
                continue
            blocks = ids[: n * seq_len].reshape(n, seq_len).astype(np.int64)
            if objective == "CLM":
                out.append(Sequences(name, blocks, blocks.copy(), 1))
                continue
            if tokenizer.mask_token_id is None:
                raise UserError(f"{self.name}: --scoring {method} needs a mask token, and the tokenizer has none")
            builder = BatchBuilder(Masking(), tokenizer.mask_token_id, len(tokenizer), tokenizer.all_special_ids,
                                   seed=MASK_SEED + zlib.crc32(name.encode()))
            # one sequence at a time, keyed by its index: its masks do not depend on how many are scored
            parts = [builder.build(objective, blocks[i:i + 1], None, step=i) for i in range(n)]
            out.append(Sequences(name, np.concatenate([p.input_ids for p in parts]),
                                 np.concatenate([p.labels for p in parts]), parts[0].shift))
        if not out:
            raise UserError(f"{self.name}: no source of {self._folder(ctx.data_dir)} holds one sequence of "
                            f"{seq_len} tokens; give more held-out text")
        return out

    def run(self, ctx: EvalContext) -> TaskResult:
        sm = scoring_model_for(ctx)
        method = check_method(ctx.scoring)
        _, attention = OBJECTIVE[method]
        sm.check_mode(attention, method)
        seq_len, length_source = self.seq_len(ctx, sm)
        sources = self.sequences(ctx, sm.tokenizer, method, seq_len)
        losses = {s.name: sequence_losses(sm, s, attention, ctx.batch_tokens) for s in sources}
        corruption = "none (causal)" if method == "clm" else CORRUPTION
        notes = f"seq_len={seq_len} ({length_source}); corruption: {corruption}; nats per token"
        rows = []
        for source in sources:
            interval = bootstrap_mean(losses[source.name])
            rows.append(ScoreRow(task=self.name, subtask=source.name, metric=METRIC, value=interval.value,
                                 n=int(losses[source.name].size), scoring=method, ci_low=interval.low,
                                 ci_high=interval.high, limit=ctx.limit, notes=notes))
        macro = bootstrap_macro(losses, {})
        rows.insert(0, ScoreRow(task=self.name, subtask="", metric=METRIC, value=macro.value,
                                n=int(sum(v.size for v in losses.values())), scoring=method, ci_low=macro.low,
                                ci_high=macro.high, limit=ctx.limit, notes=notes))
        items = []
        if ctx.log_samples:
            items = [{"task": self.name, "subtask": name, "item_id": str(i), "group_id": str(i), "value": float(v)}
                     for name, values in losses.items() for i, v in enumerate(values)]
        result_notes = [f"{self.name}: {sum(v.size for v in losses.values())} sequences of {seq_len} tokens "
                        f"({length_source}) from {len(losses)} sources, scored {method}"]
        return TaskResult(rows=rows, items=items, notes=result_notes)


def line_packer(tokenizer: Any) -> Any:
    """What ``tokenize_lines`` packs lines with: the tokenizer's ``<s> line </s>`` (as training packs), or for a
    tokenizer without an EOS token (a plain BERT's) its own ``[CLS] line [SEP]``. Its backend is a copy without
    truncation or padding: a tokenizer.json (or an earlier call with ``truncation=True``, which transformers leaves
    set on the backend) may carry them, and a held-out line is read whole, as training reads it."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    if tokenizer.eos_token_id is not None:
        return SimpleNamespace(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                               backend_tokenizer=backend)
    if tokenizer.sep_token_id is None:
        raise UserError("heldout: the tokenizer has neither an EOS nor a SEP token to end a line with")
    return SimpleNamespace(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                           backend_tokenizer=backend)


@torch.inference_mode()
def sequence_losses(sm: ScoringModel, seqs: Sequences, attention: str, batch_tokens: int) -> np.ndarray:
    """Each sequence's mean negative log-likelihood (nats) over the positions it labels; float32 log-softmax."""
    n, length = seqs.input_ids.shape
    rows_per_batch = max(1, batch_tokens // length)
    out = np.zeros(n)
    for begin in range(0, n, rows_per_batch):
        ids = torch.as_tensor(seqs.input_ids[begin:begin + rows_per_batch], device=sm.device)
        labels = np.asarray(seqs.labels[begin:begin + rows_per_batch])
        # position i is scored against labels[i + shift]: which (row, position) cells carry a target
        targets = np.full(labels.shape, IGNORE, dtype=np.int64)
        targets[:, : length - seqs.shift] = labels[:, seqs.shift:]
        rows, positions = np.nonzero(targets != IGNORE)
        hidden = sm.hidden(ids, None, attention)
        chosen = hidden[torch.as_tensor(rows, device=hidden.device), torch.as_tensor(positions, device=hidden.device)]
        logits = sm.head(chosen).float()
        wanted = torch.as_tensor(targets[rows, positions], device=logits.device)
        nll = -torch.log_softmax(logits, dim=-1).gather(1, wanted[:, None])[:, 0]
        sums = np.bincount(rows, weights=nll.cpu().numpy(), minlength=len(labels))
        counts = np.bincount(rows, minlength=len(labels))
        if (counts == 0).any():  # a sequence without a target (no maskable token): nothing to average
            raise UserError(f"heldout: a sequence of {seqs.name} has no token to predict; lengthen the sequences")
        out[begin:begin + len(labels)] = sums / counts
    return out
