"""clm group rows for models that continue a prefix's keys and values (``ScoringModel.keeps_prefixes``).

Entity tracking's groups (an item's options, or a scenario's items) have prefixes of ~220 tokens, and those of
different groups begin alike (scenarios start from the same boxes): of the 400k prefix tokens of the regular
split, 64k are distinct. So the groups, sorted by prefix, form runs that share a **base**, the run's common
beginning (:func:`shared_bases`). A batch runs its bases once each, causally and unmasked; then its rows, each
the **continuations** of a few groups of one run (a group's continuation: the rest of its prefix, then its
members' tails), attend their base's keys and values and their own tokens: a token sees the base, the rest of
its group's prefix up to itself and its own tail up to itself. No token goes through the body twice within a
batch, and attention is spent on [row x (base + row)] pairs instead of a whole prefix tree's square.

The hidden states come back as one flat row, [every base's positions, then every row's], and the reads index it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from antlm_bench.scoring.rows import Ragged, ScoringBatch, group_layouts

# a base that several groups share is at least this many tokens (shorter: each group is its own run)
MIN_SHARED_BASE = 16
# continuations are packed into rows of at most this many tokens (a wider group is split into runs of members)
ROW_TOKENS = 128
# the runs chosen by dynamic programming over the sorted prefixes span at most this many groups
_RUN_WINDOW = 64


def shared_bases(prefixes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Runs of the sorted ``prefixes`` that share a base: (each prefix's base length, its run's number).

    The runs minimise the tokens that go through the body, each base once plus every prefix's rest (a dynamic
    programme over consecutive runs of the sorted prefixes, at most ``_RUN_WINDOW`` long); a prefix alone is its
    own base."""
    order = sorted(range(len(prefixes)), key=lambda k: prefixes[k].tolist())
    lengths = [len(prefixes[k]) for k in order]
    common = []
    for a, b in zip(order, order[1:]):
        n = min(len(prefixes[a]), len(prefixes[b]))
        differ = np.flatnonzero(prefixes[a][:n] != prefixes[b][:n])
        common.append(int(differ[0]) if len(differ) else n)
    best = [0] + [0] * len(order)
    start = [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):  # best[j]: the cheapest runs of the first j prefixes
        base, total = lengths[j - 1], 0
        best[j], start[j] = best[j - 1] + base, j - 1
        for i in range(j - 1, max(-1, j - 1 - _RUN_WINDOW), -1):
            total += lengths[i]
            if i < j - 1:
                base = min(base, common[i])
                if base < MIN_SHARED_BASE:
                    break
                cost = best[i] + base + total - (j - i) * base
                if cost < best[j]:
                    best[j], start[j] = cost, i
    cuts = np.zeros(len(prefixes), dtype=np.int64)
    runs = np.zeros(len(prefixes), dtype=np.int64)
    j, number = len(order), 0
    while j > 0:
        i = start[j]
        members = order[i:j]
        cuts[members] = lengths[i] if j - i == 1 else min(common[i:j - 1])
        runs[members] = number
        j, number = i, number + 1
    return cuts, runs


def continuation_batches(rag: Ragged, layouts: list, batch_tokens: int, pad: int,
                         cells: np.ndarray | None = None) -> Iterator[ScoringBatch]:
    """Batches of bases and continuation rows (see the module docstring) for groups of sequences that share a
    beginning, laid out by ``rows.group_layouts``; a group wider than a row is first split into runs of its
    members (each then with its own, longer, common prefix)."""
    layouts = group_layouts(rag, _pieces(rag, layouts))
    prefixes = [rag.ids[rag.starts[m[0]]:rag.starts[m[0]] + p] for m, p, _, _ in layouts]
    cuts, runs = shared_bases(prefixes)
    pieces: dict[int, list[tuple[int, np.ndarray, int]]] = {}  # run: (group, members, continuation width)
    for g, (members, _, _, width) in enumerate(layouts):
        pieces.setdefault(int(runs[g]), []).append((g, members, width - int(cuts[g])))
    rows: list[tuple[int, list[tuple[int, np.ndarray, int]], int]] = []  # (run, pieces, width)
    for run, run_pieces in pieces.items():  # first fit, widest first, within the run
        open_rows: list[list] = []
        for piece in sorted(run_pieces, key=lambda p: -p[2]):
            for row in open_rows:
                if row[1] + piece[2] <= ROW_TOKENS:
                    row[0].append(piece)
                    row[1] += piece[2]
                    break
            else:
                open_rows.append([[piece], piece[2]])
        rows.extend((run, row_pieces, width) for row_pieces, width in open_rows)
    base_of_run = {int(runs[g]): int(cuts[g]) for g in range(len(layouts))}
    rows.sort(key=lambda r: (-base_of_run[r[0]], r[0], -r[2]))
    chosen: list = []
    widest = longest = 0
    runs_in: set[int] = set()
    for row in rows:
        base = base_of_run[row[0]]
        n_bases = len(runs_in | {row[0]})
        if chosen and (len(chosen) + 1) * max(widest, row[2]) + n_bases * max(longest, base) > batch_tokens:
            yield _build(rag, layouts, cuts, chosen, pad, cells)
            chosen, widest, longest, runs_in = [], 0, 0, set()
        chosen.append(row)
        widest, longest = max(widest, row[2]), max(longest, base)
        runs_in.add(row[0])
    if chosen:
        yield _build(rag, layouts, cuts, chosen, pad, cells)


def _pieces(rag: Ragged, layouts: list) -> list[np.ndarray]:
    """Each group's members in runs whose tails (after the group's prefix) fill at most a row. A group whose
    members part at their first difference into parts of two or more each (a scenario's items, merged by
    ``merge_prefix_groups``) is split there first: each part then has its own longer prefix."""
    inputs = rag.lengths - 1
    out = []
    for members, prefix, _, _ in layouts:
        parts = [members]
        if int(inputs[members].min()) > prefix:
            at = rag.ids[rag.starts[members] + prefix]  # the token where the members part
            split = [members[at == token] for token in dict.fromkeys(at.tolist())]
            if len(split) > 1 and min(len(part) for part in split) >= 2:
                parts = split
        for part in parts:
            chunk: list[int] = []
            width = 0
            for m in part.tolist():
                tail = int(inputs[m]) - prefix
                if chunk and width + tail > ROW_TOKENS:
                    out.append(np.asarray(chunk, dtype=np.int64))
                    chunk, width = [], 0
                chunk.append(m)
                width += tail
            out.append(np.asarray(chunk, dtype=np.int64))
    return out


def _build(rag: Ragged, layouts: list, cuts: np.ndarray, rows: list, pad: int, cells: np.ndarray | None) -> ScoringBatch:
    inputs = rag.lengths - 1
    run_numbers = sorted({run for run, _, _ in rows})
    local = {run: k for k, run in enumerate(run_numbers)}
    base_group = {run: pieces[0][0] for run, pieces, _ in rows}
    p_width = max(int(cuts[base_group[run]]) for run in run_numbers)
    t_width = max(1, *(width for _, _, width in rows))  # a row may continue nothing (reads in its base only)
    n = len(rows)
    prefix_ids = np.full((len(run_numbers), p_width), pad, dtype=np.int64)
    for run in run_numbers:
        g = base_group[run]
        start = rag.starts[layouts[g][0][0]]
        prefix_ids[local[run], :cuts[g]] = rag.ids[start:start + cuts[g]]
    ids = np.full((n, t_width), pad, dtype=np.int64)
    position_ids = np.zeros((n, t_width), dtype=np.int64)
    group = np.full((n, t_width), -1, dtype=np.int64)  # which piece of the row (-1: padding)
    branch = np.zeros((n, t_width), dtype=np.int64)  # 0: the rest of the group's prefix, k + 1: member k's tail
    base_cut = np.zeros(n, dtype=np.int64)
    flat, targets, owners, keys = [], [], [], []
    row_offset = len(run_numbers) * p_width
    for r, (run, row_pieces, _) in enumerate(rows):
        at = 0
        for slot, (g, members, _) in enumerate(row_pieces):
            prefix, cut = layouts[g][1], int(cuts[g])
            base_cut[r] = cut
            first = int(rag.starts[members[0]])
            rest_at = at
            ids[r, at:at + prefix - cut] = rag.ids[first + cut:first + prefix]
            position_ids[r, at:at + prefix - cut] = np.arange(cut, prefix)
            group[r, at:at + prefix - cut] = slot
            at += prefix - cut
            for k, m in enumerate(members.tolist()):
                length, start = int(inputs[m]) - prefix, int(rag.starts[m])
                ids[r, at:at + length] = rag.ids[start + prefix:start + prefix + length]
                position_ids[r, at:at + length] = np.arange(prefix, prefix + length)
                group[r, at:at + length] = slot
                branch[r, at:at + length] = k + 1
                scored_at = int(rag.scored_starts[m])
                positions = rag.scored[scored_at:scored_at + int(rag.n_scored[m])]
                source = positions - 1  # position j is predicted at the token j - 1
                in_row = np.where(source < prefix, rest_at + source - cut, at + source - prefix)
                flat.append(np.where(source < cut, local[run] * p_width + source,
                                     row_offset + r * t_width + in_row))
                targets.append(rag.ids[start + positions])
                owners.append(np.full(len(positions), m, dtype=np.int64))
                if cells is not None:
                    keys.append(cells[scored_at:scored_at + len(positions)])
                at += length
    real = group >= 0
    sees_base = (np.arange(p_width)[None, :] < base_cut[:, None])[:, None, :] & real[:, :, None]
    sees_row = (position_ids[:, None, :] <= position_ids[:, :, None]) & (group[:, None, :] == group[:, :, None]) & (
        (branch[:, None, :] == 0) | (branch[:, None, :] == branch[:, :, None])) & real[:, :, None]
    sees_row |= np.eye(t_width, dtype=bool)[None]
    reads = np.concatenate(flat)
    return ScoringBatch(ids, None, np.zeros(len(reads), dtype=np.int64), reads, np.concatenate(targets),
                 np.concatenate(owners), float(sum(len(members) for _, ps, _ in rows for _, members, _ in ps)),
                 np.concatenate(keys) if cells is not None else None, position_ids,
                 np.concatenate([sees_base, sees_row], axis=2), prefix_ids,
                 np.asarray([local[run] for run, _, _ in rows], dtype=np.int64))
