"""clm rows: plain rows (one sequence each), group rows (a group's common prefix once, then each member's tail),
and the ids of scored cells that repeat across sequences (computed once by the LM head)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from antlm_bench.scoring.rows import Ragged, ScoringBatch, group_layouts, spans
from antlm_bench.scoring.shared_bases import continuation_batches

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
    flat, _ = spans(rag.scored_starts, rag.n_scored)
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
                cells: np.ndarray | None = None) -> Iterator[ScoringBatch]:
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
        flat, within = spans(rag.starts[members], rag.lengths[members] - 1)
        ids[np.repeat(np.arange(len(members)), rag.lengths[members] - 1), within] = rag.ids[flat]
        counts = rag.n_scored[members]
        scored_flat, _ = spans(rag.scored_starts[members], counts)
        positions = rag.scored[scored_flat]
        targets = rag.ids[np.repeat(rag.starts[members], counts) + positions]
        yield ScoringBatch(ids, None, np.repeat(np.arange(len(members)), counts), positions - 1, targets,
                    np.repeat(members, counts), float(len(members)), None if cells is None else cells[scored_flat])


def clm_group_batches(rag: Ragged, groups: list[np.ndarray], batch_tokens: int, pad: int,
                      cells: np.ndarray | None = None, keep_prefix: bool = False) -> Iterator[ScoringBatch]:
    """clm rows of one group each: the group's common prefix once, then every member's own tail.

    For sequences known to share a long beginning (entity tracking: the five options of an item after a
    ~300-token prefix), this is the prefix tree of the group with one branch point, built directly: a tail token
    sees the prefix and its own tail up to itself (positions continue from the prefix), so the prefix goes
    through the body once per item instead of five times. Rows are packed by the token budget, widest first.

    ``keep_prefix`` (models that continue a prefix's keys and values, ``ScoringModel.keeps_prefixes``): groups
    whose prefixes begin alike (entity tracking: scenarios that start from the same boxes) share a base, run once
    per batch, and rows continue it (:mod:`antlm_bench.scoring.shared_bases`).
    """
    layouts = group_layouts(rag, groups)
    if keep_prefix and all(layout[1] > 0 for layout in layouts):
        yield from continuation_batches(rag, layouts, batch_tokens, pad, cells)
        return
    order = sorted(range(len(layouts)), key=lambda k: -layouts[k][3])
    start = 0
    while start < len(order):
        width = layouts[order[start]][3]
        chosen = [layouts[k] for k in order[start:start + max(1, batch_tokens // max(width, 1))]]
        start += len(chosen)
        yield _with_tree_mask(*_fill_rows(rag, chosen, pad, cells))


def _fill_rows(rag: Ragged, chosen: list, pad: int, cells: np.ndarray | None) -> tuple[ScoringBatch, np.ndarray]:
    """The group rows [prefix | tail | tail ...] of a batch, and each slot's segment (0: prefix, k + 1: member k's
    tail, -1: padding); the batch's mask is still to be set."""
    inputs = rag.lengths - 1
    width = max(layout[3] for layout in chosen)
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
    batch = ScoringBatch(ids, None, np.concatenate(read_rows), np.concatenate(read_cols), np.concatenate(targets),
                  np.concatenate(owners), float(sum(len(c[0]) for c in chosen)),
                  np.concatenate(keys) if cells is not None else None, position_ids)
    return batch, segment


def _with_tree_mask(batch: ScoringBatch, segment: np.ndarray) -> ScoringBatch:
    """Token i sees token j: j not after i, and j in the prefix or in i's own tail; padding sees only itself."""
    position_ids = batch.position_ids
    visible = (position_ids[:, None, :] <= position_ids[:, :, None]) & (
        (segment[:, None, :] == 0) | (segment[:, None, :] == segment[:, :, None])) & (segment[:, :, None] >= 0)
    visible |= np.eye(segment.shape[1], dtype=bool)[None]
    batch.tree_mask = visible
    return batch
