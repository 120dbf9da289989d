"""clm rows that are prefix trees: several sequences in one row, each distinct prefix once, position ids = depth
and a mask that lets a token see its own ancestors only."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from antlm_bench.scoring.rows import Ragged, ScoringBatch, spans

# prefix-tree rows hold at most this many tokens (a longer sequence gets a row of its own): wider rows share more
# prefixes, but attention grows with the square of the row; 64 was fastest on BLiMP at hidden sizes 64 to 768
TREE_ROW_TOKENS = 64
# sequences longer than this are not put into prefix trees, and one forest spans at most this many
# sequences x length cells: the [sequences x length] index arrays of PrefixForest stay within ~32 MiB each
TREE_MAX_LENGTH = 256
TREE_FOREST_CELLS = 1 << 22


@dataclass
class PrefixForest:
    """Sequences (their clm inputs: all tokens but the last) packed into rows that are prefix trees.

    The sequences are sorted lexicographically, so that a sequence's longest shared prefix with any earlier one
    is the one with its predecessor, and consecutive sequences fill a row while it has room. Every distinct
    prefix of a row's sequences is one node; nodes are numbered in order of appearance (parents first).
    """

    seqs: np.ndarray  # int64 [S] sequence indices in sorted order
    path: np.ndarray  # int64 [S, L] global node of each input position of each sorted sequence (-1 beyond)
    row_of_seq: np.ndarray  # int64 [S]
    node_token: np.ndarray  # int64 [nodes]
    node_depth: np.ndarray  # int64 [nodes]
    node_seq: np.ndarray  # int64 [nodes] a sorted sequence through the node (its ancestors: that path's first ones)
    row_first_node: np.ndarray  # int64 [rows + 1]
    row_first_seq: np.ndarray  # int64 [rows + 1]

    @property
    def row_nodes(self) -> np.ndarray:
        return np.diff(self.row_first_node)

    @classmethod
    def build(cls, rag: Ragged, seqs: np.ndarray, row_tokens: int) -> PrefixForest:
        lengths = rag.lengths[seqs] - 1  # inputs: the last token predicts nothing
        width = int(lengths.max(initial=1))
        tokens = np.full((len(seqs), width), -1, dtype=np.int64)  # -1 sorts a prefix before its extensions
        flat, within = spans(rag.starts[seqs], lengths)
        tokens[np.repeat(np.arange(len(seqs)), lengths), within] = rag.ids[flat]
        order = np.lexsort(tokens.T[::-1])
        seqs, lengths, tokens = seqs[order], lengths[order], tokens[order]

        same = np.zeros(len(seqs), dtype=np.int64)  # shared prefix with the predecessor
        if len(seqs) > 1:
            equal = (tokens[1:] == tokens[:-1]) & (tokens[1:] >= 0)
            same[1:] = np.cumprod(equal, axis=1).sum(axis=1)
        starts_row = np.zeros(len(seqs), dtype=bool)
        used = row_tokens
        for k, (length, shared) in enumerate(zip(lengths.tolist(), same.tolist())):
            if used + length - shared > row_tokens:
                starts_row[k], used = True, length
            else:
                used += length - shared
        same[starts_row] = 0
        row_of_seq = np.cumsum(starts_row) - 1

        positions = np.arange(width)
        is_new = (positions[None, :] < lengths[:, None]) & (positions[None, :] >= same[:, None])
        node_of = np.cumsum(is_new.ravel()).reshape(is_new.shape) - 1  # global node id where is_new
        # a position that is not new belongs to the predecessor's node there: carry the sequence index forward
        owner = np.maximum.accumulate(np.where(is_new, np.arange(len(seqs))[:, None], -1), axis=0)
        inside = positions[None, :] < lengths[:, None]
        path = np.where(inside, node_of[np.maximum(owner, 0), positions[None, :]], -1)

        new_seq, new_pos = np.nonzero(is_new)  # row-major: the order of the node ids
        node_token = tokens[new_seq, new_pos]
        n_rows = int(row_of_seq[-1]) + 1 if len(seqs) else 0
        node_row = row_of_seq[new_seq]
        row_first_node = np.searchsorted(node_row, np.arange(n_rows + 1))
        row_first_seq = np.searchsorted(row_of_seq, np.arange(n_rows + 1))
        return cls(seqs, path, row_of_seq, node_token, new_pos.astype(np.int64), new_seq.astype(np.int64),
                   row_first_node, row_first_seq)

    def ancestor_mask(self, nodes: np.ndarray, batch_row: np.ndarray, slot: np.ndarray,
                      mask: np.ndarray) -> None:
        """Let each of ``nodes`` (at ``mask[batch_row, slot]``; its row's slots are its nodes in order) see the nodes
        on its path up to itself. Built per batch: the (node, ancestor) pairs of a whole forest, one per node and
        depth, were the largest arrays of clm scoring (several hundred MB on BLiMP) and grew with the items."""
        depths = self.node_depth[nodes]
        _, depth = spans(np.zeros(len(nodes), dtype=np.int64), depths + 1)
        child = np.repeat(np.arange(len(nodes)), depths + 1)
        ancestor = self.path[self.node_seq[nodes][child], depth]
        row_first = nodes - slot  # an ancestor is in its node's row: its slot is its offset from the row's first
        mask[batch_row[child], slot[child], ancestor - row_first[child]] = True


def clm_tree_batches(rag: Ragged, seqs: np.ndarray, batch_tokens: int, pad: int,
                     cells: np.ndarray | None = None, row_tokens: int = TREE_ROW_TOKENS,
                     forest_cells: int = TREE_FOREST_CELLS) -> Iterator[ScoringBatch]:
    """clm rows that are prefix trees of several sequences (see :class:`PrefixForest`), packed by the budget.

    ``seqs`` come longest first; consecutive runs of them form forests of at most ``forest_cells``.
    A padding slot sees only itself; real tokens never see padding or another branch of their tree.
    """
    start = 0
    while start < len(seqs):
        count = max(1, forest_cells // int(rag.lengths[seqs[start]]))
        yield from _forest_batches(rag, seqs[start:start + count], batch_tokens, pad, cells, row_tokens)
        start += count


def _forest_batches(rag: Ragged, seqs: np.ndarray, batch_tokens: int, pad: int,
                    cells: np.ndarray | None, row_tokens: int = TREE_ROW_TOKENS) -> Iterator[ScoringBatch]:
    forest = PrefixForest.build(rag, seqs, max(1, min(row_tokens, batch_tokens)))
    sizes = forest.row_nodes
    rows_order = np.argsort(-sizes, kind="stable")
    slot_in_batch = np.empty(len(sizes), dtype=np.int64)
    start = 0
    while start < len(rows_order):
        width = int(sizes[rows_order[start]])
        rows = rows_order[start:start + max(1, batch_tokens // width)]
        start += len(rows)
        n = len(rows)
        slot_in_batch[rows] = np.arange(n)
        node_first = forest.row_first_node[rows]
        nodes, slot = spans(node_first, sizes[rows])
        batch_row = np.repeat(np.arange(n), sizes[rows])
        ids = np.full((n, width), pad, dtype=np.int64)
        ids[batch_row, slot] = forest.node_token[nodes]
        position_ids = np.zeros((n, width), dtype=np.int64)
        position_ids[batch_row, slot] = forest.node_depth[nodes]
        mask = np.broadcast_to(np.eye(width, dtype=bool), (n, width, width)).copy()
        forest.ancestor_mask(nodes, batch_row, slot, mask)

        seq_first = forest.row_first_seq[rows]
        sorted_index, _ = spans(seq_first, forest.row_first_seq[rows + 1] - seq_first)
        members = forest.seqs[sorted_index]
        counts = rag.n_scored[members]
        scored_flat, _ = spans(rag.scored_starts[members], counts)
        positions = rag.scored[scored_flat]
        reads = np.repeat(sorted_index, counts)  # position j is predicted at the node of token j-1
        read_rows = slot_in_batch[forest.row_of_seq[reads]]
        read_cols = forest.path[reads, positions - 1] - forest.row_first_node[forest.row_of_seq[reads]]
        targets = rag.ids[np.repeat(rag.starts[members], counts) + positions]
        yield ScoringBatch(ids, None, read_rows, read_cols, targets, np.repeat(members, counts), float(len(members)),
                    None if cells is None else cells[scored_flat], position_ids, mask)

