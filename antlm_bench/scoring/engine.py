"""The batched scoring loop shared by every method.

Every method reduces to the same computation: rows of token ids go through the transformer body; at chosen
(row, position) cells the hidden state is gathered; the LM head runs on those rows only; a float32
log-softmax gives the log-probability of the target token, which is summed into its sequence's score.

- ``clm``: each sequence without its last token, causal attention; position j-1 predicts token j. Sequences
  that share a beginning (minimal pairs do) share one row when the model allows it: the row holds the prefix
  tree of several sequences, each token once, with position ids = depth and a mask that lets a token see its
  own ancestors only (:func:`clm_tree_batches`), so the common prefix goes through the body once.
- ``pll``: one row per scored token, that token replaced by the mask token, bidirectional attention; the
  masked position predicts its own token. ``pll-word-l2r`` also masks the later tokens of the same word;
  ``mntp`` reads the prediction for token i at position i-1.

Rows are sorted by length (longest first, so a too-large budget fails at once) and packed so that
``rows x padded length <= batch_tokens``; the masked copies of many sentences share a batch, and the copies of
one long sentence are split over as many batches as the budget needs. Peak activation memory is therefore
bounded by the budget whatever a sentence's length (a single row longer than the budget forms its own batch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain

import numpy as np
import torch

from antlm_bench.errors import UserError
from antlm_bench.scoring.encode import Seq
from antlm_bench.scoring.model import BIDIRECTIONAL, CAUSAL, ScoringModel

ProgressFn = Callable[[float], None]  # called with the number of sequences (fractional) finished by a batch

# float32 logits the head produces at once: a block that stays in cache is about 2x faster than one big block
# on CPU, and it keeps a big vocabulary's footprint bounded
_HEAD_CHUNK_BYTES = 1 << 21
_HEAD_CHUNK_ROWS = (128, 4096)


@dataclass
class Batch:
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


def _pad_id(sm: ScoringModel) -> int:
    tok = sm.tokenizer
    for candidate in (tok.pad_token_id, tok.eos_token_id, 0):
        if candidate is not None:
            return int(candidate)
    return 0


def longest_input(seqs: list[Seq], method: str) -> int:
    """The most positions any of ``seqs`` puts through the model (clm drops the last token)."""
    drop = 1 if method == "clm" else 0
    return max((len(seq.ids) - drop for seq in seqs if len(seq.scored)), default=0)


def _check_lengths(sm: ScoringModel, seqs: list[Seq], drop_last: bool) -> None:
    """Refuse inputs beyond the configured positions only where the model cannot represent them: rotary and
    relative positions (BabyLlama, LTG-BERT, Llama-style models) compute any position, so such inputs are
    scored whole, as the official BabyLM pipeline does; a learned table (GPT-2, BERT, RoBERTa) ends."""
    limit = sm.max_length
    if limit is None or sm.extends_positions:
        return
    for seq in seqs:
        length = len(seq.ids) - (1 if drop_last else 0)
        if length > limit:
            text = sm.tokenizer.decode(seq.ids[:12].tolist())
            raise UserError(
                f"{sm.name}: a sequence of {length} tokens ({text!r}...) exceeds the model's {limit} learned "
                "positions (absolute position embeddings cannot go beyond them); use a model with more positions "
                "or with rotary / relative positions"
            )


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


def _spans(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices of the spans [start, start + count) one after another, and the offset within each span."""
    total = int(counts.sum())
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + within, within


_HASH_MULTIPLIERS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))


def prefix_cells(rag: Ragged) -> tuple[np.ndarray, int]:
    """clm: an id per scored position (in ``rag.scored`` order), equal where the token and all before it are.

    ln p(t_j | t_<j) depends on the prefix only, and minimal pairs share long prefixes ("Who should Derek hug
    ..."): about a third of BLiMP's scored positions repeat one seen before. Each distinct cell goes through the
    LM head (two thirds of a tiny model's work) once, and every sequence that shares it reads the same number.
    A prefix is keyed by two independent 64-bit rolling hashes and its length (a false match: ~1e-26).
    """
    hashes = [np.zeros(len(rag.ids), dtype=np.uint64) for _ in _HASH_MULTIPLIERS]
    by_length = np.argsort(-rag.lengths, kind="stable")  # at step j the sequences still running come first
    starts = rag.starts[by_length]
    running = len(by_length)
    state = [rag.ids[starts].astype(np.uint64) + np.uint64(1) for _ in _HASH_MULTIPLIERS]
    for hashed, value in zip(hashes, state):
        hashed[starts] = value
    with np.errstate(over="ignore"):  # the rolling hashes wrap around modulo 2**64 on purpose
        for j in range(1, int(rag.lengths.max(initial=0))):
            while running and rag.lengths[by_length[running - 1]] <= j:
                running -= 1
            at = starts[:running] + j
            tokens = rag.ids[at].astype(np.uint64) + np.uint64(1)
            for hashed, value, multiplier in zip(hashes, state, _HASH_MULTIPLIERS):
                value[:running] = value[:running] * multiplier + tokens
                hashed[at] = value[:running]
    flat, _ = _spans(rag.scored_starts, rag.n_scored)
    at = np.repeat(rag.starts, rag.n_scored) + rag.scored[flat]
    keys = (hashes[0][at], hashes[1][at], rag.scored[flat].astype(np.uint64))
    if not len(at):
        return np.empty(0, dtype=np.int64), 0
    order = np.lexsort(keys)
    new = np.ones(len(order), dtype=bool)
    for key in keys:
        sorted_key = key[order]
        new[1:] &= sorted_key[1:] == sorted_key[:-1]
    new = ~new
    new[0] = True
    cells = np.empty(len(order), dtype=np.int64)
    cells[order] = np.cumsum(new) - 1
    return cells, int(new.sum())


def clm_batches(rag: Ragged, order: np.ndarray, batch_tokens: int, pad: int,
                cells: np.ndarray | None = None) -> Iterator[Batch]:
    """Rows = sequences without their last token; position j-1 predicts token j.

    Rows are padded on the right and run without an attention mask: under causal attention a real token never
    sees the padding after it, and the unmasked causal kernel is the fast one.
    """
    start = 0
    while start < len(order):
        width = int(rag.lengths[order[start]]) - 1  # longest first: the first row sets the padded length
        count = max(1, batch_tokens // max(width, 1))
        members = order[start:start + count]
        start += len(members)
        ids = np.full((len(members), width), pad, dtype=np.int64)
        flat, within = _spans(rag.starts[members], rag.lengths[members] - 1)
        ids[np.repeat(np.arange(len(members)), rag.lengths[members] - 1), within] = rag.ids[flat]
        counts = rag.n_scored[members]
        scored_flat, _ = _spans(rag.scored_starts[members], counts)
        positions = rag.scored[scored_flat]
        targets = rag.ids[np.repeat(rag.starts[members], counts) + positions]
        yield Batch(ids, None, np.repeat(np.arange(len(members)), counts), positions - 1, targets,
                    np.repeat(members, counts), float(len(members)), None if cells is None else cells[scored_flat])


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
    row_first_node: np.ndarray  # int64 [rows + 1]
    row_first_seq: np.ndarray  # int64 [rows + 1]
    edge_child: np.ndarray  # int64 [E] (node, ancestor-or-self) pairs, grouped by the child's row
    edge_ancestor: np.ndarray  # int64 [E]
    row_first_edge: np.ndarray  # int64 [rows + 1]

    @property
    def row_nodes(self) -> np.ndarray:
        return np.diff(self.row_first_node)

    @classmethod
    def build(cls, rag: Ragged, seqs: np.ndarray, row_tokens: int) -> PrefixForest:
        lengths = rag.lengths[seqs] - 1  # inputs: the last token predicts nothing
        width = int(lengths.max(initial=1))
        tokens = np.full((len(seqs), width), -1, dtype=np.int64)  # -1 sorts a prefix before its extensions
        flat, within = _spans(rag.starts[seqs], lengths)
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
        # each node sees the nodes on its sequence's path up to itself
        _, depth = _spans(np.zeros(len(new_seq), dtype=np.int64), new_pos + 1)
        child = np.repeat(np.arange(len(new_seq)), new_pos + 1)
        ancestor = path[new_seq[child], depth]
        row_first_edge = np.searchsorted(node_row[child], np.arange(n_rows + 1))
        return cls(seqs, path, row_of_seq, node_token, new_pos.astype(np.int64), row_first_node, row_first_seq,
                   child, ancestor, row_first_edge)


def clm_tree_batches(rag: Ragged, seqs: np.ndarray, batch_tokens: int, pad: int,
                     cells: np.ndarray | None = None, row_tokens: int = TREE_ROW_TOKENS) -> Iterator[Batch]:
    """clm rows that are prefix trees of several sequences (see :class:`PrefixForest`), packed by the budget.

    ``seqs`` come longest first; consecutive runs of them form forests of at most ``TREE_FOREST_CELLS``.
    A padding slot sees only itself; real tokens never see padding or another branch of their tree.
    """
    start = 0
    while start < len(seqs):
        count = max(1, TREE_FOREST_CELLS // int(rag.lengths[seqs[start]]))
        yield from _forest_batches(rag, seqs[start:start + count], batch_tokens, pad, cells, row_tokens)
        start += count


def _forest_batches(rag: Ragged, seqs: np.ndarray, batch_tokens: int, pad: int,
                    cells: np.ndarray | None, row_tokens: int = TREE_ROW_TOKENS) -> Iterator[Batch]:
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
        nodes, slot = _spans(node_first, sizes[rows])
        batch_row = np.repeat(np.arange(n), sizes[rows])
        ids = np.full((n, width), pad, dtype=np.int64)
        ids[batch_row, slot] = forest.node_token[nodes]
        position_ids = np.zeros((n, width), dtype=np.int64)
        position_ids[batch_row, slot] = forest.node_depth[nodes]
        mask = np.broadcast_to(np.eye(width, dtype=bool), (n, width, width)).copy()
        edge_first = forest.row_first_edge[rows]
        edges, _ = _spans(edge_first, forest.row_first_edge[rows + 1] - edge_first)
        edge_row = np.repeat(np.arange(n), forest.row_first_edge[rows + 1] - edge_first)
        row_base = node_first[edge_row]
        mask[edge_row, forest.edge_child[edges] - row_base, forest.edge_ancestor[edges] - row_base] = True

        seq_first = forest.row_first_seq[rows]
        sorted_index, _ = _spans(seq_first, forest.row_first_seq[rows + 1] - seq_first)
        members = forest.seqs[sorted_index]
        counts = rag.n_scored[members]
        scored_flat, _ = _spans(rag.scored_starts[members], counts)
        positions = rag.scored[scored_flat]
        reads = np.repeat(sorted_index, counts)  # position j is predicted at the node of token j-1
        read_rows = slot_in_batch[forest.row_of_seq[reads]]
        read_cols = forest.path[reads, positions - 1] - forest.row_first_node[forest.row_of_seq[reads]]
        targets = rag.ids[np.repeat(rag.starts[members], counts) + positions]
        yield Batch(ids, None, read_rows, read_cols, targets, np.repeat(members, counts), float(len(members)),
                    None if cells is None else cells[scored_flat], position_ids, mask)


def clm_group_batches(rag: Ragged, groups: list[np.ndarray], batch_tokens: int, pad: int,
                      cells: np.ndarray | None = None) -> Iterator[Batch]:
    """clm rows of one group each: the group's common prefix once, then every member's own tail.

    For sequences known to share a long beginning (entity tracking: the five options of an item after a
    ~300-token prefix), this is the prefix tree of the group with one branch point, built directly: a tail token
    sees the prefix and its own tail up to itself (positions continue from the prefix), so the prefix goes
    through the body once per item instead of five times. Rows are packed by the token budget, widest first.
    """
    inputs = rag.lengths - 1
    layouts = []  # (members, prefix length, tail starts in the row, row width)
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
    order = sorted(range(len(layouts)), key=lambda k: -layouts[k][3])
    start = 0
    while start < len(order):
        width = layouts[order[start]][3]
        chosen = [layouts[k] for k in order[start:start + max(1, batch_tokens // max(width, 1))]]
        start += len(chosen)
        n = len(chosen)
        ids = np.full((n, width), pad, dtype=np.int64)
        position_ids = np.zeros((n, width), dtype=np.int64)
        segment = np.full((n, width), -1, dtype=np.int64)  # 0: prefix, k + 1: member k's tail, -1: padding
        read_rows, read_cols, targets, owners, keys = [], [], [], [], []
        for row, (members, prefix, tail_starts, _) in enumerate(chosen):
            base = rag.starts[members[0]]
            ids[row, :prefix] = rag.ids[base:base + prefix]
            position_ids[row, :prefix] = np.arange(prefix)
            segment[row, :prefix] = 0
            for k, (m, tail_start) in enumerate(zip(members.tolist(), tail_starts.tolist())):
                length = int(inputs[m]) - prefix
                at = int(rag.starts[m])
                ids[row, tail_start:tail_start + length] = rag.ids[at + prefix:at + prefix + length]
                position_ids[row, tail_start:tail_start + length] = np.arange(prefix, prefix + length)
                segment[row, tail_start:tail_start + length] = k + 1
                scored_at = int(rag.scored_starts[m])
                positions = rag.scored[scored_at:scored_at + int(rag.n_scored[m])]
                source = positions - 1  # position j is predicted at the token j - 1
                read_cols.append(np.where(source < prefix, source, tail_start + source - prefix))
                read_rows.append(np.full(len(positions), row, dtype=np.int64))
                targets.append(rag.ids[at + positions])
                owners.append(np.full(len(positions), m, dtype=np.int64))
                if cells is not None:
                    keys.append(cells[scored_at:scored_at + len(positions)])
        # token i sees token j: j not after i, and j in the prefix or in i's own tail; padding sees only itself
        visible = (position_ids[:, None, :] <= position_ids[:, :, None]) & (
            (segment[:, None, :] == 0) | (segment[:, None, :] == segment[:, :, None])) & (segment[:, :, None] >= 0)
        visible |= np.eye(width, dtype=bool)[None]
        yield Batch(ids, None, np.concatenate(read_rows), np.concatenate(read_cols), np.concatenate(targets),
                    np.concatenate(owners), float(sum(len(c[0]) for c in chosen)),
                    np.concatenate(keys) if cells is not None else None, position_ids, visible)


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
) -> Iterator[Batch]:
    """Rows = masked copies of the sequences (one per scored token), many sentences per batch."""
    shift = 1 if method == "mntp" else 0
    word_level = method == "pll-word-l2r"
    extras: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    segments: list[tuple[int, int, int]] = []  # (sequence, first copy, end copy)
    width = capacity = used = 0

    def build() -> Batch:
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
        return Batch(ids, None if mask.all() else mask, np.arange(n), cols, targets, owners, progress)

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


def shard() -> tuple[int, int]:
    """(rank, world size) of the torch.distributed group scoring is sharded over; (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _sum_over_ranks(values: torch.Tensor, world: int) -> torch.Tensor:
    """Every rank's values added up: each value was computed by one rank and is 0.0 on the others, so the sum
    is that value exactly (x + 0.0 == x), and every rank ends with the numbers one process computes."""
    if world > 1:
        import torch.distributed as dist

        dist.all_reduce(values)
    return values


def run_batches(sm: ScoringModel, batches: Iterator[Batch], n_seqs: int, mode: str,
                progress: ProgressFn | None = None, n_keys: int = 0) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Target log-probabilities of every batch: summed per sequence (float64), or, with ``n_keys`` (batches that
    carry shared-cell keys), one value per key, each computed at its first occurrence only.

    Sharded over a torch.distributed group (``torchrun``), every rank builds the same batches in the same order
    and runs those whose index is its rank modulo the world size; a shared cell is computed in the batch of its
    first occurrence, as in one process, and each sequence's sum is taken in batch order after the values are
    gathered. So every batch, and every number, is the one a single process computes.
    """
    device = sm.device
    rank, world = shard()
    key_values = np.zeros(n_keys, dtype=np.float64)
    known = np.zeros(n_keys, dtype=bool)
    computed: list[torch.Tensor] = []  # per batch (no keys): its reads' log-probabilities, zeros if not ours
    owners: list[np.ndarray] = []
    vocab = int(getattr(sm.module.config, "vocab_size", 0) or 32768)
    chunk = min(max(_HEAD_CHUNK_BYTES // (4 * vocab), _HEAD_CHUNK_ROWS[0]), _HEAD_CHUNK_ROWS[1])
    with torch.inference_mode():
        for index, batch in enumerate(batches):
            mine = index % world == rank
            reads = slice(None)
            if batch.keys is not None:  # only cells no earlier read has computed, each once
                fresh = np.flatnonzero(~known[batch.keys])
                new_keys, first = np.unique(batch.keys[fresh], return_index=True)
                reads = fresh[first]
                if not len(reads) or not mine:  # known already, or another rank's: no forward pass here
                    known[new_keys] = True
                    if progress is not None:
                        progress(batch.progress)
                    continue
            elif not mine:
                computed.append(torch.zeros(len(batch.owners), dtype=torch.float64, device=device))
                owners.append(batch.owners)
                if progress is not None:
                    progress(batch.progress)
                continue
            ids = torch.from_numpy(batch.input_ids).to(device, non_blocking=True)
            if batch.tree_mask is not None:
                hidden = sm.tree_hidden(ids, torch.from_numpy(batch.position_ids).to(device),
                                        torch.from_numpy(batch.tree_mask).to(device))
            else:
                mask = None if batch.attention_mask is None else torch.from_numpy(batch.attention_mask).to(device).long()
                hidden = sm.hidden(ids, mask, mode)
            rows = torch.from_numpy(batch.read_rows[reads]).to(device)
            cols = torch.from_numpy(batch.read_cols[reads]).to(device)
            targets = torch.from_numpy(batch.targets[reads]).to(device)
            selected = hidden[rows, cols]
            del hidden
            pieces = []
            for lo in range(0, selected.shape[0], chunk):
                logits = sm.head(selected[lo:lo + chunk])
                # float32 whatever the model's dtype, at least: a float64 model (the parity tests) keeps float64
                logits = logits if logits.dtype == torch.float64 else logits.float()
                logprobs = torch.log_softmax(logits, dim=-1)  # one fused kernel: faster here than logsumexp
                pieces.append(logprobs.gather(1, targets[lo:lo + chunk, None]).squeeze(1))
            target_logprobs = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
            if batch.keys is not None:
                key_values[new_keys] = target_logprobs.double().cpu().numpy()
                known[new_keys] = True
            else:
                computed.append(target_logprobs.double())
                owners.append(batch.owners)
            if progress is not None:
                progress(batch.progress)
    if n_keys:
        gathered = _sum_over_ranks(torch.from_numpy(key_values).to(device), world)
        return gathered.cpu().numpy().astype(np.float64)
    if not computed:
        return np.zeros(n_seqs, dtype=np.float64)
    values = _sum_over_ranks(torch.cat(computed), world).cpu().numpy()
    # one ordered float64 sum per sequence (reads in batch order): the same with any number of ranks
    return np.bincount(np.concatenate(owners), weights=values, minlength=n_seqs)


def score_seqs(sm: ScoringModel, seqs: list[Seq], method: str, batch_tokens: int = 4096,
               progress: ProgressFn | None = None, groups: list[np.ndarray] | None = None) -> np.ndarray:
    """Summed natural-log scores of unique sequences under ``method``.

    ``groups`` (clm): sets of sequence indices known to share a long beginning (entity tracking: an item's five
    options after a ~300-token prefix); each group becomes one row, its common prefix computed once
    (:func:`clm_group_batches`). Other sequences go into the general prefix-tree rows."""
    if batch_tokens < 1:
        raise UserError(f"--batch-tokens {batch_tokens}: must be a positive number of tokens")
    mode = CAUSAL if method == "clm" else BIDIRECTIONAL
    sm.check_mode(mode, method)
    scores = np.zeros(len(seqs), dtype=np.float64)
    live = np.asarray([i for i, seq in enumerate(seqs) if len(seq.scored)], dtype=np.int64)
    if progress is not None and len(live) < len(seqs):
        progress(float(len(seqs) - len(live)))  # nothing to score in those: done at once
    if not len(live):
        return scores
    _check_lengths(sm, [seqs[i] for i in live], drop_last=method == "clm")
    lengths = np.asarray([len(seqs[i].ids) for i in live])
    order = live[np.argsort(-lengths, kind="stable")]
    pad = _pad_id(sm)
    if method == "clm":
        rag = Ragged.of(seqs)
        cells, n_cells = prefix_cells(rag)
        if sm.shares_prefixes:
            grouped = [g[np.isin(g, live)] for g in (np.asarray(g, dtype=np.int64) for g in groups or [])]
            grouped = [g for g in grouped if len(g)]
            rest = order[~np.isin(order, np.concatenate(grouped))] if grouped else order
            long = rag.lengths[rest] > TREE_MAX_LENGTH
            batches = chain(clm_group_batches(rag, grouped, batch_tokens, pad, cells),
                            clm_batches(rag, rest[long], batch_tokens, pad, cells),
                            clm_tree_batches(rag, rest[~long], batch_tokens, pad, cells))
        else:
            batches = clm_batches(rag, order, batch_tokens, pad, cells)
        values = run_batches(sm, batches, len(seqs), mode, progress, n_keys=n_cells)
        owners = np.repeat(np.arange(len(seqs)), rag.n_scored)
        return _finite(sm, np.bincount(owners, weights=values[cells], minlength=len(seqs)), method)
    if method in ("pll", "pll-word-l2r", "mntp"):
        batches = masked_batches(seqs, order, batch_tokens, pad, int(sm.tokenizer.mask_token_id), method)
    else:
        raise UserError(f"--scoring {method}: unknown; use clm, pll, pll-word-l2r or mntp")
    return _finite(sm, run_batches(sm, batches, len(seqs), mode, progress), method)


def _finite(sm: ScoringModel, scores: np.ndarray, method: str) -> np.ndarray:
    """The summed scores, if every one is a number. One NaN or infinite log-probability makes its sum non-finite,
    so one vectorised test of the sums covers every token; a NaN compared with anything is False, and would be
    counted as a loss and end in a table as a plausible-looking accuracy."""
    bad = ~np.isfinite(scores)
    if bad.any():
        kind = "NaN" if np.isnan(scores[bad]).any() else "infinite"
        raise UserError(f"{sm.name}: {kind} log-probabilities ({int(bad.sum())} of {len(scores)} sequences scored "
                        f"with {method}); the weights are broken (a diverged or damaged checkpoint); score another "
                        "checkpoint")
    return scores
