"""Rows of the masked methods (pll, pll-word-l2r, mntp): one masked copy of a sequence per scored token."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from antlm_bench.scoring.encode import Seq
from antlm_bench.scoring.rows import ScoringBatch


def _extra_masks(seq: Seq) -> tuple[np.ndarray, np.ndarray]:
    """pll-word-l2r: (copy index, position) of the later same-word tokens each copy also masks."""
    copies, cols = [], []
    for k, p in enumerate(seq.scored):
        word = seq.word_ids[p]
        if word < 0:
            continue
        later = seq.scored[k + 1:]
        later = later[seq.word_ids[later] == word]
        copies.extend([k] * len(later))
        cols.extend(later.tolist())
    return np.asarray(copies, dtype=np.int64), np.asarray(cols, dtype=np.int64)


def masked_batches(
    seqs: list[Seq], order: np.ndarray, batch_tokens: int, pad: int, mask_id: int, method: str
) -> Iterator[ScoringBatch]:
    """Rows = masked copies of the sequences (one per scored token), many sentences per batch."""
    shift = 1 if method == "mntp" else 0
    word_level = method == "pll-word-l2r"
    extras: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    segments: list[tuple[int, int, int]] = []  # (sequence, first copy, end copy)
    width = capacity = used = 0

    def build() -> ScoringBatch:
        n = sum(b - a for _, a, b in segments)
        ids = np.full((n, width), pad, dtype=np.int64)
        mask = np.zeros((n, width), dtype=bool)
        cols = np.empty(n, dtype=np.int64)
        targets = np.empty(n, dtype=np.int64)
        owners = np.empty(n, dtype=np.int64)
        progress = 0.0
        row = 0
        for s, a, b in segments:
            seq, k = seqs[s], b - a
            length = len(seq.ids)
            ids[row:row + k, :length] = seq.ids
            mask[row:row + k, :length] = True
            positions = seq.scored[a:b]
            ids[np.arange(row, row + k), positions] = mask_id
            if word_level:
                copy_index, extra_cols = extras[s]
                chosen = (copy_index >= a) & (copy_index < b)
                ids[row + copy_index[chosen] - a, extra_cols[chosen]] = mask_id
                if b == len(seq.scored):
                    del extras[s]
            cols[row:row + k] = positions - shift
            targets[row:row + k] = seq.ids[positions] if seq.targets is None else seq.targets[a:b]
            owners[row:row + k] = s
            progress += k / len(seq.scored)
            row += k
        return ScoringBatch(ids, None if mask.all() else mask, np.arange(n), cols, targets, owners, progress)

    for s in order.tolist():
        seq = seqs[s]
        if word_level:
            extras[s] = _extra_masks(seq)
        first = 0
        while first < len(seq.scored):
            if not segments:
                width = len(seq.ids)
                capacity, used = max(1, batch_tokens // width), 0
            take = min(capacity - used, len(seq.scored) - first)
            segments.append((s, first, first + take))
            used += take
            first += take
            if used == capacity:
                yield build()
                segments = []
    if segments:
        yield build()

