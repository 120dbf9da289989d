"""The rows the scoring engine runs: a :class:`ScoringBatch` of token rows with the cells to read, and sequences as
:class:`Ragged` flat arrays that the row builders (clm_rows, prefix_tree, masked_rows) index into."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from antlm_bench.scoring.encode import Seq


@dataclass
class ScoringBatch:
    input_ids: np.ndarray  # int64 [B, T]
    attention_mask: np.ndarray | None  # bool [B, T]; None when no row is padded
    read_rows: np.ndarray  # int64 [N]
    read_cols: np.ndarray  # int64 [N]
    targets: np.ndarray  # int64 [N]
    owners: np.ndarray  # int64 [N] sequence index of each read
    progress: float  # sequences finished by this batch (fractions for split sentences)
    keys: np.ndarray | None = None  # int64 [N] shared-cell id of each read (clm), or None: every read distinct
    position_ids: np.ndarray | None = None  # int64 [B, T] of prefix-tree rows (clm), else None
    tree_mask: np.ndarray | None = None  # bool [B, T, T] of prefix-tree rows: True where a token may attend
    # clm group rows as bases and continuations (clm_rows.split_prefixes): the bases (int64 [bases, P], padded on
    # the right) and each row's base; ``input_ids`` are the continuations and ``tree_mask`` is [B, T, P + T]
    prefix_ids: np.ndarray | None = None
    prefix_rows: np.ndarray | None = None  # int64 [B]



@dataclass
class Ragged:
    """Many sequences as flat arrays: token ids and scored positions, with each sequence's start and length."""

    ids: np.ndarray  # int64, all sequences back to back
    starts: np.ndarray  # int64 [S]
    lengths: np.ndarray  # int64 [S]
    scored: np.ndarray  # int64, each sequence's scored positions back to back
    scored_starts: np.ndarray  # int64 [S]
    n_scored: np.ndarray  # int64 [S]

    @classmethod
    def of(cls, seqs: list[Seq]) -> Ragged:
        lengths = np.fromiter((len(s.ids) for s in seqs), dtype=np.int64, count=len(seqs))
        n_scored = np.fromiter((len(s.scored) for s in seqs), dtype=np.int64, count=len(seqs))
        return cls(np.concatenate([s.ids for s in seqs]), np.cumsum(lengths) - lengths, lengths,
                   np.concatenate([s.scored for s in seqs]), np.cumsum(n_scored) - n_scored, n_scored)


def spans(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices of the spans [start, start + count) one after another, and the offset within each span."""
    total = int(counts.sum())
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + within, within


def group_layouts(rag: Ragged, groups: list[np.ndarray]) -> list[tuple[np.ndarray, int, np.ndarray, int]]:
    """(members, prefix length, tail starts in the row, row width) of each group's row (clm): the members'
    common prefix once, then each member's tail; inputs are the sequences without their last token."""
    inputs = rag.lengths - 1
    layouts = []
    for members in groups:
        members = np.asarray(members, dtype=np.int64)
        shortest = int(inputs[members].min())
        first = rag.ids[rag.starts[members[0]]:rag.starts[members[0]] + shortest]
        prefix = shortest
        for m in members[1:]:
            other = rag.ids[rag.starts[m]:rag.starts[m] + shortest]
            differ = np.flatnonzero(other[:prefix] != first[:prefix])
            prefix = int(differ[0]) if len(differ) else prefix
        tails = inputs[members] - prefix
        tail_starts = prefix + np.cumsum(tails) - tails
        layouts.append((members, prefix, tail_starts, int(prefix + tails.sum())))
    return layouts
